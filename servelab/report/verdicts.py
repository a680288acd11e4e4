"""Verdicts as a student reads them: one line each, what backs it folded under it, legends once.

``block(checks)`` is what a notebook cell shows (``servelab.lab.this_run.what_this_run_shows``): per verdict
its line (``Check.line``: the mark, the claim, the figures compared with their units), and under it its
details (``Check.details``) folded — a collapsed ``<details>`` in Jupyter and on the site, indented plain
text in the executed notebook's text. A detail this notebook has shown already (a reason shared by
several verdicts) is shown again by its first words only, and the legend (what the marks and the band
mean) comes once per notebook, under the first verdicts that need it (``forget`` starts afresh).
``report_html(checks)`` is the same for the report's page.
Why: docs/decisions/2026-12-01-verdicts-at-a-glance.md.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from servelab.report.verdict import CANNOT_SHOW, TOO_NOISY, Check

SHORT = 80  # a detail at least this long is said in full once per notebook, then by its first words
LEGEND = ("How to read a verdict: 'observed' and 'NOT observed' — this run's figures settle the claim one "
          "way; 'too noisy to call' — the figures were measured, but the gap the claim needs is inside their "
          "own noise band (the details say what rerun would settle it); 'cannot show here' — this run did "
          "not reach what the effect needs (a precondition, a GPU), or has no numbers for it, and says why. "
          "Under each line, folded: the numbers in full, the band, the preconditions.")
_shown: set[str] = set()  # the details and legends this kernel (one notebook) has shown in full


def forget() -> None:
    """Every detail and legend unsaid again (a test, or a notebook's kernel restarted by hand)."""
    _shown.clear()


def _once(text: str, short: str = "") -> str:
    """``text`` in full the first time this notebook shows it, then ``short`` (its first words) and
    "(as above)"."""
    if len(text) < SHORT or text not in _shown:
        _shown.add(text)
        return text
    return f"{short or text[:SHORT // 2].rsplit(' ', 1)[0] + ' …'} (as above)"


def _details(check: Check) -> list[str]:
    """``check``'s details as this notebook shows them now: a precondition said before by what it needs
    and whether it was met, any other repeated detail by its first words."""
    shorts = {f"needs: {n.said()}": f"needs: {n.said(short=True)}" for n in check.needs}
    return [_once(d, shorts.get(d, "")) for d in check.details()]


@dataclass
class Shown:
    """What one cell shows: each verdict's line with its details, then the legends new to this notebook;
    as HTML (folded) in Jupyter and on the site, as indented text in the notebook's plain output."""

    items: list[tuple[Check, list[str]]]
    legends: list[str] = field(default_factory=list)

    def text(self) -> str:
        out = []
        for check, details in self.items:
            out += [check.line(), *(f"  {d}" for d in details)]
        return "\n".join(out + self.legends)

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        parts = [_item_html(check, details) for check, details in self.items]
        parts += [f"<details><summary><small>{html.escape(legend.split(':', 1)[0])}</small></summary>"
                  f"<p><small>{html.escape(legend)}</small></p></details>" for legend in self.legends]
        return f'<div class="verdicts">{"".join(parts)}</div>'


CSS_CLASS = {"observed": "observed", "not observed": "not-observed", TOO_NOISY: "too-noisy",
             CANNOT_SHOW: "cannot-show"}
COLOUR = {"observed": "#070", "not observed": "#a00", TOO_NOISY: "#a60", CANNOT_SHOW: "#777"}


def _summary(check: Check) -> str:
    mark = (f'<b class="{CSS_CLASS[check.status]}" style="color:{COLOUR[check.status]}">'
            f"{html.escape(check.mark)}</b>")
    return f"{mark}: {html.escape(check.effect)} — {html.escape(check.said_figures())}"


def _item_html(check: Check, details: Sequence[str]) -> str:
    if not details:
        return f'<p class="verdict">{_summary(check)}</p>'
    folded = "".join(f"<li>{html.escape(d)}</li>" for d in details)
    return (f'<details class="verdict"><summary>{_summary(check)}</summary>'
            f'<ul style="font-size:.9em;margin:.2em 0 .6em">{folded}</ul></details>')


def block(checks: Iterable[Check], legends: Sequence[str] = ()) -> Shown:
    """``checks`` as one cell shows them; ``legends`` (definitions the verdicts use, e.g. the band's) and
    the marks' legend are added the first time this notebook shows them."""
    items = [(check, _details(check)) for check in checks]
    new = [legend for legend in (LEGEND, *legends) if legend and legend not in _shown]
    _shown.update(new)
    return Shown(items, new)


def report_html(checks: Iterable[Check], compared: Sequence[Check | None] = ()) -> str:
    """Verdicts for the report's page: one line each, the details folded (every detail in full: the page
    is read out of order), the compared run's outcome and figures at the end of the line."""
    parts = []
    others = list(compared)
    for n, check in enumerate(checks):
        other = others[n] if n < len(others) else None
        extra = (f" <small>(compared run: {html.escape(other.mark)}, {html.escape(other.said_figures())})"
                 "</small>") if other is not None else ""
        details = check.details()
        if not details:
            parts.append(f'<p class="verdict">{_summary(check)}{extra}</p>')
            continue
        folded = "".join(f"<li>{html.escape(d)}</li>" for d in details)
        parts.append(f'<details class="verdict"><summary>{_summary(check)}{extra}</summary><ul>{folded}</ul>'
                     "</details>")
    return f'<div class="verdicts">{"".join(parts)}</div>'
