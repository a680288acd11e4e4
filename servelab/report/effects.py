"""An expected effect of the lab, checked on a run's numbers: the pieces every step's rules are made of.

A rule is a pure function of a run's tables: it picks numbers with ``row`` and returns a ``Check``
that says observed, within noise (the gap it tests is no larger than the measurement's own spread,
``noise=``), not observed, or not measured (a number it needs is missing). Each step module holds
its own rules (``rules(data: RunData)``); ``servelab.lab.run_report`` lists them in order.
Why the noise rule reads as it does: docs/decisions/2026-11-23-noise-aware-verdicts.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from servelab.results.schema import num, relative_spread

__all__ = ["STATUSES", "Check", "check", "chosen", "noise_band", "noise_note", "relative_spread", "row",
           "spread", "usable"]

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


def check(effect: str, values: tuple[float | None, ...], test: Callable[..., bool],
           evidence: Callable[..., str], gpu_only: bool = False,
           noise: tuple[float | None, ...] | None = None) -> Check:
    """``test(*values)`` decides observed or not. With ``noise`` (the relative spreads of ``values[0]``
    and ``values[1]``, e.g. 0.12 for windows 12 % apart) the verdict is "within noise" when moving
    the second value by the ``noise_band`` either way would change the test's answer: the gap to the
    test's own threshold (4×, 1.1×, equal) is inside the levels' noise."""
    if any(v is None for v in values):
        return Check(effect, "not measured", "this run has no numbers for it", gpu_only)
    said = evidence(*values)
    ok = bool(test(*values))
    if noise is not None and len(values) >= 2:
        band = noise_band(values[0], values[1], *noise[:2])
        if band is not None:
            said += f" (spread {band:.3g})"
            first, second, rest = values[0], float(values[1]), values[2:]  # type: ignore[arg-type]
            if bool(test(first, second - band, *rest)) != bool(test(first, second + band, *rest)):
                return Check(effect, "within noise", said, gpu_only)
    return Check(effect, "observed" if ok else "not observed", said, gpu_only)


def noise_band(a: float | None, b: float | None, spread_a: float | None = None,
               spread_b: float | None = None) -> float | None:
    """The largest gap between ``a`` and ``b`` their own noise explains: the larger of the two
    levels' spreads (max − min over their windows or repeats), in the values' unit. None when
    neither spread was measured."""
    widths = [abs(float(v)) * float(s) for v, s in ((a, spread_a), (b, spread_b))
              if v is not None and s is not None and s == s]
    return max(widths) if widths else None


def usable(df: pd.DataFrame) -> pd.DataFrame:
    """The rows a rule may count: not those measured after a skipped warm-up (column ``warmup``)."""
    if df.empty or "warmup" not in df:
        return df
    return df[[not str(value).startswith("skipped") for value in df["warmup"]]]


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
