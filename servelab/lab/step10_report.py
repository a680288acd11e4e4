"""Notebook 10's report: the step load's time series and the shedding table (``sections``), and its
expected effects checked on a run's data (``rules``). The measuring is in step10_scaling_out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd

from servelab.lab.step10_scaling_out import SUMMARY_COLUMNS, fig_timeline
from servelab.lab.step10_triton_queue import cause_words
from servelab.report.effects import (
    NO_NUMBERS,
    NOT_OBSERVED,
    OBSERVED,
    Check,
    Need,
    Quantity,
    cannot_show,
    check,
    noise_band,
    row,
)
from servelab.report.figures import Section, plot_html, table_html
from servelab.results.schema import RunData, num

# what a verdict's "(spread …)" spans here (servelab.report.terms)
# the verdict the report's first screen gives as this step's one line (servelab.report.html.headline)
HEADLINE = "Autoscaled on queue depth"
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
                           [table_html(shed, ["label", "max_queued_requests", "max_queue_size", "sent",
                                              "ok", "shed_503", "rejected", "p99_ms", "shed_p99_ms"])]))
    return out


def _text(value: float | None, form: str) -> str:  # nothing when there is no value (a run not made yet)
    return "" if value is None else form.format(value)


def read_steps(steps: pd.DataFrame) -> str:
    parts = [f"{r['label']}: p99 {r['p99_ms']} ms, {r['replica_seconds']} replica-s"
             for r in steps.to_dict("records")]
    return "; ".join(parts) or "no step-load runs"


OUTRAN = 0.9  # the high load outran a replica that answered fewer than this share of what was offered
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


# the autoscaling lesson's preconditions: an overload, and a machine on which a second replica helps at all
# (docs/decisions/2026-12-01-verdicts-at-a-glance.md; before it, a busy CPU while the replica started)
OUTRAN_NEED = "the high load outran one replica, under 90 % of it answered"
HELPS_NEED = ("a second replica serves more on this machine: N fixed replicas ended the high load with "
              "fewer requests in flight than one")


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


def helps(runs: pd.DataFrame) -> Need:
    """Whether this machine can show what a second replica buys: N fixed replicas ended the high load with
    fewer requests in flight than one fixed replica, by more than the two backlogs' noise (their last
    three samples). Not known before both fixed runs exist; where N did no better, no autoscaled run can
    do better either, and the machine truly cannot show the effect."""
    step = runs[runs["kind"] == "step"] if "kind" in runs else runs.iloc[0:0]
    fixed = step[step["policy"] == "fixed"]
    one, many = fixed[num(fixed, "replicas_max") == 1], fixed[num(fixed, "replicas_max") > 1]
    b1, bn = row(one, "backlog_end_high"), row(many, "backlog_end_high")
    if b1 is None or bn is None:
        return Need(HELPS_NEED)
    n = int(row(many, "replicas_max") or 2)
    spreads = (row(one, "backlog_end_high_spread"), row(many, "backlog_end_high_spread"))
    band = noise_band(b1, bn, *spreads) or 0.0
    said = f"in flight as the high load ended: {n} fixed replicas {bn:.0f}, one fixed replica {b1:.0f}"
    if bn + band < b1:
        return Need(HELPS_NEED, True, said + (f" (band {band:.0f})" if band else ""))
    return Need(HELPS_NEED, False, f"{n} fixed replicas served the step load no better than one on this "
                                   f"machine ({said}, band {band:.0f}): no autoscaler can add what a second "
                                   "replica does not")


def start_cost(runs: pd.DataFrame, series: pd.DataFrame, policy: str) -> str:
    """What the ``policy`` run's added replica cost while it started: the machine's CPU (100 % = every
    core) and what the serving replica answered meanwhile, beside one fixed replica's rate; "" where no
    replica started after the step. On a few cores a replica starting (a process, its imports, the model)
    takes cores from the one serving (docs/decisions/2026-12-01-verdicts-at-a-glance.md)."""
    step = runs[runs["kind"] == "step"] if "kind" in runs else runs.iloc[0:0]
    auto = step[step["policy"] == policy]
    if auto.empty or series.empty or "run" not in series or row(auto, "decided_after_s") is None:
        return ""
    mine = series[series["run"] == str(auto.iloc[-1].get("label"))]
    after = num(mine, "t") - float(auto.iloc[-1].get("high_starts_s") or 0)
    starting = mine[(num(mine, "starting") > 0) & (after > 0)]
    if starting.empty:
        return ""
    cpu = float(num(starting, "cpu_util_pct").mean())
    when = f"{after[starting.index].min():.1f}–{after[starting.index].max():.1f} s after the step"
    meanwhile = mine[(num(mine, "phase") == 1) & mine.index.isin(starting.index)]
    one = step[(step["policy"] == "fixed") & (num(step, "replicas_max") == 1)]
    alone = answered_share(series, str(one.iloc[-1].get("label"))) if not one.empty else None
    beside = f" (one fixed replica: {alone[0]:.0f}/s over the high load)" if alone else ""
    answered = _rate(meanwhile)
    rate = f"; the serving replica answered {answered:.0f}/s meanwhile{beside}" if answered else ""
    cores = row(runs, "cpu_count")
    on = f" of {cores:g} cores" if cores else ""
    return f"while its second replica started ({when}) the machine's CPU{on} read {cpu:.0f} %{rate}"


def _rate(samples: pd.DataFrame) -> float:  # answers per second over these samples
    seconds = float(num(samples, "interval_s").sum())
    return float(num(samples, "ok").sum()) / seconds if seconds else 0.0


def rules(data: RunData) -> list[Check]:
    """Replicas rise within the windows of the step; the backlog shrinks once the added replica serves; each
    autoscaled run ends the high load with a smaller backlog and a lower p99 than one fixed replica (N fixed
    replicas named beside it); queue depth adds its replica no later than utilisation; shedding bounds
    accepted p99; autoscaling costs fewer replica-seconds than N fixed, serving no worse than one fixed; a
    killed replica is replaced, and only requests in flight at the kill fail. The autoscaling effects need
    the high load to outrun one replica (``outran``); those about capacity, that a second replica serves more
    on this machine at all (``helps``: N fixed against one fixed). What a replica cost while it started is
    said with them (``start_cost``). Each other effect its own precondition (the replica served, the bound
    refused some, a request was in flight). Noise: the spread of the last samples (backlog) or of the
    intervals (p99), and one sampling interval for times and replica-seconds.
    Why: docs/decisions/2026-11-26-verdicts-with-preconditions.md, 2026-12-01-verdicts-at-a-glance.md."""
    runs = data.scaling if not data.scaling.empty else pd.DataFrame(columns=["kind", "policy"])
    runs = runs.assign(**{c: None for c in ("kind", "policy") if c not in runs})
    stand = num(runs, "device_ms").notna() if "device_ms" in runs else pd.Series(False, index=runs.index)
    runs, stand_in = runs[~stand], runs[stand]  # the model's runs; the device stand-in's beside them
    step = runs[runs["kind"] == "step"]
    shed = runs[runs["kind"] == "shedding"]
    bounded = shed[num(shed, "max_queued_requests") > 0]
    queue = step[step["policy"] == "queue depth"]
    util = step[step["policy"] == "utilisation"]
    fixed = step[step["policy"] == "fixed"]
    fixed_n = fixed[num(fixed, "replicas_max") > 1]
    fixed_one = fixed[num(fixed, "replicas_max") == 1]
    overload = outran(runs, data.scaling_series)
    needs = (overload, helps(runs))
    after, delay = row(queue, "decided_after_s"), row(queue, "upscale_delay_s")
    look_back = row(queue, "look_back_period_s")
    interval = row(queue, "metrics_interval_s") or (DEFAULT_METRICS_INTERVAL_S if not queue.empty else None)
    serving = row(queue, "scale_up_after_s")
    tick = row(queue, "sample_interval_s") or 1.0

    def resolution(value: float | None) -> float | None:  # one sampling interval, relative
        return tick / value if value else None

    up_q, up_u = row(queue, "scale_up_after_s"), row(util, "scale_up_after_s")
    starts = {policy: start_cost(runs, data.scaling_series, policy)
              for policy in ("queue depth", "utilisation")}
    queue_cost = f"; {starts['queue depth']}" if starts["queue depth"] else ""
    effect = ("Autoscaling on queue depth starts a replica within metrics_interval_s + look_back_period_s + "
              "upscale_delay_s of the step")
    start = check(effect, (after, interval, look_back, delay),
                  lambda a, mi, lb, d: a <= mi + lb + d + tick,
                  lambda a, mi, lb, d: f"starting {a:.1f} s after the step (metrics_interval_s {mi:g}, "
                                       f"look_back_period_s {lb:g}, upscale_delay_s {d:g}: within "
                                       f"{mi + lb + d + tick:g} s, with one sampling interval of {tick:g} s: "
                                       "the queue reaches the controller, is averaged, then held), "
                                       + (f"serving {serving:.1f} s after it" if serving is not None
                                          else "never serving before the load ended"),
                  figures=lambda a, mi, lb, d: (Quantity("started", a, "s after the step"),
                                                Quantity("bound", mi + lb + d + tick, "s")),
                  needs=(overload,))
    if start.evidence == NO_NUMBERS and row(queue, "backlog_end_high") is not None:
        start = Check(effect, NOT_OBSERVED, "no replica started after the step", needs=(overload,))
    backlog = check("Once the added replica serves, the backlog shrinks during the high load",
                    (row(queue, "backlog_at_up"), row(queue, "backlog_end_high")), lambda u, e: e < u,
                    lambda u, e: f"{u:.0f} in flight when it started serving, {e:.0f} as the high load ended"
                    + _text(row(fixed_one, "backlog_end_high"), " (one fixed replica: {:.0f})")
                    + _text(row(queue, "p99_before_up_ms"), "; p99 during the scale-up {:.0f} ms")
                    + _text(row(queue, "p99_after_up_ms"), ", after it {:.0f} ms (p99 follows once the "
                            "backlog has drained)")
                    + _text(row(queue, "timeouts") or None, "; {:.0f} requests timed out (they leave "
                            "the backlog unanswered)") + queue_cost,
                    noise=(None, row(queue, "backlog_end_high_spread")), unit="in flight", needs=needs,
                    names=("when it started serving", "as the high load ended"))
    if backlog.evidence == NO_NUMBERS and row(queue, "backlog_end_high") is not None:  # measured: too late
        late = ("no replica was added after the step" if up_q is None else
                f"the added replica served only {up_q:.1f} s after the step, once the high load had ended")
        ended = Quantity("in flight as the high load ended", row(queue, "backlog_end_high") or 0.0)
        backlog = Check(backlog.effect, NOT_OBSERVED, f"{late}: the backlog could not shrink during it"
                        + queue_cost, needs=needs, figures=(ended,))
    earlier = check("Autoscaling on queue depth has its added replica serving no later than autoscaling on "
                    "CPU utilisation",
                    (up_u, up_q), lambda u, q: q <= u,
                    lambda u, q: f"serving after the step: utilisation {u:.1f} s, queue depth {q:.1f} s",
                    noise=(resolution(up_u), resolution(up_q)), unit="s", needs=(overload,),
                    names=("utilisation serving after", "queue depth"))
    if earlier.evidence == NO_NUMBERS and not queue.empty and not util.empty:
        earlier = (Check(earlier.effect, OBSERVED, f"queue depth serving {up_q:.1f} s after the step; "
                         "utilisation added no replica", needs=(overload,),
                         figures=(Quantity("queue depth serving after", up_q, "s"),)) if up_q is not None else
                   Check(earlier.effect, NOT_OBSERVED, f"queue depth added no replica; utilisation serving "
                         f"{up_u:.1f} s after the step", needs=(overload,),
                         figures=(Quantity("utilisation serving after", up_u, "s"),)) if up_u is not None else
                   cannot_show(earlier.effect, "neither policy added a replica", needs=(overload,)))
    versus = [versus_fixed(auto, name, fixed_one, fixed_n, needs, starts[policy])
              for auto, name, policy in ((queue, "queue depth", "queue depth"),
                                         (util, "CPU utilisation", "utilisation"))]
    return [start, backlog, versus[0], earlier, versus[1], *_shedding_rules(shed, bounded),
            _cost(fixed_n, fixed_one, queue, needs, resolution), _stand_in(stand_in, data.scaling_series),
            *_triton_and_kill(runs)]


def _stand_in(runs: pd.DataFrame, series: pd.DataFrame) -> Check:
    """The same control loop on the device stand-in (replicas that wait the model's measured forward pass
    off the CPU, as on a GPU: ``Scaling.device_ms``): the autoscaled run against one fixed replica, as
    ``versus_fixed`` judges the model's runs. Needs the high load to outrun one stand-in replica."""
    step = runs[runs["kind"] == "step"] if "kind" in runs else runs.iloc[0:0]
    fixed_one = step[(step["policy"] == "fixed") & (num(step, "replicas_max") == 1)]
    queue = step[step["policy"] == "queue depth"]
    ms = row(runs, "device_ms")
    verdict = versus_fixed(queue, "queue depth", fixed_one, step.iloc[0:0], (outran(runs, series),))
    verdict = replace(verdict, effect="On the device stand-in, autoscaled on queue depth: less in flight at "
                                      "the high phase's end, lower p99, than one fixed")
    return replace(verdict, evidence=verdict.evidence + (f"; each replica waits {ms:g} ms per request, the "
                                                          "model's forward pass measured here" if ms else ""))


