"""Notebook 05's expected effects on made-up rows: instances and threads, a level without its warm-up
or never settled left uncounted, a configuration measured twice, and its reading naming no best
where the verdict calls it noise."""

from __future__ import annotations

import pandas as pd

from servelab.lab import (
    step05_instance_scaling,
)
from servelab.results.schema import RunData
from tests.unit.lab.made_up_runs import EMPTY, data, instance_rows, one, scaling, status, triton_run


def test_instance_rules() -> None:
    checks = step05_instance_scaling.rules(data(triton=scaling([50, 90, 92], threads=(5, 60))))
    assert status(checks, "More instances raise throughput") == "observed"
    assert status(checks, "largest instance count is no better") == "observed"  # 92 ≤ 1.05 × 90
    assert status(checks, "one thread each beats") == "observed"
    worse = step05_instance_scaling.rules(data(triton=scaling([50, 52, 150], threads=(60, 5))))
    assert status(worse, "More instances raise throughput") == "observed"
    assert status(worse, "largest instance count is no better") == "not observed"
    assert status(worse, "one thread each beats") == "not observed"
    none = step05_instance_scaling.rules(data())
    assert [c.status for c in none] == ["cannot show here"] * 3  # every check listed, whatever is missing


def test_instance_rules_never_count_a_level_without_its_warm_up() -> None:
    """The 1-instance level measured cold: the comparison with it is not measured (never 2 vs 2); the
    largest-vs-middle check stays in the list."""
    rows = scaling([50, 90, 92], threads=(5, 60))
    rows[0]["warmup"] = "skipped: perf_analyzer ran past its 60 s timeout"
    checks = step05_instance_scaling.rules(data(triton=rows))
    assert status(checks, "More instances raise throughput") == "cannot show here"
    assert status(checks, "largest instance count is no better") == "observed"
    rows[1]["warmup"] = "skipped: timeout"
    checks = step05_instance_scaling.rules(data(triton=rows))
    assert len(checks) == 3 and status(checks, "largest instance count is no better") == "cannot show here"


def test_an_unsettled_row_is_never_counted_and_the_verdict_says_why() -> None:
    """The run issue 36 read: "2 on the CPU, default threads (unsettled)" at 1.6/s with no p50/p99 was
    counted as 'default threads 1.6/s, split 25.3/s … observed'."""
    rows = instance_rows({"label": "2 on the CPU, default threads", "thread_setting": "default", "threads": 2,
                          "throughput": 1.6, "settled": False},
                         {"label": "2 on the CPU, split threads", "thread_setting": "split", "threads": 1,
                          "throughput": 25.3, "settled": True})
    verdict = one(step05_instance_scaling.rules(triton_run(rows)), "one thread each")
    assert verdict.status == "cannot show here"
    assert verdict.evidence.startswith("this run cannot show it, because '2 on the CPU, default threads' "
                                       "never settled")


def test_a_configuration_measured_twice_counts_its_two_readings_as_noise() -> None:
    """Two instances with split threads read 29.5/s in the instance step and 25.3/s in the threads
    lesson: a 15 % repeat gap, wider than either level's windows, so 24 vs 25.3 is within noise."""
    rows = instance_rows({"label": "2 on the CPU, default threads", "thread_setting": "default", "threads": 2,
                          "throughput": 24.0, "settled": True},
                         {"label": "2 on the CPU, split threads", "thread_setting": "split", "threads": 1,
                          "throughput": 25.3, "settled": True})
    verdict = one(step05_instance_scaling.rules(triton_run(rows)), "one thread each")
    assert verdict.status == "too noisy to call", verdict
    assert "the same configuration read 29.5/s in the instance step: repeats 15% apart" in verdict.evidence


def test_the_scaling_reading_names_no_best_where_the_verdict_calls_it_noise() -> None:
    """Issue 41 (05): "best throughput 65.2/s with 4 instances" beside a verdict calling 4 against 2 within
    noise, and a label "(4+4 vs 2+2)" on a CPU whose counts were 4 and 2."""
    from servelab.report.readings import read_scaling

    rows = [{"step": "instance_scaling", "label": label, "instances": f"{n}xKIND_CPU", "concurrency": 8,
             "throughput": tput, "throughput_spread": 0.12, "settled": True}
            for label, n, tput in (("1 instance on the CPU", 1, 30.0), ("2 instances on the CPU", 2, 62.0),
                                   ("4 instances on the CPU", 4, 65.2))]
    triton = pd.DataFrame(rows)
    [_, largest, _] = step05_instance_scaling.rules(RunData(EMPTY, EMPTY, triton))
    assert largest.effect == "The largest instance count is no better than the middle one (4 vs 2 instances)"
    assert largest.status == "too noisy to call" and largest.band is not None
    assert "noise band: 7.82 inferences/s (the larger of the two figures' own spreads)" in largest.details()
    reading = read_scaling(triton)
    assert reading.startswith("at concurrency 8: no best: 4 instances on the CPU 65.2/s and 2 instances on "
                              "the CPU 62.0/s are within each other's noise (spread 7.82/s)")
    apart = triton.assign(throughput=[30.0, 40.0, 65.2])
    assert read_scaling(apart).startswith("at concurrency 8: best throughput 65.2/s with 4 instances")
