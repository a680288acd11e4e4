"""Notebook 10's expected effects, checked on made-up run data: each verdict follows the numbers,
a missing run reads "cannot show here", and a gap inside the measured spread reads "too noisy to call"."""

from __future__ import annotations

import json

import pandas as pd

from servelab.lab import step10_report as step
from servelab.lab import step10_report as step10
from servelab.results.schema import RunData
from tests.unit.lab.made_up_runs import EMPTY, autoscaling_verdicts, samples, step_load_run

QUEUE = "autoscaled 1-2 (queue depth)"


def data(*rows: dict, series: list[dict] | None = None) -> RunData:
    empty = pd.DataFrame()
    return RunData(empty, empty, empty, empty, pd.DataFrame(list(rows)), pd.DataFrame(series or []))


def high_phase(label: str, rate: float, answered: float, seconds: int = 12, start: int = 3) -> list[dict]:
    """A run's samples during its high phase (phase 1), one a second: ``answered`` answers a second
    against ``rate`` offered."""
    return [{"run": label, "t": float(t), "interval_s": 1.0, "phase": 1, "rate": rate, "ok": answered}
            for t in range(start + 1, start + seconds + 1)]


def backlog(label: str, growth: float, jitter: float = 0.0, start: float = 100.0) -> list[dict]:
    """A run's requests in flight during a 12 s high phase from 3 s: growing ``growth`` a second, each
    sample ``jitter`` above or below that line in turn."""
    return [{"run": label, "t": float(t), "interval_s": 1.0, "phase": 1, "rate": 90.0, "ok": 60.0,
             "in_flight": start + growth * (t - 4) + jitter * (-1) ** t} for t in range(4, 16)]


def step_row(policy: str, **values: object) -> dict:
    return {"kind": "step", "policy": policy, "replicas_max": 2, "sample_interval_s": 1.0, **values}


def statuses(run: RunData) -> list[str]:
    """The model's verdicts (the device stand-in's: test_the_device_stand_in_is_judged_on_its_own_runs)."""
    return [c.status for c in step.rules(run) if "stand-in" not in c.effect]


def test_nothing_measured_reads_not_measured() -> None:
    assert set(statuses(data())) == {"cannot show here"}


def test_a_good_run_is_observed() -> None:
    run = data(
        step_row("queue depth", label=QUEUE, decided_after_s=3.0, scale_up_after_s=6.0, upscale_delay_s=1.0,
                 look_back_period_s=1.0, metrics_interval_s=0.5, p99_before_up_ms=4000.0,
                 p99_after_up_ms=900.0, backlog_at_up=300, backlog_end_high=40, backlog_end_high_spread=0.2,
                 replica_seconds=28.0, p99_ms=2000.0, high_starts_s=3.0, high_seconds=12.0),
        step_row("utilisation", decided_after_s=9.0, scale_up_after_s=11.0, replica_seconds=30.0,
                 backlog_end_high=100, p99_ms=3000.0),
        step_row("fixed", replicas_max=2, replica_seconds=44.0, backlog_end_high=10, p99_ms=600.0),
        step_row("fixed", label="fixed 1", replicas_max=1, replica_seconds=22.0, backlog_end_high=420,
                 p99_ms=5000.0),
        {"kind": "shedding", "max_queued_requests": -1, "p99_ms": 6000.0},
        {"kind": "shedding", "max_queued_requests": 4, "p99_ms": 300.0, "p99_spread": 0.5},
        {"kind": "kill", "replaced_after_s": 4.8, "in_flight_at_kill": 2, "failed": 1,
         "failed_sent_after_kill": 0},
        {"kind": "triton_queue", "max_queue_size": None, "rejected": 0},
        {"kind": "triton_queue", "max_queue_size": 4, "rejected": 27},
        series=[*backlog(QUEUE, -20.0), *backlog("fixed 1", 30.0)],
    )
    assert statuses(run) == ["observed"] * 10


