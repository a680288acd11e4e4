"""An expected effect of the lab, checked on a run's numbers: the pieces every step's rules are made of.

A rule is a pure function of a run's tables: it picks numbers with ``row`` and returns a ``Check``
that says observed, within noise (the gap it tests is no larger than the measurement's own spread,
``noise=``), not observed, or not measured (a number it needs is missing, or the run did not meet the
effect's precondition: ``cannot_show``). Each step module holds its own rules (``rules(data: RunData)``);
``servelab.lab.run_report`` lists them in order.
Why the noise rule reads as it does: docs/decisions/2026-11-23-noise-aware-verdicts.md; the
preconditions: docs/decisions/2026-11-26-verdicts-with-preconditions.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from servelab.results.schema import device_of, num, relative_spread

__all__ = ["STATUSES", "Check", "amount", "cannot_show", "check", "chosen", "noise_band", "noise_note",
           "relative_spread", "row", "spread", "unusable", "usable"]

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


@dataclass
class Check:
    """One of the lab's expected effects, tested on this run's numbers."""

    effect: str
    status: str  # one of STATUSES
    evidence: str
    gpu_only: bool = False


def cannot_show(effect: str, because: str, gpu_only: bool = False) -> Check:
    """The verdict for an effect whose precondition this run did not meet (the overload never came, the
    added replica never served, a level never settled): not measured, and why, never observed."""
    return Check(effect, "not measured", f"this run cannot show it, because {because}", gpu_only)


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
           blocked: str | None = None) -> Check:
    """``test(*values)`` decides observed or not. With ``noise`` (the relative spreads of ``values[0]``
    and ``values[1]``, e.g. 0.12 for windows 12 % apart) the verdict is "within noise" when moving
    the second value by the ``noise_band`` either way would change the test's answer: the gap to the
    test's own threshold (4×, 1.1×, equal) is inside the levels' noise; the band is printed in ``unit``.
    ``blocked`` (why a precondition failed, e.g. from ``unusable``) makes it ``cannot_show``; a value
    that is missing or NaN makes it not measured."""
    if blocked:
        return cannot_show(effect, blocked, gpu_only)
    if any(v is None or v != v for v in values):
        return Check(effect, "not measured", "this run has no numbers for it", gpu_only)
    said = evidence(*values)
    ok = bool(test(*values))
    if noise is not None and len(values) >= 2:
        band = noise_band(values[0], values[1], *noise[:2])
        if band is not None:
            said += f" (spread {amount(band)}{' ' + unit if unit else ''})"
            first, second, rest = values[0], float(values[1]), values[2:]  # type: ignore[arg-type]
            if bool(test(first, second - band, *rest)) != bool(test(first, second + band, *rest)):
                return Check(effect, "within noise", said, gpu_only)
    return Check(effect, "observed" if ok else "not observed", said, gpu_only)


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
    """The largest gap between ``a`` and ``b`` their own noise explains: the larger of the two
    levels' spreads (max − min over their windows or repeats), in the values' unit. None when
    neither spread was measured."""
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
    """The relative spread recorded with the row ``row`` reads ``column`` from, for ``check(noise=)``."""
    name = SPREAD_OF.get(column, "latency_spread" if column.endswith("_ms") else f"{column}_spread")
    picked = chosen(df, column, pick, **where)
    if picked is None or name not in picked.index:
        return None
    value = pd.to_numeric(picked[name], errors="coerce")
    return None if pd.isna(value) else float(value)
