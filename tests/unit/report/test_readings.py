"""The report's readings of a table (``servelab.report.readings``): the server's own CPU beside the
machine's, an unsettled end marked and never a nan, no unsettled row named best."""

from __future__ import annotations

import pandas as pd

from servelab.report.readings import read_breakdown
from servelab.results.schema import normalise_triton


def test_the_servers_own_cpu_is_on_the_machines_scale_beside_it() -> None:
    """psutil counts a process's CPU per core (100 = one core); the machine's mean counts all cores."""
    rows = normalise_triton(pd.DataFrame([{"cpu_mean_pct": 99.5, "proc_cpu_mean_pct": 80.0, "cpu_count": 2}]))
    assert rows.loc[0, "server_cpu_pct"] == 40.0 and rows.loc[0, "cpu_util_pct"] == 99.5


def test_a_reading_marks_an_unsettled_end_and_never_prints_nan() -> None:
    """04's reading printed "queue 0.5 → nan ms … p99 40 → nan ms" for an unsettled top level."""
    rows = pd.DataFrame([
        {"model": "food_classifier", "concurrency": 1, "queue_ms": 0.5, "compute_infer_ms": 30.0,
         "p99_ms": 40.0, "settled": True},
        {"model": "food_classifier", "concurrency": 16, "queue_ms": float("nan"), "compute_infer_ms": None,
         "p99_ms": float("nan"), "settled": False}])
    reading = read_breakdown(rows)
    assert "nan" not in reading
    assert "to 16 (unsettled): queue 0.5 → ? ms" in reading


def test_the_scaling_reading_never_names_an_unsettled_row_best_and_says_its_load() -> None:
    """05's reading printed "default threads: 1.6/s, p99 nan ms" for the row issue 36 found unsettled."""
    from servelab.report.readings import read_scaling

    rows = pd.DataFrame([
        {"label": "2 instances on the CPU, default threads", "concurrency": 8, "throughput": 90.0,
         "p99_ms": float("nan"), "settled": False},
        {"label": "2 instances on the CPU, split threads", "concurrency": 8, "throughput": 25.3,
         "p99_ms": 300.0, "settled": True}])
    reading = read_scaling(rows)
    assert reading.startswith("at concurrency 8: best throughput 25.3/s with 2 instances on the CPU, split")
    assert "default threads (unsettled): 90.0/s, p99 ? ms" in reading and "nan" not in reading
