"""A verdict: one of the lab's expected effects checked on a run's numbers, as data and as one line.

``Check`` (also named ``Verdict``) holds the claim, the outcome (``STATUSES``; ``mark`` prints it), the
figures compared with their units (``Quantity``), the noise band and what rerun would settle a verdict
too noisy to call (``Rerun``), why one cannot show its effect here, and its preconditions (``Need``).
``line`` is its one line; ``details`` what folds under it. ``servelab.report.effects.check`` makes them;
``servelab.report.verdicts`` shows them in a notebook and the report.
Why: docs/decisions/2026-12-01-verdicts-at-a-glance.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# the four outcomes a verdict can have (``Check.status``) and the mark each prints with (``Check.mark``)
OBSERVED, NOT_OBSERVED, TOO_NOISY = "observed", "not observed", "too noisy to call"
CANNOT_SHOW = "cannot show here"
STATUSES = (OBSERVED, NOT_OBSERVED, TOO_NOISY, CANNOT_SHOW)
MARKS = {OBSERVED: "observed", NOT_OBSERVED: "NOT observed", TOO_NOISY: "too noisy to call",
         CANNOT_SHOW: "cannot show here"}
NO_NUMBERS = "this run has no numbers for it"


@dataclass(frozen=True)
class Need:
    """A precondition of an effect: what the run must reach (``what``), whether it did (``met``; None
    where the run has no numbers to say) and what it reached (``reached``: for a need not met, why the
    run cannot show the effect, which ``check`` prints after "because")."""

    what: str
    met: bool | None = None
    reached: str = ""

    def said(self, short: bool = False) -> str:
        """"what — met: what it reached", "what — NOT met" (the verdict's evidence says why), or
        "what — not known"; ``short``: said once already, so only what comes before a colon in ``what``,
        and not what it reached."""
        what = self.what.split(": ", 1)[0] if short else self.what
        if self.met is False:
            return f"{what} — NOT met"
        mark = "met" if self.met else "not known"
        return f"{what} — {mark}{': ' + self.reached if self.reached and not short else ''}"


@dataclass(frozen=True)
class Quantity:
    """One figure a verdict compares: what it is, its value and its unit ("PyTorch", 35.2, "ms")."""

    what: str
    value: float
    unit: str = ""
    signed: bool = False  # a change: printed with its sign, "+48 ms"

    def __str__(self) -> str:
        sign = "+" if self.signed and self.value > 0 else ""
        return f"{self.what} {sign}{amount(self.value)}{_spaced(self.unit)}".strip()


def _spaced(unit: str) -> str:  # "35 ms", "35/s", "4.0×"
    return "" if not unit else unit if unit[0] in "/×" else f" {unit}"


@dataclass(frozen=True)
class Rerun:
    """What would settle a verdict too noisy to call: a parameter of the notebook's parameters cell, set
    ``to`` a value (a stability criterion that bounds the band), or scaled from its value in this run
    (``now``: more samples per level narrow a band about as 1 / √samples)."""

    parameter: str
    now: float | None = None
    to: Any = None
    why: str = ""

    def said(self, band: float, distance: float, unit: str = "") -> str:
        """"rerun with seq_requests = 80 (4× this run's: …)": the value that would narrow ``band`` below
        ``distance`` (how far the figure sits from the test's threshold), computed from the run."""
        if self.to is not None:
            return f"rerun with {self.parameter} = {self.to!r}" + (f" ({self.why})" if self.why else "")
        if not distance > 0:
            return (f"a larger {self.parameter} narrows the band, but this run's figure sits on the test's "
                    "threshold itself: no run length settles it")
        if self.now is None:
            return f"rerun with a larger {self.parameter} (more samples per level narrow the band)"
        factor = (band / distance) ** 2 * 1.2  # a fifth more than the band's √n scaling asks, for its noise
        value = _round_up(max(float(self.now) * factor, float(self.now) + 1))
        times = value / float(self.now)
        return (f"rerun with {self.parameter} = {value:g} ({times:.1f}× this run's {float(self.now):g}: a "
                f"band about {math.sqrt(times):.1f}× narrower, under the {amount(distance)}{_spaced(unit)} "
                "between this run's figure and the test's threshold)")


def _round_up(value: float) -> float:
    """Up to two significant digits: 83 → 83, 1234 → 1300."""
    scale = 10 ** max(0, math.floor(math.log10(value)) - 1)
    return math.ceil(value / scale) * scale


@dataclass
class Check:
    """A verdict: one of the lab's expected effects (``effect``, the claim), tested on this run's numbers.

    ``status`` is one of ``STATUSES`` (``mark`` prints it); ``figures`` are the figures compared, each with
    its unit; ``evidence`` is the whole sentence of numbers; ``band`` the noise band (in the figures' unit)
    and ``settle`` what would settle a verdict too noisy to call; ``reason`` why a verdict cannot show the
    effect here; ``needs`` its preconditions. ``line`` is its one line, ``details`` what folds under it
    (``servelab.report.verdicts`` shows both)."""

    effect: str
    status: str  # one of STATUSES
    evidence: str
    gpu_only: bool = False
    needs: tuple[Need, ...] = ()
    figures: tuple[Quantity, ...] = ()
    band: Quantity | None = None
    settle: str = ""
    reason: str = ""

    @property
    def claim(self) -> str:
        return self.effect

    @property
    def mark(self) -> str:
        return MARKS[self.status]

    @property
    def measured(self) -> bool:
        """Whether the run measured what this verdict compares (a verdict that cannot show its effect may
        still carry the numbers it would have judged)."""
        return self.status != CANNOT_SHOW or bool(self.figures)

    def said_figures(self) -> str:
        """What the line says after the claim: the figures compared, "PyTorch 35 ms, ONNX Runtime 9 ms"; for a
        verdict that cannot show its effect here, why, in its first clause (the whole reason and the
        figures fold under the line); the evidence where there is neither."""
        if self.status == CANNOT_SHOW and self.reason:
            return _clause(self.reason)
        if self.figures:
            return ", ".join(str(q) for q in self.figures)
        return self.evidence

    def line(self) -> str:
        """The verdict in one line: "observed: <claim> — <the figures compared>"."""
        return f"{self.mark}: {self.effect} — {self.said_figures()}"

    def details(self) -> list[str]:
        """What folds under the line: the reason (cannot show), the band and what would settle it (too
        noisy), the numbers in full, the preconditions, a GPU effect's expectation."""
        out = []
        if self.status == CANNOT_SHOW and self.reason and _clause(self.reason) != self.reason:
            out.append(f"why: {self.reason}")
        if self.status == CANNOT_SHOW and self.figures:
            out.append("figures: " + ", ".join(str(q) for q in self.figures))
        if self.band is not None:
            out.append(f"noise band: {amount(self.band.value)}{_spaced(self.band.unit)} ({self.band.what})")
        if self.settle:
            out.append(f"what would settle it: {self.settle}")
        if self.evidence and self.evidence not in (self.reason, self.said_figures()):
            out.append(f"numbers: {self.evidence}")
        out += [f"needs: {n.said()}" for n in self.needs]
        if self.gpu_only and self.status != OBSERVED:
            out.append("a GPU effect: expect it on the GPU node")
        return out


Verdict = Check  # the name the notebooks' exercises use


def _clause(text: str) -> str:
    """A reason's first clause for a verdict's line: up to its first colon, without what it says in
    parentheses ("'2 instances' never settled (perf_analyzer's windows …): …" → "'2 instances' never
    settled")."""
    import re

    head = re.sub(r"\s*\([^()]*\)", "", text).split(": ", 1)[0].strip()
    return head or text


def needs_said(c: Check) -> str:
    """"needs: a — met: …; b — NOT met": what the run had to reach for ``c``, and whether it did; "" when
    the rule states no precondition."""
    return "needs: " + "; ".join(n.said() for n in c.needs) if c.needs else ""



def amount(value: float) -> str:
    """A measured figure as the verdicts print it: three significant digits, never in e-notation."""
    size = abs(value)
    if size >= 100 or value == 0:
        return f"{value:.0f}"
    if size >= 10:
        return f"{value:.1f}".removesuffix(".0")
    digits = max(2, 2 - math.floor(math.log10(size)))  # three significant digits, in fixed point
    return f"{value:.{digits}f}".rstrip("0").rstrip(".")
