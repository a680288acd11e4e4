"""Notebook 10's report: the step load's time series and the shedding table (``sections``), and its
expected effects checked on a run's data (``rules``). The measuring is in step10_scaling_out.
"""

from __future__ import annotations

import pandas as pd

from servelab.lab.step10_scaling_out import SUMMARY_COLUMNS, fig_timeline
from servelab.report.effects import Check, check, row
from servelab.report.figures import Section, plot_html, table_html
from servelab.results.schema import RunData, num


def sections(data: RunData) -> list[Section]:
    """The step load's time series, fixed vs autoscaled, shedding."""
    out: list[Section] = []
    runs, series = data.scaling, data.scaling_series
    if series.empty or runs.empty:
        return out
    steps = runs[runs["kind"] == "step"]
    out.append(Section("Scaling out: the step load over time (Ray Serve)", [
        plot_html(fig_timeline(series), read_steps(steps)), table_html(steps, SUMMARY_COLUMNS)]))
    shed = runs[runs["kind"].isin(["shedding", "triton_queue"])]
    if not shed.empty:
        out.append(Section("Load past capacity: shedding with max_queued_requests, Triton's queue policy",
                           [table_html(shed, [*SUMMARY_COLUMNS, "max_queued_requests", "max_queue_size",
                                              "rejected"])]))
    return out


def _text(value: float | None, form: str) -> str:  # nothing when there is no value (a run not made yet)
    return "" if value is None else form.format(value)


def read_steps(steps: pd.DataFrame) -> str:
    parts = [f"{r['label']}: p99 {r['p99_ms']} ms, {r['replica_seconds']} replica-s"
             for r in steps.to_dict("records")]
    return "; ".join(parts) or "no step-load runs"


def rules(data: RunData) -> list[Check]:
    """Replicas rise within the delay; the backlog shrinks once the added replica serves; queue depth
    adds its replica no later than utilisation; shedding bounds accepted p99; autoscaling costs fewer
    replica-seconds than N fixed; a killed replica is replaced. Noise: the spread of the last samples
    (backlog) or of the intervals (p99), and one sampling interval for times and replica-seconds."""
    runs = data.scaling if not data.scaling.empty else pd.DataFrame(columns=["kind", "policy"])
    step = runs[runs["kind"] == "step"]
    shed = runs[runs["kind"] == "shedding"]
    bounded = shed[num(shed, "max_queued_requests") > 0]
    queue = step[step["policy"] == "queue depth"]
    util = step[step["policy"] == "utilisation"]
    fixed = step[step["policy"] == "fixed"]
    fixed_n = fixed[num(fixed, "replicas_max") > 1]
    fixed_one = fixed[num(fixed, "replicas_max") == 1]
    kill = runs[runs["kind"] == "kill"]
    triton = runs[runs["kind"] == "triton_queue"]
    unbounded_triton = triton[triton["max_queue_size"].isna()] if "max_queue_size" in triton else triton
    after, delay = row(queue, "decided_after_s"), row(queue, "upscale_delay_s")
    look_back = row(queue, "look_back_period_s")
    serving = row(queue, "scale_up_after_s") or float("nan")
    tick = row(queue, "sample_interval_s") or 1.0

    def resolution(value: float | None) -> float | None:  # one sampling interval, relative
        return tick / value if value else None

    fixed_rs, auto_rs = row(fixed_n, "replica_seconds"), row(queue, "replica_seconds")
    replicas = row(fixed_n, "replicas_max") or 1
    up_q, up_u = row(queue, "scale_up_after_s"), row(util, "scale_up_after_s")
    backlog = check("Once the added replica serves, the backlog shrinks during the high load: fewer requests "
                    "in flight as the high load ends than when the replica started serving (p99 follows only "
                    "once the backlog has drained)",
                    (row(queue, "backlog_at_up"), row(queue, "backlog_end_high")), lambda u, e: e < u,
                    lambda u, e: f"{u:.0f} in flight when it started serving, {e:.0f} as the high load ended"
                    + _text(row(fixed_one, "backlog_end_high"), " (one fixed replica: {:.0f})")
                    + _text(row(queue, "p99_before_up_ms"), "; p99 during the scale-up {:.0f} ms")
                    + _text(row(queue, "p99_after_up_ms"), ", after it {:.0f} ms")
                    + _text(row(queue, "timeouts") or None, "; {:.0f} requests timed out (they leave "
                            "the backlog unanswered)"),
                    noise=(None, row(queue, "backlog_end_high_spread")))
    if backlog.status == "not measured" and row(queue, "backlog_end_high") is not None:  # it ran: too late
        backlog = Check(backlog.effect, "not observed", "no replica was added after the step" if up_q is None
                        else f"the added replica served only {up_q:.1f} s after the step, once the high load "
                             "had ended")
    earlier = check("Autoscaling on queue depth has its added replica serving no later than autoscaling on "
                    "CPU utilisation",
                    (up_u, up_q), lambda u, q: q <= u,
                    lambda u, q: f"serving after the step: utilisation {u:.1f} s, queue depth {q:.1f} s",
                    noise=(resolution(up_u), resolution(up_q)))
    if earlier.status == "not measured" and not queue.empty and not util.empty:  # a policy added none
        earlier = (Check(earlier.effect, "observed", f"queue depth serving {up_q:.1f} s after the step; "
                         "utilisation added no replica") if up_q is not None else
                   Check(earlier.effect, "not observed", "queue depth added no replica" + (
                       f"; utilisation serving {up_u:.1f} s after the step" if up_u is not None
                       else ", nor did utilisation")))
    return [
        check("Under the step load, autoscaling on queue depth starts a replica within upscale_delay_s + "
              "look_back_period_s + 5 s of the step (metrics are pushed, averaged, then acted on)",
              (after, delay, look_back), lambda a, d, lb: a <= d + lb + 5,
              lambda a, d, lb: f"starting {a:.1f} s after the step (upscale_delay_s {d:g}, "
                               f"look_back_period_s {lb:g}), serving {serving:.1f} s after it"),
        backlog,
        earlier,
        check("With max_queued_requests set, accepted requests' p99 is lower than with an unbounded queue",
              (row(shed, "p99_ms", max_queued_requests=-1), row(bounded, "p99_ms")),
              lambda u, b: b < u, lambda u, b: f"unbounded {u:.0f} ms, bounded {b:.0f} ms",
              noise=(None, row(bounded, "p99_spread"))),
        check("Autoscaling costs fewer replica-seconds than the fixed N replicas",
              (fixed_rs, auto_rs), lambda f, a: a < f,
              lambda f, a: f"fixed {f:.0f}, autoscaled {a:.0f} replica-s",
              noise=(resolution(fixed_rs / replicas if fixed_rs else None), resolution(auto_rs))),
        check("Triton's rejecting queue policy refuses part of a burst the unbounded queue accepts whole",
              (row(unbounded_triton, "rejected"), row(triton, "rejected", pick="max")),
              lambda u, b: u == 0 and b > 0, lambda u, b: f"refused: unbounded {u:.0f}, bounded {b:.0f}"),
        check("A killed replica is replaced", (row(kill, "replaced_after_s"),), lambda s: s < 60,
              lambda s: f"a new replica answered {s:.1f} s after the kill"),
    ]
