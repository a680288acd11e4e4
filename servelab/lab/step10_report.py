"""Notebook 10's report: the step load's time series and the shedding table (``sections``), and its
expected effects checked on a run's data (``rules``). The measuring is in step10_scaling_out.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pandas as pd

from servelab.lab.step10_needs import answered_share, helps, high_phase, outran, start_cost
from servelab.lab.step10_scaling_out import SUMMARY_COLUMNS, fig_timeline
from servelab.lab.step10_triton_queue import cause_words
from servelab.report.effects import (
    NO_NUMBERS,
    NOT_OBSERVED,
    OBSERVED,
    TOO_NOISY,
    Check,
    Need,
    Quantity,
    cannot_show,
    check,
    row,
)
from servelab.report.figures import Section, plot_html, table_html
from servelab.results.schema import RunData, num, trend

# what a verdict's "(spread …)" spans here (servelab.report.terms)
# the verdict the report's first screen gives as this step's one line (servelab.report.html.headline)
HEADLINE = "Autoscaled on queue depth"
SPREAD_OVER = ("one sampling interval (1 s) for times and replica-seconds, the last five samples' scatter "
               "about their trend for a backlog, the samples' scatter about its line for a backlog's growth, "
               "the sampling intervals' p99 for shedding")


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


DEFAULT_METRICS_INTERVAL_S = 10.0  # Ray's push interval where a row does not record one (before 2026-11-28)


def rules(data: RunData) -> list[Check]:
    """Replicas rise within the windows of the step; once the added replica serves, the backlog grows more
    slowly than one fixed replica's over the same seconds (``backlog_growth``); each
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
    backlog = backlog_growth(queue, fixed_one, fixed_n, data.scaling_series, needs, queue_cost)
    earlier = check("Autoscaling on queue depth has its added replica serving no later than autoscaling on "
                    "CPU utilisation",
                    (up_u, up_q), lambda u, q: q <= u,
                    lambda u, q: f"serving after the step: utilisation {u:.1f} s, queue depth {q:.1f} s",
                    noise=(resolution(up_u), resolution(up_q)), unit="s", needs=(overload,),
                    names=("utilisation serving after", "queue depth"))
    if earlier.evidence == NO_NUMBERS and not queue.empty and not util.empty:
        earlier = (Check(earlier.effect, OBSERVED, f"queue depth serving {up_q:.1f} s after the step; "
                         "utilisation had no added replica serving", needs=(overload,),
                         figures=(Quantity("queue depth serving after", up_q, "s"),)) if up_q is not None else
                   Check(earlier.effect, NOT_OBSERVED, "queue depth had no added replica serving; "
                         f"utilisation serving {up_u:.1f} s after the step", needs=(overload,),
                         figures=(Quantity("utilisation serving after", up_u, "s"),)) if up_u is not None else
                   cannot_show(earlier.effect, "neither policy added a replica", needs=(overload,)))
    versus = [versus_fixed(auto, name, fixed_one, fixed_n, needs, starts[policy])
              for auto, name, policy in ((queue, "queue depth", "queue depth"),
                                         (util, "CPU utilisation", "utilisation"))]
    return [start, backlog, versus[0], earlier, versus[1], *_shedding_rules(shed, bounded),
            _cost(fixed_n, fixed_one, queue, needs, resolution), _stand_in(stand_in, data.scaling_series),
            *_triton_and_kill(runs)]


BACKLOG_EFFECT = "Once the added replica serves, the backlog grows more slowly than on one fixed replica"


def growth(series: pd.DataFrame, label: str, since_s: float) -> tuple[float, float, int, float] | None:
    """How fast the backlog of the run ``label`` grew during its high phase from ``since_s`` seconds into
    the load to the phase's end: (the least-squares slope of requests in flight, per second; its noise,
    the samples' scatter about that line over the seconds they span: the slope the scatter alone could
    fake; the samples; the seconds). None under three samples."""
    rows = _high_from(series, label, since_s)
    fit = trend(num(rows, "t"), num(rows, "in_flight"))
    if fit is None:
        return None
    seconds = float(num(rows, "t").max() - num(rows, "t").min())
    return fit[0], fit[1] / seconds, len(rows), seconds


def _high_from(series: pd.DataFrame, label: str, since_s: float) -> pd.DataFrame:
    rows = high_phase(series, label)
    return rows[num(rows, "t") >= since_s]


def _label(run: pd.DataFrame) -> str:  # the run's label, as its samples name it
    return str(run.iloc[-1].get("label")) if not run.empty else ""