def test_slow_scale_up_and_late_queue_policy_are_not_observed() -> None:
    run = data(
        step_row("queue depth", decided_after_s=20.0, scale_up_after_s=25.0, upscale_delay_s=1.0,
                 look_back_period_s=1.0, p99_before_up_ms=4000.0, p99_after_up_ms=5000.0,
                 backlog_at_up=300, backlog_end_high=360, backlog_end_high_spread=0.05, replica_seconds=50.0,
                 high_seconds=12.0),
        step_row("utilisation", scale_up_after_s=10.0),
        step_row("fixed", replicas_max=2, replica_seconds=44.0),
    )
    got = statuses(run)  # start, backlog, queue depth vs one fixed, queue vs utilisation, …, cost
    assert [got[0], got[1], got[3], got[6]] == ["not observed"] * 4


def test_a_gap_inside_the_spread_is_within_noise() -> None:
    run = data(
        step_row("queue depth", label=QUEUE, backlog_at_up=100, backlog_end_high=110,
                 backlog_end_high_spread=0.5, scale_up_after_s=3.0, replica_seconds=40.0, high_starts_s=3.0,
                 high_seconds=12.0),
        step_row("utilisation", scale_up_after_s=2.5),
        step_row("fixed", replicas_max=2, replica_seconds=40.5),
        step_row("fixed", label="fixed 1", replicas_max=1),
        series=[*backlog(QUEUE, 9.0, jitter=20.0), *backlog("fixed 1", 10.0, jitter=20.0)],
    )
    got = statuses(run)  # the backlog, queue depth vs utilisation, the cost
    assert got[1] == got[3] == got[6] == "too noisy to call"
    [growth] = [c for c in step.rules(run) if "grows more slowly" in c.effect]
    assert growth.settle.startswith("rerun with a high phase of "), growth.settle


def test_the_backlog_rule_reads_both_growths_and_says_whether_the_replicas_outpace_the_load() -> None:
    """Issue 52: on two cores the replicas do not outpace a 1.5× load, so a backlog cannot shrink while
    it lasts (554 → 603 in flight); what the added replica buys is a backlog growing more slowly than one
    fixed replica's over the same seconds (+14 against +24 in flight a second). The verdict compares
    those, and says whether N fixed replicas outpace the load and what p99 did."""
    run = data(step_row("queue depth", label=QUEUE, backlog_at_up=554, backlog_end_high=603,
                        p99_before_up_ms=3229.0, p99_after_up_ms=5019.0, scale_up_after_s=4.0,
                        high_starts_s=3.0, high_seconds=12.0),
               step_row("fixed", label="fixed 1", replicas_max=1, backlog_end_high=451),
               step_row("fixed", label="fixed 2", replicas_max=2, backlog_end_high=207),
               series=[*backlog(QUEUE, 14.0, jitter=2.0), *backlog("fixed 1", 24.0, jitter=2.0),
                       *backlog("fixed 2", 3.0)])
    [growth] = [c for c in step.rules(run) if "grows more slowly" in c.effect]
    assert growth.status == "observed", growth.evidence
    assert [str(q) for q in growth.figures] == ["one fixed +24 in flight/s", "autoscaled +14 in flight/s"]
    assert growth.evidence.startswith(
        "from when the added replica served (4.0 s after the step) to the high load's end (8 s, 9 samples), "
        "the backlog grew +24.0/s on one fixed replica and +14.0/s autoscaled (554 in flight when it started "
        "serving, 603 as the high load ended); it shrinks only where the replicas outpace the load: 2 fixed "
        "replicas answered 60 of the 90 requests/s offered; p99 during the scale-up 3229 ms, after it "
        "5019 ms"), growth.evidence
    assert growth.band is not None and growth.band.value == 0.5  # ±2 about the line over 8 s
    assert len(growth.line()) <= 200, growth.line()


def test_a_replica_serving_only_after_the_high_load_is_a_backlog_that_did_not_shrink() -> None:
    """A step load that ran, whose added replica served only once the high load had ended (seen on a
    slow 2-core run: 20 s after the step), and a utilisation run that added none: it did not slow the
    backlog during the high load, and the verdict says why (issue 52: a measured result is judged; it was
    "not measured" before); queue depth still added its replica before utilisation did."""
    run = data(
        step_row("queue depth", decided_after_s=11.6, scale_up_after_s=20.1, upscale_delay_s=1.0,
                 look_back_period_s=1.0, backlog_at_up=None, backlog_end_high=380, high_seconds=12.0),
        step_row("utilisation", scale_up_after_s=None, backlog_end_high=400),
    )
    checks = step.rules(run)
    assert [checks[1].status, checks[3].status] == ["not observed", "observed"]
    assert checks[1].evidence == ("the added replica served only 20.1 s after the step, once the high load "
                                  "had ended: it could not slow the backlog during it")
    assert checks[3].evidence == ("queue depth serving 20.1 s after the step; utilisation had no added "
                                  "replica serving")
    neither = step.rules(data(step_row("queue depth", backlog_end_high=380), step_row("utilisation")))
    assert [c.status for c in (neither[0], neither[1], neither[3])] == ["not observed", "not observed",
                                                                        "cannot show here"]
    assert neither[0].evidence == "no replica started after the step"
    assert neither[1].evidence == ("no replica was added after the step: it could not slow the backlog "
                                   "during it")
    assert neither[3].evidence == "this run cannot show it, because neither policy added a replica"


