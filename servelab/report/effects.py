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

__all__ = ["STATUSES", "Check", "check", "noise_band", "relative_spread", "row", "spread", "usable"]

NOISE_NOTE = ("Runs on a shared or small CPU are noisy, and several of the lab's effects belong to a GPU: "
              "a 'not observed' here is a fact about this run on this machine, not a hidden failure.")


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
    """``test(*values)`` decides observed or not; with ``noise`` (the relative spread of ``values[0]``
    and ``values[1]``, e.g. 0.12 for windows 12 % apart) a gap between the two no larger than
    ``within_noise`` allows reads "within noise" instead, whatever the test says."""
    if any(v is None for v in values):
        return Check(effect, "not measured", "this run has no numbers for it", gpu_only)
    said = evidence(*values)
    if noise is not None and len(values) >= 2:
        band = noise_band(values[0], values[1], *noise[:2])
        if band is not None:
            said += f" (spread {band:.3g})"
            if abs(float(values[1]) - float(values[0])) <= band:  # type: ignore[arg-type]
                return Check(effect, "within noise", said, gpu_only)
    return Check(effect, "observed" if test(*values) else "not observed", said, gpu_only)


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


def row(df: pd.DataFrame, column: str, pick: str = "last", **where: Any) -> float | None:
    """``column`` of the ``usable`` rows matching ``where``: the last one, or the ``max``/``min``."""
    sel = usable(df)
    for key, value in where.items():
        if sel.empty or key not in sel:
            return None
        sel = sel[sel[key] == value]
    values = num(sel, column).dropna()
    if not len(values):
        return None
    return float(values.max() if pick == "max" else values.min() if pick == "min" else values.iloc[-1])


# the spread column that holds a measured column's noise (others ending in _ms: perf_analyzer's latency)
SPREAD_OF = {"throughput": "throughput_spread", "median_ms": "median_spread"}


def spread(df: pd.DataFrame, column: str, **where: Any) -> float | None:
    """The relative spread recorded with ``column``'s level (picked like ``row``), for ``check(noise=)``."""
    name = SPREAD_OF.get(column, "latency_spread" if column.endswith("_ms") else f"{column}_spread")
    return row(df, name, **where)
