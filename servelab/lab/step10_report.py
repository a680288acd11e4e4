"""Notebook 10's report: the step load's time series and the shedding table (``sections``), and its
expected effects checked on a run's data (``rules``). The measuring is in step10_scaling_out.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from servelab.lab.step10_scaling_out import SUMMARY_COLUMNS, fig_timeline
from servelab.lab.step10_triton_queue import cause_words
from servelab.report.effects import Check, cannot_show, check, row
from servelab.report.figures import Section, plot_html, table_html
from servelab.results.schema import RunData, num

# what a verdict's "(spread …)" spans here (servelab.report.terms)
SPREAD_OVER = ("one sampling interval (1 s) for times and replica-seconds, the last three samples for the "
               "backlog, the sampling intervals' p99 for shedding")


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


OUTRAN = 0.9  # the high load outran a replica that answered fewer than this share of what was offered


def answered_share(series: pd.DataFrame, label: str,
                   until_s: float | None = None) -> tuple[float, float] | None:
    """(answers per second, requests per second offered) during the high phase of the run ``label``
    (``scaling_series`` rows), up to ``until_s`` seconds into the load when given; None without samples."""
    if series.empty or "run" not in series:
        return None
    rows = series[(series["run"] == label) & (num(series, "phase") == 1)]
    if until_s is not None:
        rows = rows[num(rows, "t") <= until_s]
    seconds = float(num(rows, "interval_s").sum())
    offered = float((num(rows, "rate") * num(rows, "interval_s")).sum())
    if rows.empty or not seconds or not offered:
        return None
    return float(num(rows, "ok").sum()) / seconds, offered / seconds


def kept_up(runs: pd.DataFrame, series: pd.DataFrame) -> str | None:
    """Why the step load cannot show an autoscaling effect: one replica answered the high load (at least
    ``OUTRAN`` of it), read from one fixed replica's run, else from the autoscaled run before its added
    replica served; None when the load outran it or the run has no samples to say."""
    step = runs[runs["kind"] == "step"] if "kind" in runs else runs.iloc[0:0]
    one = step[(step["policy"] == "fixed") & (num(step, "replicas_max") == 1)]
    queue = step[step["policy"] == "queue depth"]
    if not one.empty:
        share, whose = answered_share(series, str(one.iloc[-1].get("label"))), "one fixed replica"
    elif not queue.empty:
        last = queue.iloc[-1]
        up = row(queue, "scale_up_after_s")
        until = None if up is None else float(last.get("high_starts_s") or 0) + up
        share = answered_share(series, str(last.get("label")), until)
        whose = "the autoscaled run's one replica"
    else:
        return None
    if share is None or share[0] < OUTRAN * share[1]:
        return None
    return (f"the high load never outran one replica: {whose} answered {share[0]:.1f} of the "
            f"{share[1]:.1f} requests/s offered ({share[0] / share[1]:.0%}); lower the capacity estimate "
            "or raise scaling_rate_fractions[1]")


def rules(data: RunData) -> list[Check]:
    """Replicas rise within the delay; the backlog shrinks once the added replica serves; queue depth
    adds its replica no later than utilisation; shedding bounds accepted p99; autoscaling costs fewer
    replica-seconds than N fixed; a killed replica is replaced, and only requests in flight at the kill
    fail. Each checks its precondition first (the load outran one replica, the replica served, the
    bound refused some, a request was in flight) and says when this run cannot show it. Noise: the spread
    of the last samples (backlog) or of the intervals (p99), and one sampling interval for times and
    replica-seconds. Why: docs/decisions/2026-11-26-verdicts-with-preconditions.md."""
    runs = data.scaling if not data.scaling.empty else pd.DataFrame(columns=["kind", "policy"])
    runs = runs.assign(**{c: None for c in ("kind", "policy") if c not in runs})
    step = runs[runs["kind"] == "step"]
    shed = runs[runs["kind"] == "shedding"]
    bounded = shed[num(shed, "max_queued_requests") > 0]
    queue = step[step["policy"] == "queue depth"]
    util = step[step["policy"] == "utilisation"]
    fixed = step[step["policy"] == "fixed"]
    fixed_n = fixed[num(fixed, "replicas_max") > 1]
    fixed_one = fixed[num(fixed, "replicas_max") == 1]
    calm = kept_up(runs, data.scaling_series)
    after, delay = row(queue, "decided_after_s"), row(queue, "upscale_delay_s")
    look_back = row(queue, "look_back_period_s")
    serving = row(queue, "scale_up_after_s")
    tick = row(queue, "sample_interval_s") or 1.0

    def resolution(value: float | None) -> float | None:  # one sampling interval, relative
        return tick / value if value else None

    up_q, up_u = row(queue, "scale_up_after_s"), row(util, "scale_up_after_s")
    effect = ("Under the step load, autoscaling on queue depth starts a replica within upscale_delay_s + "
              "look_back_period_s + 5 s of the step (metrics are pushed, averaged, then acted on)")
    start = check(effect, (after, delay, look_back), lambda a, d, lb: a <= d + lb + 5,
                  lambda a, d, lb: f"starting {a:.1f} s after the step (upscale_delay_s {d:g}, "
                                   f"look_back_period_s {lb:g}), " + (f"serving {serving:.1f} s after it"
                                   if serving is not None else "never serving before the load ended"),
                  blocked=calm)
    if start.status == "not measured" and not calm and row(queue, "backlog_end_high") is not None:
        start = Check(effect, "not observed", "no replica started after the step")
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
                    noise=(None, row(queue, "backlog_end_high_spread")), unit="requests", blocked=calm)
    if backlog.status == "not measured" and not calm and row(queue, "backlog_end_high") is not None:
        backlog = cannot_show(backlog.effect, "no replica was added after the step" if up_q is None
                              else f"the added replica served only {up_q:.1f} s after the step, once the "
                                   "high load had ended")
    earlier = check("Autoscaling on queue depth has its added replica serving no later than autoscaling on "
                    "CPU utilisation",
                    (up_u, up_q), lambda u, q: q <= u,
                    lambda u, q: f"serving after the step: utilisation {u:.1f} s, queue depth {q:.1f} s",
                    noise=(resolution(up_u), resolution(up_q)), unit="s", blocked=calm)
    if earlier.status == "not measured" and not calm and not queue.empty and not util.empty:
        earlier = (Check(earlier.effect, "observed", f"queue depth serving {up_q:.1f} s after the step; "
                         "utilisation added no replica") if up_q is not None else
                   Check(earlier.effect, "not observed", f"queue depth added no replica; utilisation serving "
                         f"{up_u:.1f} s after the step") if up_u is not None else
                   cannot_show(earlier.effect, "neither policy added a replica"))
    return [start, backlog, earlier, *_shedding_rules(shed, bounded),
            _cost(fixed_n, queue, calm, resolution), *_triton_and_kill(runs)]


def _shedding_rules(shed: pd.DataFrame, bounded: pd.DataFrame) -> list[Check]:
    """Shedding bounds the accepted requests' p99: only where the bound refused some."""
    refused = row(bounded, "shed_503")
    return [check("With max_queued_requests set, accepted requests' p99 is lower than with an unbounded "
                  "queue",
                  (row(shed, "p99_ms", max_queued_requests=-1), row(bounded, "p99_ms")),
                  lambda u, b: b < u, lambda u, b: f"unbounded {u:.0f} ms, bounded {b:.0f} ms"
                  + _text(refused, "; {:.0f} refused with a 503") + _text(row(bounded, "shed_p99_ms"),
                                                                          " in p99 {:.0f} ms"),
                  noise=(None, row(bounded, "p99_spread")), unit="ms",
                  blocked="the bounded run refused no request: its queue never reached the bound"
                  if refused == 0 else None)]


