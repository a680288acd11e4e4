"""An expected effect of the lab, checked on a run's numbers: the pieces every step's rules are made of.

A rule is a pure function of a run's tables: it picks numbers with ``row`` and returns a ``Check`` (a
verdict: its claim, its outcome, the figures it compared with their units, what folds under its line)
that says observed, not observed, too noisy to call (the gap it tests is inside the measurement's own
spread, ``noise=``; it says what rerun would settle it, ``Rerun``), or cannot show here (a number it
needs is missing, or the run did not meet the effect's precondition: ``cannot_show``). A rule states its
preconditions where it defines the effect (``Need``, ``check(needs=)``). Each step module holds its own
rules (``rules(data: RunData)``); ``servelab.lab.run_report`` lists them in order;
``servelab.report.verdicts`` shows them, one line each.
Why the noise rule reads as it does: docs/decisions/2026-11-23-noise-aware-verdicts.md; the
preconditions: docs/decisions/2026-11-26-verdicts-with-preconditions.md; a band from windows accepted
at any spread (``any_spread``, ``check(loose=)``): docs/decisions/2026-11-28-lessons-third-pass.md; the
four outcomes, the one line and what settles a noisy one: docs/decisions/2026-12-01-verdicts-at-a-glance.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import pandas as pd

from servelab.report.verdict import (
    CANNOT_SHOW,
    MARKS,
    NO_NUMBERS,
    NOT_OBSERVED,
    OBSERVED,
    STATUSES,
    TOO_NOISY,
    Check,
    Need,
    Quantity,
    Rerun,
    Verdict,
    amount,
    needs_said,
)
from servelab.results.schema import device_of, num, relative_spread

__all__ = [
    "CANNOT_SHOW",
    "MARKS",
    "NOT_OBSERVED",
    "NO_NUMBERS",
    "OBSERVED",
    "STATUSES",
    "TOO_NOISY",
    "Check",
    "Need",
    "Quantity",
    "Rerun",
    "Verdict",
    "amount",
    "any_spread",
    "cannot_show",
    "check",
    "chosen",
    "needs_said",
    "noise_band",
    "noise_note",
    "perf_rerun",
    "relative_spread",
    "row",
    "settled_need",
    "spread",
    "unusable",
    "usable",
]

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


def cannot_show(effect: str, because: str, gpu_only: bool = False, needs: tuple[Need, ...] = (),
                figures: tuple[Quantity, ...] = (), numbers: str = "") -> Check:
    """The verdict for an effect whose precondition this run did not meet (the overload never came, the
    added replica never served, a level never settled): it cannot show it here, says why, and keeps the
    ``figures`` it would have judged (``numbers``: their sentence), never observed."""
    evidence = f"this run cannot show it, because {because}"
    if numbers:
        evidence += f". {numbers[0].upper()}{numbers[1:]}"
    return Check(effect, CANNOT_SHOW, evidence, gpu_only, needs, figures, reason=because)


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


def _missing(value: Any) -> bool:
    return value is None or value != value


def check(effect: str, values: tuple[float | None, ...], test: Callable[..., bool],
          evidence: Callable[..., str], gpu_only: bool = False,
          noise: tuple[float | None, ...] | None = None, unit: str = "",
          blocked: str | None = None, needs: tuple[Need, ...] = (), loose: str | None = None,
          names: tuple[str, ...] = (), figures: Callable[..., tuple[Quantity, ...]] | None = None,
          rerun: Rerun | None = None, spans: str = "") -> Check:
    """``test(*values)`` decides observed or not. The verdict's figures are ``values`` named by ``names``
    (the first len(names) values, in ``unit``), or what ``figures(*values)`` returns.

    With ``noise`` (the relative spreads of ``values[0]`` and ``values[1]``, e.g. 0.12 for windows 12 %
    apart) the verdict is too noisy to call when moving the second value by the ``noise_band`` either
    way would change the test's answer: the gap to the test's own threshold (4×, 1.1×, equal) is inside
    the levels' noise; ``rerun`` says, from the run's numbers, what would settle it (``spans``: what the
    band is taken over). ``loose`` (why the band bounds nothing: its windows were accepted at any spread,
    ``any_spread``) makes such a verdict too noisy to call even so; a gap wider than the band keeps its
    verdict. ``needs`` are the effect's preconditions: the first one not met makes it ``cannot_show``
    (the numbers it would have judged follow the reason), as does ``blocked`` (why a precondition
    failed, e.g. from ``unusable``). A value that is missing or NaN: the run has no numbers for it."""
    present = not any(_missing(v) for v in values)
    shown = _figures(values, names, unit, figures) if present else ()
    said = evidence(*values) if present else ""
    unmet = next((n for n in needs if n.met is False), None)
    if unmet is not None or blocked:
        because = (unmet.reached or f"it did not reach {unmet.what}") if unmet is not None else str(blocked)
        return cannot_show(effect, because, gpu_only, needs, shown, said)
    if not present:
        return Check(effect, CANNOT_SHOW, NO_NUMBERS, gpu_only, needs, reason=NO_NUMBERS)
    ok = bool(test(*values))
    status = OBSERVED if ok else NOT_OBSERVED
    band_q, settle = None, ""
    if noise is not None and len(values) >= 2:
        band = noise_band(values[0], values[1], *noise[:2])
        if band is not None:
            band_q = Quantity(spans or "the larger of the two figures' own spreads", band, unit)
            first, second, rest = values[0], float(values[1]), values[2:]  # type: ignore[arg-type]
            flips = lambda d: bool(test(first, second - d, *rest)) != bool(test(first, second + d, *rest))  # noqa: E731
            if flips(band):
                status = TOO_NOISY
                distance = _distance(flips, band)
                if loose:
                    settle = (f"{loose}; {rerun.said(band, distance, unit)}" if rerun else loose)
                else:
                    settle = rerun.said(band, distance, unit) if rerun else \
                        "a longer run (preset 'full': more requests per level) narrows the band"
    return Check(effect, status, said, gpu_only, needs, shown, band_q, settle)


def _distance(flips: Callable[[float], bool], band: float) -> float:
    """How far the compared figure sits from the test's threshold: the smallest shift that flips it."""
    lo, hi = 0.0, band
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if flips(mid) else (mid, hi)
    return hi


