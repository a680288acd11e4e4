"""The one-line readings under the lab's figures: each states what it compares and what it holds
fixed, computed from the rows the figure draws (``servelab.report.figures`` draws them)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from servelab.report.effects import amount
from servelab.results.schema import QUEUE, num


def level_text(row: pd.Series, x: str) -> str:
    """A row's ``x`` as a label: 8, not 8.0."""
    value = row.get(x)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


# what tells apart configurations measured at the same load level (the first one that varies)
CONFIG_COLUMNS = ("model", "instances", "threads", "dynamic_batching", "batch")


def config_column(df: pd.DataFrame, x: str) -> str | None:
    """The column whose values are the configurations in ``df`` when several were measured at the same
    ``x`` (two models, or 1 and 2 instances, at each concurrency); None for one configuration's sweep."""
    if x not in df or not df[x].duplicated().any():
        return None
    return next((c for c in CONFIG_COLUMNS if c != x and c in df and df[c].astype(str).nunique() > 1), None)


def first(df: pd.DataFrame, column: str, **where: Any) -> float | None:
    sel = df
    for key, value in where.items():
        if key not in sel:
            return None
        sel = sel[sel[key] == value]
    values = num(sel, column).dropna()
    return float(values.iloc[-1]) if len(values) else None


HELD = {"model": "{}", "instances": "instances {}", "concurrency": "concurrency {}", "rate": "{}/s",
        "distribution": "{} arrivals", "batch": "client batch {}"}


def held(df: pd.DataFrame, x: str) -> str:
    """What stays the same across ``df``'s rows, besides ``x``: "food_classifier, concurrency 8"."""
    parts = []
    for column, form in HELD.items():
        values = {level_text(r, column) for _, r in df.iterrows()} if column in df else set()
        values -= {"None", "nan", ""}
        if column != x and len(values) == 1:
            parts.append(form.format(values.pop()))
    return ", ".join(parts)


def read_breakdown(df: pd.DataFrame, x: str = "concurrency") -> str:
    """One configuration's rows, first to last along ``x``, naming what stays fixed; several configurations
    at the same ``x`` (``config_column``) are compared level by level instead (``read_pairs``)."""
    if df.empty:
        return "no measurements"
    by = config_column(df, x)
    if by is not None:
        return read_pairs(df, by, x)
    lo, hi = df.iloc[0], df.iloc[-1]

    def pair(column: str, form: str) -> str:
        return " → ".join(_shown(_number(r.get(column)), form) for r in (lo, hi))
    fixed = held(df, x)
    return (f"{fixed + ': ' if fixed else ''}from {x} {level_text(lo, x)}{_loose(lo)} to "
            f"{level_text(hi, x)}{_loose(hi)}: queue {pair(QUEUE, '{:.1f}')} ms, compute infer "
            f"{pair('compute_infer_ms', '{:.1f}')} ms, p99 {pair('p99_ms', '{:.0f}')} ms")


def _shown(value: float | None, form: str) -> str:
    """A figure as ``form`` prints it; "?" where the row has none (never "nan")."""
    return "?" if value is None else form.format(value)


def _loose(row: pd.Series) -> str:
    """" (unsettled)" after a level perf_analyzer could not settle: its figures are not a level's own."""
    return " (unsettled)" if str(row.get("settled")) == "False" else ""


def read_pairs(df: pd.DataFrame, by: str, x: str = "concurrency") -> str:
    """Configurations (``by``: model, instances) compared at each ``x`` level all of them measured, one
    line per level, the level named: "at concurrency 8: compute infer 34.2 → 11.0 ms, …", the
    configurations in the order they were measured."""
    names = list(dict.fromkeys(str(v) for v in df[by]))
    lines = []
    for level in sorted(set(num(df, x).dropna())):
        at = df[num(df, x) == level]
        rows = [at[at[by].astype(str) == name] for name in names]
        if any(r.empty for r in rows):
            continue
        last = [r.iloc[-1] for r in rows]

        def figures(column: str, form: str, rows: list[pd.Series] = last) -> str:
            return " → ".join(_shown(_number(r.get(column)), form) for r in rows)
        loose = " (unsettled)" if any(_loose(r) for r in last) else ""
        lines.append(f"at {x} {level:g}: compute infer {figures('compute_infer_ms', '{:.1f}')} ms, queue "
                     f"{figures(QUEUE, '{:.1f}')} ms, throughput {figures('throughput', '{:.1f}')}/s, p99 "
                     f"{figures('p99_ms', '{:.0f}')} ms{loose}")
    if not lines:
        return "no level measured in every configuration"
    return f"{' → '.join(names)}, level by level:\n" + "\n".join(lines)


def _number(value: Any) -> float | None:
    """A cell as a float; None where it is missing or not a number."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else number


def shared_level(df: pd.DataFrame, column: str = "concurrency") -> str:
    """The load every row of ``df`` was measured at ("concurrency 8"); "" when they differ or none says."""
    levels = set(num(df, column).dropna()) if column in df else set()
    return f"{column} {levels.pop():g}" if len(levels) == 1 else ""


def read_scaling(df: pd.DataFrame) -> str:
    """Each configuration's throughput and p99 at the load they share ("at concurrency 8: best …"), the
    best among the settled rows; an unsettled row is marked and never named best."""
    if df.empty:
        return "no measurements"
    fixed = shared_level(df)
    settled = df[df["settled"].astype(str) != "False"] if "settled" in df else df
    shown = ", ".join(f"{r.get('label', r.get('instances'))}{_loose(r)}: "
                      f"{_shown(_number(r.get('throughput')), '{:.1f}')}/s, "
                      f"p99 {_shown(_number(r.get('p99_ms')), '{:.0f}')} ms" for _, r in df.iterrows())
    throughput = num(settled, "throughput")
    at = f"at {fixed}: " if fixed else ""
    if throughput.dropna().empty:
        return f"{at}no settled row to name a best; {shown}"
    order = [int(i) for i in throughput.fillna(-1).to_numpy().argsort()[::-1]]
    best = settled.iloc[order[0]]
    name = str(best.get("label", best.get("instances")))
    if len(throughput.dropna()) >= 2:  # the best names itself only where it stands clear of the next one
        second = settled.iloc[order[1]]
        gap, band = _lead(best, second)
        if band is not None and gap <= band:
            return (f"{at}no best: {name} {float(best['throughput']):.1f}/s and "
                    f"{second.get('label', second.get('instances'))} {float(second['throughput']):.1f}/s are "
                    f"within each other's noise (spread {amount(band)}/s); {shown}")
    return f"{at}best throughput {float(best['throughput']):.1f}/s with {name}; {shown}"


def _lead(best: pd.Series, second: pd.Series) -> tuple[float, float | None]:
    """How far ``best``'s throughput leads ``second``'s, and the noise band the verdicts weigh such a gap
    with (``noise_band`` of the two rows' ``throughput_spread``)."""
    from servelab.report.effects import noise_band

    a, b = float(second["throughput"]), float(best["throughput"])
    spreads = [_number(r.get("throughput_spread")) for r in (second, best)]
    return b - a, noise_band(a, b, *spreads)


def read_util(df: pd.DataFrame) -> str:
    cpu = num(df, "cpu_util_pct").dropna()
    if cpu.empty:
        return "no utilisation samples"
    return f"CPU utilisation ranged {cpu.min():.0f}–{cpu.max():.0f}% across the measurements"
