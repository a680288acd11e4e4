"""An expected effect of the lab, checked on a run's numbers: the pieces every step's rules are made of.

A rule is a pure function of a run's tables: it picks numbers with ``row`` and returns a ``Check``
that says observed, within noise (the gap it tests is no larger than the measurement's own spread,
``noise=``), not observed, or not measured (a number it needs is missing, or the run did not meet the
effect's precondition: ``cannot_show``). A rule states its preconditions where it defines the effect
(``Need``, ``check(needs=)``); the notebook and the report print them beside the verdict
(``needs_said``). Each step module holds its own rules (``rules(data: RunData)``);
``servelab.lab.run_report`` lists them in order.
Why the noise rule reads as it does: docs/decisions/2026-11-23-noise-aware-verdicts.md; the
preconditions: docs/decisions/2026-11-26-verdicts-with-preconditions.md; a band from windows accepted
at any spread (``any_spread``, ``check(loose=)``): docs/decisions/2026-11-28-lessons-third-pass.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from servelab.results.schema import device_of, num, relative_spread

__all__ = ["STATUSES", "Check", "Need", "amount", "any_spread", "cannot_show", "check", "chosen",
           "needs_said", "noise_band", "noise_note", "relative_spread", "row", "settled_need", "spread",
           "unusable", "usable"]

NOISE_NOTE = ("Runs on a shared or small CPU are noisy, and several of the lab's effects belong to a GPU: "
              "a 'not observed' here is a fact about this run on this machine, not a hidden failure.")
GPU_NOISE_NOTE = ("Short runs are noisy on any machine, and a GPU run still measures some engines on the CPU "
                  "(each row names its device): a 'not observed' here is a fact about this run on this "
                  "machine, not a hidden failure.")


def noise_note(devices: Any) -> str:
    """The caveat the report prints with its verdicts: ``NOISE_NOTE`` for a run whose rows' ``device``
    values (``devices``) are all the CPU, ``GPU_NOISE_NOTE`` where any computed on a GPU."""
    on_gpu = any(str(d).lower().startswith("cuda") for d in devices if d == d and d is not None)
    return GPU_NOISE_NOTE if on_gpu else NOISE_NOTE


STATUSES = ("observed", "within noise", "not observed", "not measured")


@dataclass(frozen=True)
class Need:
    """A precondition of an effect: what the run must reach (``what``), whether it did (``met``; None
    where the run has no numbers to say) and what it reached (``reached``: for a need not met, why the
    run cannot show the effect, which ``check`` prints after "because")."""

    what: str
    met: bool | None = None
    reached: str = ""

    def said(self) -> str:
        """"what — met: what it reached", "what — NOT met" (the verdict's evidence says why), or
        "what — not known"."""
        if self.met is False:
            return f"{self.what} — NOT met"
        mark = "met" if self.met else "not known"
        return f"{self.what} — {mark}{': ' + self.reached if self.reached else ''}"


@dataclass
class Check:
    """One of the lab's expected effects, tested on this run's numbers, with its preconditions."""

    effect: str
    status: str  # one of STATUSES
    evidence: str
    gpu_only: bool = False
    needs: tuple[Need, ...] = ()


def needs_said(c: Check) -> str:
    """"needs: a — met: …; b — NOT met": what the run had to reach for ``c``, and whether it did; "" when
    the rule states no precondition."""
    return "needs: " + "; ".join(n.said() for n in c.needs) if c.needs else ""


def cannot_show(effect: str, because: str, gpu_only: bool = False, needs: tuple[Need, ...] = ()) -> Check:
    """The verdict for an effect whose precondition this run did not meet (the overload never came, the
    added replica never served, a level never settled): not measured, and why, never observed."""
    return Check(effect, "not measured", f"this run cannot show it, because {because}", gpu_only, needs)


def computed_on(df: pd.DataFrame, **where: Any) -> str:
    """" (on the CPU)", " (on the GPU (…))": where the rows matching ``where`` computed, for the evidence
    of a GPU effect (on a GPU host the local ONNX runner can still compute on the CPU); "" when the rows
    do not say."""
    where_ = device_of(df, **where)
    return f" (on the {where_})" if where_ else ""


def device_gap(df: pd.DataFrame, key: str, sides: dict[Any, str], **where: Any) -> str | None:
    """Why a comparison of two sides (``key`` == each of ``sides``' keys, named by its values) holds no
    device fixed: "PyTorch ran on the GPU (…), ONNX Runtime on the CPU" from the rows' own ``device``,
    for ``check(blocked=)``; None when both ran on one device or the rows do not say."""
    (a, name_a), (b, name_b) = sides.items()
    on_a, on_b = device_of(df, **{key: a}, **where), device_of(df, **{key: b}, **where)
    if on_a and on_b and on_a != on_b:
        return f"{name_a} ran on the {on_a}, {name_b} on the {on_b}"
    return None


def check(effect: str, values: tuple[float | None, ...], test: Callable[..., bool],
           evidence: Callable[..., str], gpu_only: bool = False,
           noise: tuple[float | None, ...] | None = None, unit: str = "",
           blocked: str | None = None, needs: tuple[Need, ...] = (), loose: str | None = None) -> Check:
    """``test(*values)`` decides observed or not. With ``noise`` (the relative spreads of ``values[0]``
    and ``values[1]``, e.g. 0.12 for windows 12 % apart) the verdict is "within noise" when moving
    the second value by the ``noise_band`` either way would change the test's answer: the gap to the
    test's own threshold (4×, 1.1×, equal) is inside the levels' noise; the band is printed in ``unit``.
    ``needs`` are the effect's preconditions: the first one not met makes it ``cannot_show`` (the
    numbers it would have judged follow the reason), as does
    ``blocked`` (why a precondition failed, e.g. from ``unusable``). ``loose`` (why the band bounds
    nothing: its windows were accepted at any spread, ``any_spread``) adds the need "a band narrower than
    the difference it judges": such a band cannot clear a difference, so where the gap is inside it the
    run cannot show the effect (meant for plain comparisons: the difference is ``values[1] − values[0]``).
    A value that is missing or NaN makes it not measured."""
    if (unmet := next((n for n in needs if n.met is False), None)) is not None:
        because = unmet.reached or f"it did not reach {unmet.what}"
        if not any(v is None or v != v for v in values):  # the numbers it would have judged, after why
            said = evidence(*values)
            because += f". {said[0].upper()}{said[1:]}"
        return cannot_show(effect, because, gpu_only, needs)
    if blocked:
        return cannot_show(effect, blocked, gpu_only, needs)
    if any(v is None or v != v for v in values):
        return Check(effect, "not measured", "this run has no numbers for it", gpu_only, needs)
    said = evidence(*values)
    ok = bool(test(*values))
    if noise is not None and len(values) >= 2:
        band = noise_band(values[0], values[1], *noise[:2])
        if band is not None:
            units = f" {unit}" if unit else ""
            said += f" (spread {amount(band)}{units})"
            first, second, rest = values[0], float(values[1]), values[2:]  # type: ignore[arg-type]
            inside = bool(test(first, second - band, *rest)) != bool(test(first, second + band, *rest))
            if loose:
                gap = abs(second - float(first))  # type: ignore[arg-type]
                wide = f"the band ({amount(band)}{units}) is wider than the difference it judges " \
                       f"({amount(gap)}{units}): {loose}"
                needs = (*needs, Need(BAND_NEED, not inside, wide if inside else
                                      f"band {amount(band)}{units}, difference {amount(gap)}{units}"))
                if inside:
                    return cannot_show(effect, f"{wide}. {said[0].upper()}{said[1:]}", gpu_only, needs)
            if inside:
                return Check(effect, "within noise", said, gpu_only, needs)
    return Check(effect, "observed" if ok else "not observed", said, gpu_only, needs)


BAND_NEED = "a noise band narrower than the difference it judges"
ANY_SPREAD_PCT = 100.0  # a stability criterion this wide lets windows differ by as much as the value itself


def any_spread(df: pd.DataFrame, column: str, pick: str = "last", **where: Any) -> str | None:
    """Why the band of the row ``row`` reads ``column`` from bounds nothing, for ``check(loose=)``: the
    level's windows were accepted by a stability criterion of ``ANY_SPREAD_PCT`` % or more (the quick
    preset's rate levels: any spread), read from its ``stability_pct`` or its perf_analyzer command;
    None for a level measured to a real criterion, or one that does not say."""
    picked = chosen(df, column, pick, **where)
    if picked is None:
        return None
    pct = pd.to_numeric(pd.Series([picked.get("stability_pct")]), errors="coerce").iloc[0]
    if pd.isna(pct):
        found = re.search(r"--stability-percentage[ =](\d+(?:\.\d+)?)", str(picked.get("command") or ""))
        pct = float(found.group(1)) if found else math.nan
    if not pct >= ANY_SPREAD_PCT:
        return None
    return (f"perf_analyzer accepted this level's windows at any spread (stability criterion {pct:g} %: "
            "the quick preset's), so its band bounds nothing and cannot clear or convict a difference")


def settled_need(df: pd.DataFrame, *sides: dict[str, Any],
                 what: str = "the levels it compares settled, each after its warm-up") -> Need:
    """The need "the levels compared settled": NOT met where ``unusable`` names one of ``sides`` (each the
    ``where`` of one compared row: ``{"rate": 64.8, "dynamic_batching": True}``), met where every side has
    a usable row, not known where one was never measured."""
    why = next((w for w in (unusable(df, **where) for where in sides) if w), None)
    if why:
        return Need(what, False, why)
    return Need(what, True if all(not _where(usable(df), where).empty for where in sides) else None)


def _where(df: pd.DataFrame, where: dict[str, Any]) -> pd.DataFrame:
    for key, value in where.items():
        if df.empty or key not in df:
            return df.iloc[0:0]
        df = df[df[key] == value]
    return df


def amount(value: float) -> str:
    """A measured figure as the verdicts print it: three significant digits, never in e-notation."""
    size = abs(value)
    if size >= 100 or value == 0:
        return f"{value:.0f}"
    if size >= 10:
        return f"{value:.1f}".removesuffix(".0")
    digits = max(2, 2 - math.floor(math.log10(size)))  # three significant digits, in fixed point
    return f"{value:.{digits}f}".rstrip("0").rstrip(".")


def noise_band(a: float | None, b: float | None, spread_a: float | None = None,
               spread_b: float | None = None) -> float | None:
    """The largest gap between ``a`` and ``b`` their own noise explains, in the values' unit: each value
    times its own level's relative spread ((max − min) / mean over its windows or repeats: a p99 takes
    its windows' mean latency's), the larger of the two. None when neither spread was measured."""
    widths = [abs(float(v)) * float(s) for v, s in ((a, spread_a), (b, spread_b))
              if v is not None and s is not None and s == s]
    return max(widths) if widths else None


def _cold(value: Any) -> bool:  # measured after a skipped warm-up
    return str(value).startswith("skipped")


def _unsettled(value: Any) -> bool:  # perf_analyzer's windows never agreed within the criterion
    return value is False or str(value) == "False"


def usable(df: pd.DataFrame) -> pd.DataFrame:
    """The rows a rule may count: not those measured after a skipped warm-up (column ``warmup``), nor
    levels whose windows never settled (``settled`` False: the last pass's numbers, not a measurement)."""
    if df.empty:
        return df
    warmup = df.get("warmup", pd.Series("", index=df.index))
    settled = df.get("settled", pd.Series(True, index=df.index))
    keep = [not (_cold(w) or _unsettled(s)) for w, s in zip(warmup, settled, strict=True)]
    return df[keep]


def unusable(df: pd.DataFrame, **where: Any) -> str | None:
    """Why a rule cannot read the row matching ``where`` (column == value), for ``check(blocked=)``: it
    was measured but ``usable`` drops it (named by its label); None when a usable row is there or
    nothing was measured."""
    sel = df
    for key, value in where.items():
        if sel.empty or key not in sel:
            return None
        sel = sel[sel[key] == value]
    if sel.empty or not usable(sel).empty:
        return None
    last = sel.iloc[-1]
    name = f"'{last['label']}'" if "label" in last.index and isinstance(last["label"], str) else "its level"
    if _unsettled(last.get("settled")):
        return (f"{name} never settled (perf_analyzer's windows kept disagreeing beyond the stability "
                "criterion): its numbers are the last pass's, not a measurement")
    return f"{name} was measured without its warm-up"


def chosen(df: pd.DataFrame, column: str, pick: str = "last", **where: Any) -> pd.Series | None:
    """The ``usable`` row matching ``where`` whose ``column`` a rule reads: the last one with a
    number there, or the one with the ``max``/``min``; None when there is none."""
    sel = usable(df)
    for key, value in where.items():
        if sel.empty or key not in sel:
            return None
        sel = sel[sel[key] == value]
    values = num(sel, column)
    sel, figures = sel[values.notna()], values.dropna().to_numpy()
    if not len(figures):
        return None
    at = {"max": figures.argmax, "min": figures.argmin}.get(pick, lambda: len(figures) - 1)()
    return sel.iloc[int(at)]


def row(df: pd.DataFrame, column: str, pick: str = "last", **where: Any) -> float | None:
    """``column`` of the ``chosen`` row."""
    picked = chosen(df, column, pick, **where)
    return None if picked is None else float(picked[column])


# the spread column that holds a measured column's noise (others ending in _ms: perf_analyzer's latency)
SPREAD_OF = {"throughput": "throughput_spread", "median_ms": "median_spread",
             "client_cpu_ms": "client_cpu_ms_spread"}


def spread(df: pd.DataFrame, column: str, pick: str = "last", **where: Any) -> float | None:
    """The relative spread recorded with the row ``row`` reads ``column`` from, for ``check(noise=)``."""
    name = SPREAD_OF.get(column, "latency_spread" if column.endswith("_ms") else f"{column}_spread")
    picked = chosen(df, column, pick, **where)
    if picked is None or name not in picked.index:
        return None
    value = pd.to_numeric(picked[name], errors="coerce")
    return None if pd.isna(value) else float(value)
