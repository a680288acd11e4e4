"""Notebook 10's autoscaling preconditions, read from a run's step loads: the high load outran one replica
(``outran``), a second replica serves more on this machine at all (``helps``), and what the added replica
cost while it started (``start_cost``). ``step10_report``'s rules state them with their effects.
Why: docs/decisions/2026-12-01-verdicts-at-a-glance.md.
"""

from __future__ import annotations

import pandas as pd

from servelab.report.effects import Need, noise_band, row
from servelab.results.schema import num

OUTRAN = 0.9  # the high load outran a replica that answered fewer than this share of what was offered


def high_phase(series: pd.DataFrame, label: str) -> pd.DataFrame:
    """The samples (``scaling_series`` rows) of the run ``label`` during its high phase (phase 1)."""
    if series.empty or "run" not in series:
        return series.iloc[0:0]
    return series[(series["run"] == label) & (num(series, "phase") == 1)]


def answered_share(series: pd.DataFrame, label: str,
                   until_s: float | None = None) -> tuple[float, float] | None:
    """(answers per second, requests per second offered) during the high phase of the run ``label``
    (``scaling_series`` rows), up to ``until_s`` seconds into the load when given; None without samples."""
    rows = high_phase(series, label)
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
    five samples' scatter about their trend). Not known before both fixed runs exist; where N did no
    better, no autoscaled run can do better either, and the machine truly cannot show the effect."""
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