def versus_fixed(auto: pd.DataFrame, name: str, fixed_one: pd.DataFrame, fixed_n: pd.DataFrame,
                 needs: tuple[Need, ...], cost: str = "") -> Check:
    """The autoscaled run ``auto`` against one fixed replica under the same step load, from the same time
    origin (the step): a smaller backlog as the high load ended and a lower p99 over the run (noise: each
    backlog's last three samples); the N fixed replicas' figures and what the added replica cost while it
    started (``cost``) named beside them. Observed only where its added replica served during the high
    load: without one it ran as one fixed replica, and whatever it did was not autoscaling's."""
    up, high = row(auto, "scale_up_after_s"), row(auto, "high_seconds")
    served = up is not None and (high is None or up < high)
    when = ("; it added no replica after the step: it ran as one fixed replica" if up is None else
            f"; its added replica served {up:.1f} s after the step" + ("" if served else
                                                                       f", after the {high:g} s high load"))
    n = int(row(fixed_n, "replicas_max") or 2)
    return check(f"Autoscaled on {name}, the high phase ends with less in flight and a lower p99 than on one "
                 "fixed replica",
                 (row(fixed_one, "backlog_end_high"), row(auto, "backlog_end_high"), row(fixed_one, "p99_ms"),
                  row(auto, "p99_ms")),
                 lambda fb, ab, fp, ap: ab < fb and ap < fp and served,
                 lambda fb, ab, fp, ap: f"in flight as the high load ended (from the step: the same moment "
                 f"in every run): autoscaled {ab:.0f}, one fixed replica {fb:.0f}"
                 + _text(row(fixed_n, "backlog_end_high"), f", {n} fixed {{:.0f}}") + f"; p99 over the run "
                 f"{ap:.0f} ms, one fixed replica {fp:.0f} ms" + _text(row(fixed_n, "p99_ms"),
                                                                      f", {n} fixed {{:.0f}} ms")
                 + when + (f"; {cost}" if cost else ""),
                 figures=lambda fb, ab, fp, ap: _versus_figures(fb, ab, fp, ap),
                 noise=(row(fixed_one, "backlog_end_high_spread"), row(auto, "backlog_end_high_spread")),
                 unit="in flight", needs=needs)


