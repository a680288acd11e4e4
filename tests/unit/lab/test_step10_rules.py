"""Notebook 10's expected effects, checked on made-up run data: each verdict follows the numbers,
a missing run reads "not measured", and a gap inside the measured spread reads "within noise"."""

from __future__ import annotations

import pandas as pd

from servelab.lab import step10_report as step
from servelab.results.schema import RunData


def data(*rows: dict) -> RunData:
    empty = pd.DataFrame()
    return RunData(empty, empty, empty, empty, pd.DataFrame(list(rows)), pd.DataFrame())


def step_row(policy: str, **values: object) -> dict:
    return {"kind": "step", "policy": policy, "replicas_max": 2, "sample_interval_s": 1.0, **values}


def statuses(run: RunData) -> list[str]:
    return [c.status for c in step.rules(run)]


def test_nothing_measured_reads_not_measured() -> None:
    assert set(statuses(data())) == {"not measured"}


def test_a_good_run_is_observed() -> None:
    run = data(
        step_row("queue depth", decided_after_s=3.0, scale_up_after_s=6.0, upscale_delay_s=1.0,
                 look_back_period_s=1.0, p99_before_up_ms=4000.0, p99_after_up_ms=900.0,
                 backlog_at_up=300, backlog_end_high=40, backlog_end_high_spread=0.2, replica_seconds=28.0),
        step_row("utilisation", decided_after_s=9.0, scale_up_after_s=12.0, replica_seconds=30.0),
        step_row("fixed", replicas_max=2, replica_seconds=44.0),
        step_row("fixed", replicas_max=1, replica_seconds=22.0, backlog_end_high=420),
        {"kind": "shedding", "max_queued_requests": -1, "p99_ms": 6000.0},
        {"kind": "shedding", "max_queued_requests": 4, "p99_ms": 300.0, "p99_spread": 0.5},
        {"kind": "kill", "replaced_after_s": 4.8},
        {"kind": "triton_queue", "max_queue_size": None, "rejected": 0},
        {"kind": "triton_queue", "max_queue_size": 4, "rejected": 27},
    )
    assert statuses(run) == ["observed"] * 7


def test_slow_scale_up_and_late_queue_policy_are_not_observed() -> None:
    run = data(
        step_row("queue depth", decided_after_s=20.0, scale_up_after_s=25.0, upscale_delay_s=1.0,
                 look_back_period_s=1.0, p99_before_up_ms=4000.0, p99_after_up_ms=5000.0,
                 backlog_at_up=300, backlog_end_high=360, backlog_end_high_spread=0.05, replica_seconds=50.0),
        step_row("utilisation", scale_up_after_s=10.0),
        step_row("fixed", replicas_max=2, replica_seconds=44.0),
    )
    got = statuses(run)
    assert got[:3] == ["not observed"] * 3 and got[4] == "not observed"


def test_a_gap_inside_the_spread_is_within_noise() -> None:
    run = data(
        step_row("queue depth", backlog_at_up=100, backlog_end_high=110, backlog_end_high_spread=0.5,
                 scale_up_after_s=8.0, replica_seconds=40.0),
        step_row("utilisation", scale_up_after_s=7.5),
        step_row("fixed", replicas_max=2, replica_seconds=40.5),
    )
    got = statuses(run)
    assert got[1] == got[2] == got[4] == "within noise"


def test_the_backlog_rule_says_what_one_fixed_replica_did_and_what_p99_did() -> None:
    run = data(step_row("queue depth", backlog_at_up=396, backlog_end_high=372, backlog_end_high_spread=0.01,
                        p99_before_up_ms=3229.0, p99_after_up_ms=5019.0),
               step_row("fixed", replicas_max=1, backlog_end_high=314))
    backlog = step.rules(run)[1]
    assert backlog.status == "observed", backlog.evidence
    assert "396 in flight" in backlog.evidence and "one fixed replica: 314" in backlog.evidence
    assert "after it 5019 ms" in backlog.evidence


def test_a_replica_serving_only_after_the_high_load_is_not_observed_not_unmeasured() -> None:
    """A step load that ran, whose added replica served only once the high load had ended (seen on a
    slow 2-core run: 20 s after the step), and a utilisation run that added none: both looked for."""
    run = data(
        step_row("queue depth", decided_after_s=11.6, scale_up_after_s=20.1, upscale_delay_s=1.0,
                 look_back_period_s=1.0, backlog_at_up=None, backlog_end_high=380),
        step_row("utilisation", scale_up_after_s=None, backlog_end_high=400),
    )
    checks = step.rules(run)
    assert [c.status for c in checks[1:3]] == ["not observed", "observed"]
    assert "served only 20.1 s after the step, once the high load had ended" in checks[1].evidence
    assert checks[2].evidence == "queue depth serving 20.1 s after the step; utilisation added no replica"
    neither = step.rules(data(step_row("queue depth", backlog_end_high=380), step_row("utilisation")))
    assert [c.status for c in neither[1:3]] == ["not observed", "not observed"]
    assert neither[1].evidence == "no replica was added after the step"
    assert neither[2].evidence == "queue depth added no replica, nor did utilisation"
