"""Notebook 04: Triton with the Python backend under load: queue vs compute, and a client batch.
"""

from __future__ import annotations

import pandas as pd

from servelab.lab.params import LabParams
from servelab.lab.triton_steps import Triton, measure_all
from servelab.report.effects import Check, Quantity, check, computed_on, perf_rerun, row, spread, unusable
from servelab.report.figures import Section, fig_breakdown, plot_html, table_html
from servelab.report.readings import first, read_breakdown
from servelab.results.schema import QUEUE, TRITON_COLUMNS, RunData, num, step_rows

# what a verdict's "(spread …)" spans here (servelab.report.terms)
# the verdict the report's first screen gives as this step's one line (servelab.report.html.headline)
HEADLINE = "Triton Python backend: latency at concurrency"
SPREAD_OVER = ("perf_analyzer's last three windows of each level (the ones its stability check judges)")


def client_batch(triton: Triton, name: str, p: LabParams) -> pd.DataFrame:
    """One client sending ``client_batch`` images per request (throughput counts images)."""
    return measure_all(triton, name, p, "python_client_batch",
                        [{"concurrency": 1, "batch": p.client_batch, "label": f"batch {p.client_batch}"}])


def read_client_batch(df: pd.DataFrame) -> str:
    """Single images vs a client batch, both from one client."""
    one = first(df, "throughput", batch=1)
    many = df[num(df, "batch") > 1]
    if one is None or many.empty:
        return "no comparison with single images in this run"
    size, tput = int(num(many, "batch").iloc[-1]), float(num(many, "throughput").iloc[-1])
    return (f"one client: {one:.1f} images/s sending single images, {tput:.1f} images/s sending batches "
            f"of {size} ({tput / one:.1f}×)")


def _one_client(df: pd.DataFrame) -> pd.DataFrame:
    """Rows measured with one client (concurrency 1), single images first."""
    rows = df[num(df, "concurrency") == 1]
    return rows.sort_values("batch", kind="stable") if "batch" in rows else rows


# ----------------------------------------------------------------------------- report and rules

def sections(data: RunData) -> list[Section]:
    """The concurrency sweep (queue vs compute), then one client's single images vs a batch."""
    out = []
    sweep = step_rows(data.triton, "python_concurrency")
    if not sweep.empty:
        out.append(Section("Triton, Python backend: concurrency sweep (queue vs compute)", [
            plot_html(fig_breakdown(sweep, "concurrency", "Python backend: queue vs compute"),
                      read_breakdown(sweep)), table_html(sweep, TRITON_COLUMNS)]))
    both = step_rows(data.triton, "python_client_batch", "python_concurrency")
    if not both.empty:
        one = _one_client(both)
        out.append(Section("Triton, Python backend: client batch", [
            plot_html(fig_breakdown(one, "batch", "one client: single images vs a batch"),
                      read_client_batch(one)), table_html(both, TRITON_COLUMNS)]))
    return out


def rules(data: RunData) -> list[Check]:
    """Latency grows with concurrency while compute stays flat, the queue is the difference; a client
    batch raises throughput (a GPU effect)."""
    sweep = step_rows(data.triton, "python_concurrency")
    c_lo, c_hi = row(sweep, "concurrency", "min"), row(sweep, "concurrency", "max")
    # the levels the sweep measured, settled or not: a top (or bottom) level that never settled is the
    # lesson's precondition failing, not a reason to read the next level as if it were the top
    levels = num(sweep, "concurrency").dropna() if "concurrency" in sweep else pd.Series(dtype=float)
    at_lo = unusable(sweep, concurrency=levels.min()) if len(levels) else None
    at_hi = unusable(sweep, concurrency=levels.max()) if len(levels) else None
    if at_hi:
        c_hi = float(levels.max())
    two_levels = c_lo is not None and c_hi is not None and c_hi > c_lo
    lat = (row(sweep, "p50_ms", concurrency=c_lo), row(sweep, "p50_ms", concurrency=c_hi)) if two_levels \
        else (None, None)
    comp = (row(sweep, "compute_infer_ms", concurrency=c_lo),
            row(sweep, "compute_infer_ms", concurrency=c_hi)) if two_levels else (None, None)
    queue = (row(sweep, QUEUE, concurrency=c_hi), row(sweep, "compute_infer_ms", concurrency=c_hi)) \
        if c_hi is not None else (None, None)
    batch = step_rows(data.triton, "python_client_batch")
    lo, hi = {"concurrency": c_lo}, {"concurrency": c_hi}
    c1 = f"concurrency {c_lo or 1:.0f}"
    cn = f"concurrency {c_hi or 16:.0f}"
    return [
        check(f"Triton Python backend: latency at concurrency {c_hi:.0f} > 4× latency at {c_lo or 1:.0f}"
              if c_hi else "Triton Python backend: latency at concurrency 16 > 4× latency at 1",
              lat, lambda a, b: b > 4 * a, lambda a, b: f"p50 {a:.0f} ms → {b:.0f} ms ({b / a:.1f}×)",
              noise=(spread(sweep, "p50_ms", concurrency=c_lo), spread(sweep, "p50_ms", concurrency=c_hi)),
              unit="ms", blocked=at_lo or at_hi, rerun=perf_rerun(sweep, "p50_ms", lo, hi),
              figures=lambda a, b: (Quantity(f"p50 at {c1}", a, "ms"), Quantity(cn, b, "ms"),
                                    Quantity("", b / a, "×"))),
        # no noise here: the test carries its own tolerance (2×)
        check("Triton Python backend: compute time stays flat (< 2×) while concurrency rises",
              comp, lambda a, b: b < 2 * a, lambda a, b: f"compute infer {a:.1f} ms → {b:.1f} ms",
              blocked=at_lo or at_hi, unit="ms", names=(f"compute infer at {c1}", cn)),
        check("Triton Python backend: at the highest concurrency queue time exceeds compute time",
              queue, lambda q, c: q > c, lambda q, c: f"queue {q:.1f} ms vs compute infer {c:.1f} ms",
              noise=(spread(sweep, QUEUE, concurrency=c_hi),) * 2, unit="ms", blocked=at_hi,
              names=(f"queue at {cn}", "compute infer"), rerun=perf_rerun(sweep, QUEUE, hi)),
        check("Client batch 16 raises throughput (images/s) ≥ 1.5× over single images at concurrency 1",
              (row(sweep, "throughput", concurrency=c_lo), row(batch, "throughput")),
              lambda one, many: many >= 1.5 * one,
              lambda one, many: f"{one:.1f} → {many:.1f} images/s{computed_on(batch)}",
              gpu_only=True, names=("single images", "batches of 16"),
              noise=(spread(sweep, "throughput", concurrency=c_lo), spread(batch, "throughput")),
              unit="images/s", blocked=at_lo or unusable(batch), rerun=perf_rerun(sweep, "throughput", lo)),
    ]
