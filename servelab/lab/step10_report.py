"""Notebook 10's report: the step load's time series and the shedding table (``sections``), and its
expected effects checked on a run's data (``rules``). The measuring is in step10_scaling_out.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from servelab.lab.step10_scaling_out import SUMMARY_COLUMNS, fig_timeline
from servelab.lab.step10_triton_queue import cause_words
from servelab.report.effects import NO_NUMBERS, Check, Need, cannot_show, check, row
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
        plot_html(fig_timeline(series, step_s=float(row(steps, "high_starts_s") or 0.0)), read_steps(steps)),
        table_html(steps, SUMMARY_COLUMNS)]))
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
FULL_CPU = 90.0  # % of all cores: a machine this busy has no core free for a replica starting on it
DEFAULT_METRICS_INTERVAL_S = 10.0  # Ray's push interval where a row does not record one (before 2026-11-28)


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


# the autoscaling lesson's preconditions (a replica starting or computing on busy cores takes them from the
# one serving: docs/decisions/2026-11-28-lessons-third-pass.md)
OUTRAN_NEED = "the high load outran one replica, under 90 % of it answered"
ROOM_NEED = "a core free for the second replica, the machine's CPU under 90 % while it started"
NO_WORSE_NEED = "the autoscaled run served no worse than one fixed replica, on backlog or p99"


def outran(runs: pd.DataFrame, series: pd.DataFrame) -> Need:
    """Whether the step load can show an autoscaling effect at all: one replica fell behind the high load
    (answered under ``OUTRAN`` of it), read from one fixed replica's run, else from the autoscaled run
    before its added replica served; not known where the run has no samples to say."""
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
        return Need(OUTRAN_NEED)
    if share is None:
        return Need(OUTRAN_NEED)
    said = (f"{whose} answered {share[0]:.1f} of the {share[1]:.1f} requests/s offered "
            f"({share[0] / share[1]:.0%})")
    if share[0] < OUTRAN * share[1]:
        return Need(OUTRAN_NEED, True, said)
    return Need(OUTRAN_NEED, False, f"the high load never outran one replica: {said}; lower the capacity "
                                    "estimate or raise scaling_rate_fractions[1]")


def room(runs: pd.DataFrame, series: pd.DataFrame) -> Need:
    """Whether the machine had a core free for the second replica: the CPU (the whole machine's, 100 % =
    every core) while an autoscaled run's added replica was starting after the step, under ``FULL_CPU``;
    said with the cores per replica and what the serving replica answered meanwhile. Not known where no
    replica started after the step."""
    step = runs[runs["kind"] == "step"] if "kind" in runs else runs.iloc[0:0]
    cores = row(runs, "cpu_count")
    for policy in ("queue depth", "utilisation"):
        auto = step[step["policy"] == policy]
        label, decided = (str(auto.iloc[-1].get("label")), row(auto, "decided_after_s")) if not auto.empty \
            else ("", None)
        if decided is None or series.empty or "run" not in series:
            continue
        mine = series[series["run"] == label]
        after = num(mine, "t") - float(auto.iloc[-1].get("high_starts_s") or 0)
        starting = mine[(num(mine, "starting") > 0) & (after > 0)]
        if starting.empty:
            continue
        cpu = float(num(starting, "cpu_util_pct").mean())
        when = f"{after[starting.index].min():.1f}–{after[starting.index].max():.1f} s after the step"
        replicas = max(2, int(row(auto, "replicas_max") or 2))
        share = (f", {cores:g} cores ({cores / replicas:.1f} per replica) for {replicas} replicas (one ONNX "
                 "Runtime thread each), Serve's proxy and the load generator") if cores else ""
        meanwhile = mine[(num(mine, "phase") == 1) & mine.index.isin(starting.index)]
        one = step[(step["policy"] == "fixed") & (num(step, "replicas_max") == 1)]
        alone = answered_share(series, str(one.iloc[-1].get("label"))) if not one.empty else None
        rate = (f", the serving replica answering {_rate(meanwhile):.0f}/s meanwhile" + (
            f" (one fixed replica: {alone[0]:.0f}/s over the high load)" if alone else "")) \
            if _rate(meanwhile) else ""
        said = f"the CPU read {cpu:.0f} % while the {policy} run's second replica started ({when})"
        said += share + rate
        if cpu < FULL_CPU:
            return Need(ROOM_NEED, True, said)
        return Need(ROOM_NEED, False, f"the replicas share fewer cores than they need: {said}")
    return Need(ROOM_NEED)


def _rate(samples: pd.DataFrame) -> float:  # answers per second over these samples
    seconds = float(num(samples, "interval_s").sum())
    return float(num(samples, "ok").sum()) / seconds if seconds else 0.0


def no_worse(auto: pd.DataFrame, fixed_one: pd.DataFrame) -> Need:
    """Whether the autoscaled run did no worse than one fixed replica under the same step load: a backlog
    as the high load ended and a p99 over the run, each no larger than its."""
    a_b, f_b = row(auto, "backlog_end_high"), row(fixed_one, "backlog_end_high")
    a_p, f_p = row(auto, "p99_ms"), row(fixed_one, "p99_ms")
    if None in (a_b, f_b, a_p, f_p):
        return Need(NO_WORSE_NEED)
    said = f"backlog {a_b:.0f} against {f_b:.0f}, p99 {a_p:.0f} against {f_p:.0f} ms"
    if a_b <= f_b and a_p <= f_p:  # type: ignore[operator]
        return Need(NO_WORSE_NEED, True, said)
    return Need(NO_WORSE_NEED, False, f"the autoscaled run served the step load worse than one fixed replica "
                                      f"({said}): one fixed replica cost less and served better")


def rules(data: RunData) -> list[Check]:
    """Replicas rise within the windows of the step; the backlog shrinks once the added replica serves; each
    autoscaled run ends the high load with a smaller backlog and a lower p99 than one fixed replica (two
    fixed replicas named beside it); queue depth adds its replica no later than utilisation; shedding bounds
    accepted p99; autoscaling costs fewer replica-seconds than N fixed; a killed replica is replaced, and
    only requests in flight at the kill fail. The autoscaling effects need the high load to outran one
    replica and a core free for the second (``outran``, ``room``); each other effect its own precondition
    (the replica served, the bound refused some, a request was in flight). Noise: the spread of the last
    samples (backlog) or of the intervals (p99), and one sampling interval for times and replica-seconds.
    Why: docs/decisions/2026-11-26-verdicts-with-preconditions.md, 2026-11-28-lessons-third-pass.md."""
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
    needs = (outran(runs, data.scaling_series), room(runs, data.scaling_series))
    after, delay = row(queue, "decided_after_s"), row(queue, "upscale_delay_s")
    look_back = row(queue, "look_back_period_s")
    interval = row(queue, "metrics_interval_s") or (DEFAULT_METRICS_INTERVAL_S if not queue.empty else None)
    serving = row(queue, "scale_up_after_s")
    tick = row(queue, "sample_interval_s") or 1.0

    def resolution(value: float | None) -> float | None:  # one sampling interval, relative
        return tick / value if value else None

    up_q, up_u = row(queue, "scale_up_after_s"), row(util, "scale_up_after_s")
    effect = ("Under the step load, autoscaling on queue depth starts a replica within metrics_interval_s + "
              "look_back_period_s + upscale_delay_s of the step, plus one sampling interval (the queue "
              "reaches the controller, is averaged, then held)")
    start = check(effect, (after, interval, look_back, delay),
                  lambda a, mi, lb, d: a <= mi + lb + d + tick,
                  lambda a, mi, lb, d: f"starting {a:.1f} s after the step (metrics_interval_s {mi:g}, "
                                       f"look_back_period_s {lb:g}, upscale_delay_s {d:g}: within "
                                       f"{mi + lb + d + tick:g} s, sampled every {tick:g} s), "
                                       + (f"serving {serving:.1f} s after it" if serving is not None
                                          else "never serving before the load ended"),
                  needs=needs)
    if start.evidence == NO_NUMBERS \
            and row(queue, "backlog_end_high") is not None:
        start = Check(effect, "not observed", "no replica started after the step", needs=needs)
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
                    noise=(None, row(queue, "backlog_end_high_spread")), unit="requests", needs=needs)
    if backlog.evidence == NO_NUMBERS \
            and row(queue, "backlog_end_high") is not None:
        backlog = cannot_show(backlog.effect, "no replica was added after the step" if up_q is None
                              else f"the added replica served only {up_q:.1f} s after the step, once the "
                                   "high load had ended", needs=needs)
    earlier = check("Autoscaling on queue depth has its added replica serving no later than autoscaling on "
                    "CPU utilisation",
                    (up_u, up_q), lambda u, q: q <= u,
                    lambda u, q: f"serving after the step: utilisation {u:.1f} s, queue depth {q:.1f} s",
                    noise=(resolution(up_u), resolution(up_q)), unit="s", needs=needs)
    if earlier.evidence == NO_NUMBERS \
            and not queue.empty and not util.empty:
        earlier = (Check(earlier.effect, "observed", f"queue depth serving {up_q:.1f} s after the step; "
                         "utilisation added no replica", needs=needs) if up_q is not None else
                   Check(earlier.effect, "not observed", f"queue depth added no replica; utilisation serving "
                         f"{up_u:.1f} s after the step", needs=needs) if up_u is not None else
                   cannot_show(earlier.effect, "neither policy added a replica", needs=needs))
    versus = [versus_fixed(auto, name, fixed_one, fixed_n, needs)
              for auto, name in ((queue, "queue depth"), (util, "CPU utilisation"))]
    return [start, backlog, versus[0], earlier, versus[1], *_shedding_rules(shed, bounded),
            _cost(fixed_n, queue, (*needs, no_worse(queue, fixed_one)), resolution), *_triton_and_kill(runs)]


def versus_fixed(auto: pd.DataFrame, name: str, fixed_one: pd.DataFrame, fixed_n: pd.DataFrame,
                 needs: tuple[Need, ...]) -> Check:
    """The autoscaled run ``auto`` against one fixed replica under the same step load, from the same time
    origin (the step): a smaller backlog as the high load ended and a lower p99 over the run (noise: each
    backlog's last three samples); the N fixed replicas' figures named beside them. Needs an added replica
    that served during the high load: an autoscaled run without one ran as one fixed replica."""
    up, high = row(auto, "scale_up_after_s"), row(auto, "high_seconds")
    served = Need("its added replica served during the high load", None if auto.empty else (
        up is not None and (high is None or up < high)),
        "it added no replica after the step: it ran as one fixed replica" if up is None else
        f"its added replica served {up:.1f} s after the step" + ("" if high is None or up < high else
                                                                  f", after the {high:g} s high load"))
    n = int(row(fixed_n, "replicas_max") or 2)
    return check(f"Autoscaled on {name}, the step load ends its high phase with a smaller backlog, at a "
                 "lower p99, than on one fixed replica",
                 (row(fixed_one, "backlog_end_high"), row(auto, "backlog_end_high"), row(fixed_one, "p99_ms"),
                  row(auto, "p99_ms")),
                 lambda fb, ab, fp, ap: ab < fb and ap < fp,
                 lambda fb, ab, fp, ap: f"in flight as the high load ended (from the step: the same moment "
                 f"in every run): autoscaled {ab:.0f}, one fixed replica {fb:.0f}"
                 + _text(row(fixed_n, "backlog_end_high"), f", {n} fixed {{:.0f}}") + f"; p99 over the run "
                 f"{ap:.0f} ms, one fixed replica {fp:.0f} ms" + _text(row(fixed_n, "p99_ms"),
                                                                      f", {n} fixed {{:.0f}} ms"),
                 noise=(row(fixed_one, "backlog_end_high_spread"), row(auto, "backlog_end_high_spread")),
                 unit="requests", needs=(*needs, served))


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


def _cost(fixed_n: pd.DataFrame, queue: pd.DataFrame, needs: tuple[Need, ...], resolution: Any) -> Check:
    """Autoscaling's replica-seconds against N fixed replicas, their p99 beside them: only where the
    autoscaled run added a replica (one that never scaled costs what one replica costs, which says nothing
    about autoscaling) and served no worse than one fixed replica (``needs``: else that one is cheaper)."""
    fixed_rs, auto_rs = row(fixed_n, "replica_seconds"), row(queue, "replica_seconds")
    replicas = row(fixed_n, "replicas_max") or 1
    grew, fixed_p99 = row(queue, "replicas_max"), row(fixed_n, "p99_ms")
    return check("Autoscaling costs fewer replica-seconds than the fixed N replicas", (fixed_rs, auto_rs),
                 lambda f, a: a < f,
                 lambda f, a: f"fixed {replicas:g}: {f:.0f} replica-s" + _text(fixed_p99, " (p99 {:.0f} ms)")
                 + f", autoscaled: {a:.0f} replica-s" + _text(row(queue, "p99_ms"), " (p99 {:.0f} ms)"),
                 noise=(resolution(fixed_rs / replicas if fixed_rs else None), resolution(auto_rs)),
                 unit="replica-s", needs=needs, blocked="the autoscaled run never had a second replica "
                                                        "serving: it cost what one replica costs"
                 if grew == 1 else None)


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