# ----------------------------------------------------------------------------- preconditions (issue 36)
def test_a_run_where_nothing_scaled_because_one_replica_kept_up_shows_no_autoscaling_effect() -> None:
    """The run issue 36 read: one fixed replica answered the whole 1.2× step (the capacity estimate was
    low), the autoscaled run's replica started 14.4 s after the step and never served, and nothing else
    scaled. No autoscaling verdict may read observed or not observed, the cheaper replica-seconds least of
    all, and no evidence prints nan."""
    run = data(
        step_row("queue depth", label="queue depth", replicas_max=1, decided_after_s=14.4,
                 scale_up_after_s=None, upscale_delay_s=1.0, look_back_period_s=1.0, high_starts_s=3.0,
                 backlog_at_up=None, backlog_end_high=3, replica_seconds=20.0),
        step_row("utilisation", label="utilisation", replicas_max=1, scale_up_after_s=None,
                 replica_seconds=20.0),
        step_row("fixed", label="fixed 1", replicas_max=1, replica_seconds=20.0, backlog_end_high=2),
        step_row("fixed", label="fixed 2", replicas_max=2, replica_seconds=40.0),
        series=[*high_phase("fixed 1", rate=94.0, answered=93.5), *high_phase("queue depth", 94.0, 94.2)])
    checks = [c for c in step.rules(run) if "stand-in" not in c.effect]
    scaling = [c for c in checks if "replica-seconds" in c.effect or "queue depth" in c.effect
               or "backlog" in c.effect or "than on one fixed replica" in c.effect]
    assert len(scaling) == 6  # start, backlog, queue depth vs utilisation, cost, and each vs one fixed
    for verdict in scaling:
        assert verdict.status == "cannot show here", verdict
        assert verdict.evidence.startswith("this run cannot show it, because the high load never outran one "
                                           "replica: one fixed replica answered 93.5 of the 94.0 requests/s")
    assert not any("nan" in c.evidence for c in checks)


def test_the_overload_is_read_from_the_autoscaled_run_before_one_fixed_replica_ran() -> None:
    """In the notebook the first verdict comes before the fixed runs: the autoscaled run's own samples
    up to the moment its replica served say whether one replica fell behind."""
    queue = step_row("queue depth", label="queue depth", decided_after_s=3.0, scale_up_after_s=6.0,
                     upscale_delay_s=1.0, look_back_period_s=1.0, high_starts_s=3.0)
    behind = step.rules(data(queue, series=high_phase("queue depth", rate=94.0, answered=70.0)))
    assert behind[0].status == "observed"
    ahead = step.rules(data(queue, series=high_phase("queue depth", rate=94.0, answered=94.0)))
    assert ahead[0].status == "cannot show here"
    assert "the autoscaled run's one replica answered 94.0 of the 94.0 requests/s" in ahead[0].evidence


def test_a_replica_that_started_but_never_served_is_said_so_never_nan() -> None:
    run = data(step_row("queue depth", label="queue depth", decided_after_s=14.4, scale_up_after_s=None,
                        upscale_delay_s=1.0, look_back_period_s=1.0, metrics_interval_s=0.5,
                        high_starts_s=3.0, backlog_end_high=300),
               series=high_phase("queue depth", rate=94.0, answered=70.0))
    start = step.rules(run)[0]
    assert start.status == "not observed"
    assert start.evidence == ("starting 14.4 s after the step (metrics_interval_s 0.5, look_back_period_s 1, "
                              "upscale_delay_s 1: within 3.5 s, with one sampling interval of 1 s: the "
                              "queue reaches the controller, is averaged, then held), never serving before "
                              "the load ended")


