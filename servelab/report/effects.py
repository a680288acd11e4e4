"""An expected effect of the lab, checked on a run's numbers: the pieces every step's rules are made of.

A rule is a pure function of a run's tables: it picks numbers with ``row`` and returns a ``Check``
that says observed, not observed, or not measured (a number it needs is missing). Each step
module holds its own rules (``rules(data: RunData)``); ``servelab.lab.run_report`` lists them in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from servelab.results.schema import num

NOISE_NOTE = ("Runs on a shared or small CPU are noisy, and several of the lab's effects belong to a GPU: "
              "a 'not observed' here is a fact about this run on this machine, not a hidden failure.")


@dataclass
class Check:
    """One of the lab's expected effects, tested on this run's numbers."""

    effect: str
    status: str  # observed | not observed | not measured
    evidence: str
    gpu_only: bool = False


def check(effect: str, values: tuple[float | None, ...], test: Callable[..., bool],
           evidence: Callable[..., str], gpu_only: bool = False) -> Check:
    if any(v is None for v in values):
        return Check(effect, "not measured", "this run has no numbers for it", gpu_only)
    ok = bool(test(*values))
    return Check(effect, "observed" if ok else "not observed", evidence(*values), gpu_only)


def row(df: pd.DataFrame, column: str, pick: str = "last", **where: Any) -> float | None:
    sel = df
    for key, value in where.items():
        if sel.empty or key not in sel:
            return None
        sel = sel[sel[key] == value]
    values = num(sel, column).dropna()
    if not len(values):
        return None
    return float(values.max() if pick == "max" else values.min() if pick == "min" else values.iloc[-1])