def _figures(values: tuple[Any, ...], names: tuple[str, ...], unit: str,
             figures: Callable[..., tuple[Quantity, ...]] | None) -> tuple[Quantity, ...]:
    if figures is not None:
        return tuple(figures(*values))
    return tuple(Quantity(name, float(v), unit) for name, v in zip(names, values, strict=False))


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


def perf_rerun(df: pd.DataFrame, column: str, *sides: dict[str, Any]) -> Rerun | None:
    """What would settle a comparison of perf_analyzer levels (``sides``: the ``where`` of each compared
    row) that was too noisy to call: windows that must agree (``rate_stability_pct`` 30, the concurrency
    levels' criterion) where a level's were accepted at any spread, else windows of more requests
    (``window_requests``, from the level's perf_analyzer command); None where the rows do not say."""
    if any(any_spread(df, column, **where) for where in sides):
        return Rerun("rate_stability_pct", to=30, why="windows that must agree within 30 %, as the "
                                                      "concurrency levels' do: a band that bounds the gap")
    counts = []
    for where in sides:
        picked = chosen(df, column, **where)
        found = re.search(r"--measurement-request-count[ =](\d+)", str(picked.get("command") or "")) \
            if picked is not None else None
        counts += [int(found.group(1))] if found else []
    return Rerun("window_requests", max(counts)) if counts else None


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
SPREAD_OF = {"throughput": "throughput_spread", "median_ms": "median_spread"}


def spread(df: pd.DataFrame, column: str, pick: str = "last", **where: Any) -> float | None:
    """The relative spread recorded with the row ``row`` reads ``column`` from, for ``check(noise=)``: its
    own ``<column>_spread`` where the row has one, else ``SPREAD_OF``'s."""
    picked = chosen(df, column, pick, **where)
    if picked is None:
        return None
    name = f"{column}_spread" if f"{column}_spread" in picked.index else \
        SPREAD_OF.get(column, "latency_spread" if column.endswith("_ms") else f"{column}_spread")
    if name not in picked.index:
        return None
    value = pd.to_numeric(picked[name], errors="coerce")
    return None if pd.isna(value) else float(value)