def _shedding_rules(shed: pd.DataFrame, bounded: pd.DataFrame) -> list[Check]:
    """Shedding bounds the accepted requests' p99: only where the bound refused some."""
    refused = row(bounded, "shed_503")
    return [check("With max_queued_requests set, accepted requests' p99 is lower than with an unbounded "
                  "queue",
                  (row(shed, "p99_ms", max_queued_requests=-1), row(bounded, "p99_ms")),
                  lambda u, b: b < u, lambda u, b: f"unbounded {u:.0f} ms, bounded {b:.0f} ms"
                  + _text(refused, "; {:.0f} refused with a 503") + _text(row(bounded, "shed_p99_ms"),
                                                                          " in p99 {:.0f} ms"),
                  noise=(None, row(bounded, "p99_spread")), unit="ms", names=("p99 unbounded", "bounded"),
                  blocked="the bounded run refused no request: its queue never reached the bound"
                  if refused == 0 else None)]


def _versus_figures(fb: float, ab: float, fp: float, ap: float) -> tuple[Quantity, ...]:
    return (Quantity("in flight", ab), Quantity("one fixed", fb), Quantity("p99", ap, "ms"),
            Quantity("one fixed", fp, "ms"))


def _cost(fixed_n: pd.DataFrame, fixed_one: pd.DataFrame, queue: pd.DataFrame, needs: tuple[Need, ...],
          resolution: Any) -> Check:
    """Autoscaling's replica-seconds against N fixed replicas, serving no worse than one fixed replica
    (backlog as the high load ended, p99): cheaper than N but worse than one is no saving, one fixed
    replica being cheaper still. Only where the autoscaled run added a replica (one that never scaled
    costs what one replica costs, which says nothing about autoscaling)."""
    fixed_rs, auto_rs = row(fixed_n, "replica_seconds"), row(queue, "replica_seconds")
    replicas = row(fixed_n, "replicas_max") or 1
    grew = row(queue, "replicas_max")
    a_b, f_b = row(queue, "backlog_end_high"), row(fixed_one, "backlog_end_high")
    a_p, f_p = row(queue, "p99_ms"), row(fixed_one, "p99_ms")
    known = None not in (a_b, f_b, a_p, f_p)
    no_worse = known and a_b <= f_b and a_p <= f_p  # type: ignore[operator]
    verdict = "no worse" if no_worse else "worse: one fixed replica cost less and served better"
    than_one = (f"; against one fixed replica: backlog {a_b:.0f} against {f_b:.0f}, p99 {a_p:.0f} against "
                f"{f_p:.0f} ms ({verdict})" if known else "")
    return check(f"Autoscaling costs fewer replica-seconds than {replicas:g} fixed replicas, serving no "
                 "worse than one fixed replica", (fixed_rs, auto_rs),
                 lambda f, a: a < f and (no_worse or not known),
                 lambda f, a: f"fixed {replicas:g}: {f:.0f} replica-s" + _text(row(fixed_n, "p99_ms"),
                                                                             " (p99 {:.0f} ms)")
                 + f", autoscaled: {a:.0f} replica-s" + _text(a_p, " (p99 {:.0f} ms)") + than_one,
                 noise=(resolution(fixed_rs / replicas if fixed_rs else None), resolution(auto_rs)),
                 unit="replica-s", needs=needs, names=(f"fixed {replicas:g}", "autoscaled"),
                 blocked="the autoscaled run never had a second replica serving: it cost what one replica "
                         "costs"
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
              lambda u, b: f"refused: unbounded {u:.0f}, bounded {b:.0f}" + refusal_causes(triton),
              names=("refused: unbounded queue", "with the policy"), unit="requests"),
        check("A killed replica is replaced", (row(kill, "replaced_after_s"),), lambda s: s < 60,
              lambda s: f"a new replica answered {s:.1f} s after the kill",
              names=("a new replica answered after",), unit="s"),
        check("When a replica is killed, only requests in flight at that moment can fail",
              (in_flight, row(kill, "failed"), after_kill), lambda n, f, a: a == 0,
              lambda n, f, a: f"{n:.0f} in flight at the kill, {f:.0f} failed, {a:.0f} of them sent after it "
                              "(every request sent after the kill should be answered by a live replica)",
              figures=lambda n, f, a: (Quantity("in flight at the kill", n), Quantity("failed", f),
                                       Quantity("sent after it", a)),
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