def backlog_growth(queue: pd.DataFrame, fixed_one: pd.DataFrame, fixed_n: pd.DataFrame,
                   series: pd.DataFrame, needs: tuple[Need, ...], cost: str) -> Check:
    """Once the autoscaled run's added replica serves, its backlog grows more slowly (or shrinks) than one
    fixed replica's over the same seconds of the same step load: the added capacity, read while the burst
    lasts. Whether it shrinks outright depends on whether the replicas outpace the load, which N fixed
    replicas' answers say. NOT observed where no replica served during the high load; too noisy to call,
    with the high phase that would settle it, where the two growths sit inside their scatter or fewer than
    three samples follow the replica's start. Why it reads growth, not the backlog's own change:
    docs/decisions/2026-12-02-backlog-growth.md."""
    up = row(queue, "scale_up_after_s")
    step_s, high_s = row(queue, "high_starts_s") or 0.0, row(queue, "high_seconds")
    ended = row(queue, "backlog_end_high")
    since = None if up is None else step_s + up
    auto = growth(series, _label(queue), since) if since is not None else None
    one = growth(series, _label(fixed_one), since) if since is not None else None
    f, a = (one or (None,))[0], (auto or (None,))[0]
    spreads = tuple(None if g is None else (g[1] / abs(g[0]) if g[0] else 0.0) for g in (one, auto))
    in_flight = (row(queue, "backlog_at_up"), ended)
    verdict = check(BACKLOG_EFFECT, (f, a), lambda one_, auto_: auto_ < one_,
                    lambda one_, auto_: _growth_said(one_, auto_, float(up or 0.0), auto, in_flight, fixed_n,
                                                     queue, series) + cost,
                    noise=spreads, unit="in flight/s", needs=needs,
                    figures=lambda one_, auto_: (Quantity("one fixed", one_, "in flight/s", True),
                                                 Quantity("autoscaled", auto_, "in flight/s", True)),
                    spans="the larger of the two growths' scatter about their own trend")
    if verdict.evidence == NO_NUMBERS and ended is not None and (
            up is None or (high_s is not None and up >= high_s)):  # measured: no replica served in time
        late = ("no replica was added after the step" if up is None else
                f"the added replica served only {up:.1f} s after the step, once the high load had ended")
        return Check(BACKLOG_EFFECT, NOT_OBSERVED, f"{late}: it could not slow the backlog during it" + cost,
                     needs=needs, figures=(Quantity("in flight as the high load ended", ended),))
    sampled = not fixed_one.empty and all(not _high_from(series, _label(df), step_s).empty
                                          for df in (queue, fixed_one))
    if verdict.evidence == NO_NUMBERS and sampled and up is not None and high_s is not None:
        few = Check(BACKLOG_EFFECT, TOO_NOISY, f"the added replica served {up:.1f} s after the step, "
                    f"{high_s - up:.1f} s before the high load ended: under three samples to read a growth "
                    "from" + cost, needs=needs)
        return replace(few, settle=_longer_high(up, high_s - up))
    if verdict.status == TOO_NOISY and verdict.band is not None and auto is not None and one is not None:
        verdict = replace(verdict, settle=_longer_high(float(up or 0.0), auto[3], verdict.band.value,
                                                       abs(one[0] - auto[0])))
    return verdict


def _longer_high(up: float, window_s: float, band: float | None = None, distance: float = 0.0) -> str:
    """The high phase that would settle a backlog-growth verdict too noisy to call: a growth's band shrinks
    about as 1 / the seconds it is read over, so those seconds grow by band / distance (a fifth more for
    its noise), after the added replica's own start (``up`` s after the step); twice them without a band
    (too few samples to have one) or a gap."""
    factor = 1.2 * band / distance if band is not None and distance > 0 else 2.0
    needed = max(window_s * factor, window_s + 3.0, 3.0)
    high = math.ceil(up + needed)
    return (f"rerun with a high phase of {high} s (scaling_phase_seconds[1] = {high}): about {needed:.0f} s "
            f"with the added replica serving, to read each growth over more seconds than this run's "
            f"{window_s:.0f}")


def _growth_said(one: float, auto: float, up: float, fit: tuple[float, float, int, float] | None,
                 in_flight: tuple[float | None, float | None], fixed_n: pd.DataFrame, queue: pd.DataFrame,
                 series: pd.DataFrame) -> str:
    seconds = f" ({fit[3]:.0f} s, {fit[2]} samples)" if fit else ""
    said = (f"from when the added replica served ({up:.1f} s after the step) to the high load's "
            f"end{seconds}, the backlog grew {one:+.1f}/s on one fixed replica and {auto:+.1f}/s autoscaled")
    start, end = in_flight
    if start is not None and end is not None:
        said += f" ({start:.0f} in flight when it started serving, {end:.0f} as the high load ended)"
    if auto >= 0 and not fixed_n.empty:
        share = answered_share(series, str(fixed_n.iloc[-1].get("label")))
        n = int(row(fixed_n, "replicas_max") or 2)
        if share is not None:
            said += (f"; it shrinks only where the replicas outpace the load: {n} fixed replicas answered "
                     f"{share[0]:.0f} of the {share[1]:.0f} requests/s offered")
    said += _text(row(queue, "p99_before_up_ms"), "; p99 during the scale-up {:.0f} ms")
    said += _text(row(queue, "p99_after_up_ms"), ", after it {:.0f} ms (p99 follows once the backlog has "
                  "drained)")
    return said + _text(row(queue, "timeouts") or None, "; {:.0f} requests timed out (they leave the backlog "
                        "unanswered)")


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
    backlog's last five samples' scatter about their trend); the N fixed replicas' figures and what the
    added replica cost while it started (``cost``) named beside them. Observed only where its added
    replica served during the high load: without one it ran as one fixed replica, and whatever it did was
    not autoscaling's."""
    up, high = row(auto, "scale_up_after_s"), row(auto, "high_seconds")
    served = up is not None and (high is None or up < high)
    when = ("; no added replica served after the step: it ran as one fixed replica" if up is None else
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