def _cost(fixed_n: pd.DataFrame, queue: pd.DataFrame, calm: str | None, resolution: Any) -> Check:
    """Autoscaling's replica-seconds against N fixed replicas: only where the autoscaled run added a
    replica (one that never scaled costs what one replica costs, which says nothing about autoscaling)."""
    fixed_rs, auto_rs = row(fixed_n, "replica_seconds"), row(queue, "replica_seconds")
    replicas = row(fixed_n, "replicas_max") or 1
    grew = row(queue, "replicas_max")
    return check("Autoscaling costs fewer replica-seconds than the fixed N replicas", (fixed_rs, auto_rs),
                 lambda f, a: a < f, lambda f, a: f"fixed {f:.0f}, autoscaled {a:.0f} replica-s",
                 noise=(resolution(fixed_rs / replicas if fixed_rs else None), resolution(auto_rs)),
                 unit="replica-s", blocked=calm or ("the autoscaled run never had a second replica serving: "
                                                    "it cost what one replica costs" if grew == 1 else None))


def _triton_and_kill(runs: pd.DataFrame) -> list[Check]:
    """Triton's queue policy (each refusal's cause and wait named); the killed replica replaced; only
    requests in flight at the kill fail (where one was in flight)."""
    kill = runs[runs["kind"] == "kill"]
    triton = runs[runs["kind"] == "triton_queue"]
    unbounded = triton[triton["max_queue_size"].isna()] if "max_queue_size" in triton else triton
    in_flight, after_kill = row(kill, "in_flight_at_kill"), row(kill, "failed_sent_after_kill")
    return [
        check("Triton's rejecting queue policy refuses part of a burst the unbounded queue accepts whole",
              (row(unbounded, "rejected"), row(triton, "rejected", pick="max")),
              lambda u, b: u == 0 and b > 0,
              lambda u, b: f"refused: unbounded {u:.0f}, bounded {b:.0f}" + refusal_causes(triton)),
        check("A killed replica is replaced", (row(kill, "replaced_after_s"),), lambda s: s < 60,
              lambda s: f"a new replica answered {s:.1f} s after the kill"),
        check("When a replica is killed, only requests in flight at that moment can fail: every request sent "
              "after the kill is answered by a live replica",
              (in_flight, row(kill, "failed"), after_kill), lambda n, f, a: a == 0,
              lambda n, f, a: f"{n:.0f} in flight at the kill, {f:.0f} failed, {a:.0f} of them sent after it",
              blocked="no request was in flight at the moment of the kill (the light load left both replicas "
                      "idle then): run the cell again" if in_flight == 0 else None),
    ]


def refusal_causes(triton: pd.DataFrame) -> str:
    """"; 31 by the waiting limit (after p99 530 ms), 0 by the queue size": the bounded run's refusals
    by cause, from the row's per-cause counts ("" for a row without them)."""
    rows = triton[num(triton, "rejected") > 0] if "rejected" in triton else triton.iloc[0:0]
    if rows.empty or "rejected_by" not in rows:
        return ""
    by = rows.iloc[-1]["rejected_by"]
    if not isinstance(by, dict):
        return ""
    return "; " + ", ".join(f"{v.get('count', 0)} by {cause_words(k)} (answered after p99 "
                            f"{v.get('p99_ms')} ms)" for k, v in by.items())