def test_the_kill_rule_needs_a_request_in_flight() -> None:
    [*_, replaced, in_flight] = step.rules(data(
        step_row("fixed", replicas_max=2, replica_seconds=40.0),
        {"kind": "kill", "replaced_after_s": 4.1, "in_flight_at_kill": 0, "failed": 0,
         "failed_sent_after_kill": 0}))
    assert replaced.status == "observed"
    assert in_flight.status == "cannot show here"
    assert in_flight.evidence.startswith("this run cannot show it, because no request was in flight")
    [*_, failed] = step.rules(data({"kind": "kill", "replaced_after_s": 4.1, "in_flight_at_kill": 1,
                                    "failed": 1, "failed_sent_after_kill": 1}))
    assert failed.status == "not observed"


def test_shedding_that_refused_nothing_cannot_show_the_bound() -> None:
    checks = step.rules(data(step_row("fixed", replicas_max=2, replica_seconds=40.0),
                             {"kind": "shedding", "max_queued_requests": -1, "p99_ms": 900.0},
                             {"kind": "shedding", "max_queued_requests": 4, "p99_ms": 300.0, "shed_503": 0}))
    [bound] = [c for c in checks if "max_queued_requests" in c.effect]
    assert bound.status == "cannot show here" and "refused no request" in bound.evidence


def test_tritons_refusals_are_named_by_their_cause_and_wait() -> None:
    """A burst refused by the 100 ms waiting limit, after about half a second, is not a queue bound that
    refuses at once: the evidence names each cause and how long its refusals took."""
    checks = step.rules(data(
        step_row("fixed", replicas_max=2, replica_seconds=40.0),
        {"kind": "triton_queue", "max_queue_size": None, "rejected": 0},
        {"kind": "triton_queue", "max_queue_size": 4, "rejected": 31,
         "rejected_by": {"Request timeout expired": {"count": 31, "p99_ms": 529.8}}}))
    [triton] = [c for c in checks if "Triton" in c.effect]
    assert triton.status == "observed"
    assert triton.evidence == ("refused: unbounded 0, bounded 31; 31 by the waiting limit (answered after "
                               "p99 529.8 ms)")


def test_the_timeline_line_agrees_with_its_plot_and_the_plot_is_drawn_once() -> None:
    """Issue 36: "replica count changed at no moment" under a plot whose dotted line showed a replica
    starting at about 17 s; and every timeline appeared twice (pyplot's figure and the image)."""
    import matplotlib.pyplot as plt

    from servelab.lab.step10_scaling_out import describe_replicas, fig_timeline

    series = [{"run": "queue depth", "t": float(t), "replicas": 1, "starting": int(t >= 17), "phase": 1,
               "in_flight": 2, "ongoing_per_replica": 2.0, "p50_ms": 20.0, "p99_ms": 40.0,
               "cpu_util_pct": 50.0} for t in range(1, 21)]
    line = describe_replicas("queue depth", series, step_s=3.0)  # times from the step, as the verdicts
    assert line == ("queue depth: 1 replica(s) serving throughout; a replica starting 14.0 s after the step "
                    "never served before the run ended")
    before = len(plt.get_fignums())
    fig = fig_timeline(pd.DataFrame(series))
    assert len(plt.get_fignums()) == before and fig.axes[-1].get_ylim() == (0, 105)


def test_a_refusal_cause_is_named_one_way_in_the_notebook_and_the_report() -> None:
    from servelab.lab.step10_triton_queue import cause_words

    assert cause_words("Request timeout expired") == "the waiting limit"
    assert cause_words("Exceeds maximum queue size", explain=True) == (
        "the queue size ('Exceeds maximum queue size': refused on arrival)")
    assert cause_words("model is not ready") == "'model is not ready'"


def test_each_run_keeps_one_colour_in_every_panel_and_both_backlogs_are_labelled() -> None:
    """Issue 52: line colours changed meaning between panels (matplotlib's cycle per axis), and the plots
    showed the backlog per replica while the text compared totals."""
    from matplotlib.colors import to_hex

    from servelab.lab.step10_views import fig_timeline, run_colour

    series = [{"run": run, "t": float(t), "replicas": 1, "starting": 0, "in_flight": 10 * t,
               "ongoing_per_replica": 5.0 * t, "p50_ms": 20.0, "p99_ms": 40.0, "cpu_util_pct": 90.0}
              for run in ("fixed 1", "autoscaled 1-2 (queue depth)") for t in range(1, 6)]
    fig = fig_timeline(pd.DataFrame(series), step_s=2.0)
    wanted = {to_hex(run_colour("fixed 1")), to_hex(run_colour("autoscaled 1-2 (queue depth)"))}
    assert len(wanted) == 2
    for ax in fig.axes:
        assert {to_hex(line.get_color()) for line in ax.lines} == wanted, ax.get_ylabel()
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert labels[1].startswith("in flight, total") and labels[2].startswith("in flight per")
    assert run_colour("fixed 1") == run_colour("fixed 1 on the stand-in")  # its kind's colour, dashed


def test_an_autoscaled_run_worse_than_fixed_1_is_not_observed() -> None:
    """Issue 41 (10): the autoscaled runs did worse than one fixed replica while the two replicas shared 2
    cores at 100 %; each autoscaled run is compared with one fixed replica and two, on backlog and p99.
    Issue 52: on those same cores two fixed replicas beat one (20 against 102 in flight), so the machine can
    show what a second replica buys, and the verdicts are judged from the numbers (they read "cannot show
    it" for a busy CPU before); what the added replica cost while it started is said under them."""
    verdicts = autoscaling_verdicts(step_load_run(cpu=100.0))
    assert len(verdicts) == 6
    got = {c.effect.split(",")[0]: c.status for c in verdicts}
    assert list(got.values()) == ["not observed", "observed", "not observed", "observed", "not observed",
                                  "not observed"], got  # start 4.0 > 3.5 s; 249 → 241; worse than fixed 1
    [queue_depth] = [c for c in verdicts if "Autoscaled on queue depth" in c.effect]
    assert queue_depth.evidence == (
        "in flight as the high load ended (from the step: the same moment in every run): autoscaled 241, one "
        "fixed replica 102, 2 fixed 20; p99 over the run 4775 ms, one fixed replica 1460 ms, 2 fixed 700 ms; "
        "its added replica served 8.0 s after the step; while its second replica started (4.0–7.0 s after "
        "the step) the machine's CPU of 2 cores read 100 %; the serving replica answered 40/s meanwhile (one "
        "fixed replica: 55/s over the high load)")
    assert [str(q) for q in queue_depth.figures] == ["in flight 241", "one fixed 102", "p99 4775 ms",
                                                     "one fixed 1460 ms"]
    assert ("needs: a second replica serves more on this machine: N fixed replicas ended the high load with "
            "fewer requests in flight than one — met: in flight as the high load ended: 2 fixed replicas 20, "
            "one fixed replica 102 (band 5)") in queue_depth.details()
    [cost] = [c for c in verdicts if "replica-seconds" in c.effect]
    assert "worse: one fixed replica cost less and served better" in cost.evidence
    assert all(len(c.line()) <= 200 for c in verdicts), [c.line() for c in verdicts]


def test_a_machine_where_two_fixed_replicas_do_no_better_than_one_cannot_show_autoscaling() -> None:
    """Issue 52: "cannot show it" is left for a machine that truly cannot: N fixed replicas no better than
    one (their backlogs within each other's noise), whatever the CPU read."""
    run = step_load_run(cpu=60.0)
    fixed = run.scaling.copy()
    fixed.loc[fixed["label"] == "fixed 2", "backlog_end_high"] = 100
    verdicts = autoscaling_verdicts(RunData(EMPTY, EMPTY, EMPTY, EMPTY, fixed, run.scaling_series))
    capacity = [c for c in verdicts if "starts a replica" not in c.effect and "no later than" not in c.effect]
    assert [c.status for c in capacity] == ["cannot show here"] * 4
    assert all(c.reason.startswith("2 fixed replicas served the step load no better than one on this "
                                   "machine (in flight as the high load ended: 2 fixed replicas 100, one "
                                   "fixed replica 102") for c in capacity), [c.reason for c in capacity]
    timing = [c for c in verdicts if c not in capacity]
    assert [c.status for c in timing] == ["not observed", "observed"]  # timing verdicts stay judged


def test_the_timeline_line_and_the_verdict_give_one_moment_from_one_origin() -> None:
    """Issue 41: "9.2 s" was printed twice, once from the run's start (the timeline's line) and once from
    the step (the verdict). Both now count from the step, and the plot's axis too."""
    from servelab.lab.step10_views import describe_replicas, fig_timeline

    series = samples("autoscaled 1-2 (queue depth)", 60.0)  # serving from 8 s after the step (t = 11)
    line = describe_replicas("autoscaled 1-2 (queue depth)", series, step_s=3.0)
    assert line == "autoscaled 1-2 (queue depth): serving replicas changed 8.0 s after the step (1→2)"
    [start] = [c for c in step10.rules(step_load_run(cpu=60.0)) if "starts a replica" in c.effect]
    assert "serving 8.0 s after it" in start.evidence
    fig = fig_timeline(pd.DataFrame(series), step_s=3.0)
    assert fig.axes[0].lines[0].get_xdata()[0] == -2.0  # the first sample, 2 s before the step
    assert fig.axes[-1].get_xlabel().startswith("seconds from the step")


def test_every_verdict_prints_what_its_run_had_to_reach(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """A verdict's preconditions are printed beside it in the notebook and in the report."""

    from servelab.lab import common
    from servelab.lab.run_report import write_report

    run = tmp_path / "run"
    run.mkdir()
    data = step_load_run(cpu=100.0)
    (run / "scaling.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data.scaling.to_dict("records")))
    (run / "scaling_series.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in data.scaling_series.to_dict("records")))
    monkeypatch.setenv("SERVELAB_RESULTS", str(run))
    from servelab.report import verdicts

    verdicts.forget()  # a fresh notebook: nothing said yet
    common.what_this_run_shows(step10, "starts a replica within", "the backlog grows more slowly")
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("NOT observed: Autoscaling on queue depth starts a replica within")
    assert ("  needs: the high load outran one replica, under 90 % of it answered — met: one fixed replica "
            "answered 55.0 of the 67.2 requests/s offered (82%)") in out
    # the second verdict shares the need: said again by its first words only
    assert "  needs: the high load outran one replica, under 90 % of it answered — met (as above)" in out
    page = write_report(run).read_text()
    assert "needs: the high load outran one replica" in page and "one fixed replica 102 (band 5)" in page


def test_the_device_stand_in_is_judged_on_its_own_runs() -> None:
    """Issue 52: the same control loop on replicas that wait the model's measured forward pass off the CPU
    (as on a GPU), labelled as the stand-in, judged against its own fixed replica; the model's verdicts
    never read the stand-in's rows (this session's figures: stand-in fixed 1 ended the high load with 129
    in flight, autoscaled 46)."""
    model = [step_row("queue depth", label="autoscaled 1-2 (queue depth)", scale_up_after_s=7.2,
                      high_seconds=12.0, backlog_end_high=2, p99_ms=800.0),
             step_row("fixed", label="fixed 1", replicas_max=1, backlog_end_high=14, p99_ms=700.0)]
    stand_in = [step_row("queue depth", label="autoscaled 1-2 (queue depth) on the stand-in", device_ms=9.1,
                         scale_up_after_s=7.2, high_seconds=12.0, backlog_end_high=46, p99_ms=1664.0,
                         backlog_end_high_spread=0.1),
                step_row("fixed", label="fixed 1 on the stand-in", replicas_max=1, device_ms=9.1,
                         backlog_end_high=129, p99_ms=1917.0, backlog_end_high_spread=0.05)]
    series = [*high_phase("fixed 1", rate=46.0, answered=41.8),
              *high_phase("fixed 1 on the stand-in", rate=65.5, answered=53.8)]
    checks = step.rules(data(*model, *stand_in, series=series))
    [on] = [c for c in checks if "stand-in" in c.effect]
    assert on.status == "observed", on.line()
    assert [str(q) for q in on.figures] == ["in flight 46", "one fixed 129", "p99 1664 ms",
                                            "one fixed 1917 ms"]
    assert on.evidence.endswith("each replica waits 9.1 ms per request, the model's forward pass measured "
                                "here")
    [model_versus] = [c for c in checks if c.effect.startswith("Autoscaled on queue depth,")]
    assert "autoscaled 2, one fixed replica 14" in model_versus.evidence  # its own rows, not the stand-in's
    assert model_versus.status == "cannot show here"  # the model's high load never outran one replica (91 %)
