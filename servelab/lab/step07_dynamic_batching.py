"""Notebook 07: one instance's capacity, constant vs Poisson arrivals, and dynamic batching across rates.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from servelab.lab.params import LabParams
from servelab.lab.triton_steps import Triton, measure_all
from servelab.report.effects import (
    Check,
    Need,
    Quantity,
    any_spread,
    check,
    computed_on,
    perf_rerun,
    row,
    settled_need,
    spread,
)
from servelab.report.figures import (
    Amount,
    Amounts,
    Section,
    as_image,
    fig_breakdown,
    figure,
    finish,
    plot_html,
    table_html,
)
from servelab.report.readings import first
from servelab.results.schema import QUEUE, TRITON_COLUMNS, RunData, batch_size_counts, num, step_rows

# what a verdict's "(spread …)" spans here (servelab.report.terms)
# the verdict the report's first screen gives as this step's one line (servelab.report.html.headline)
HEADLINE = "Poisson arrivals queue more"
SPREAD_OVER = ("perf_analyzer's last three windows of each level (the ones its stability check judges)")


def measure_capacity(triton: Triton, name: str, p: LabParams) -> float:
    """What one instance serves at most (inferences/s at ``capacity_concurrency``); rates derive from it."""
    rows = measure_all(triton, name, p, "capacity",
                        [{"concurrency": p.capacity_concurrency, "label": "capacity"}])
    capacity = float(rows["throughput"].iloc[0])
    if not capacity > 0:
        raise RuntimeError(f"measured capacity of {name} is {capacity}: cannot derive arrival rates")
    print(f"one instance of {name} serves at most ≈{capacity:.1f} inferences/s on this target")
    return Amount(capacity, "inferences/s")


def base_rate(capacity: float, p: LabParams) -> float:
    """The rate of the arrival-pattern runs: ``base_rate_fraction`` × capacity."""
    return round(p.base_rate_fraction * capacity, 1)


def arrival_patterns(triton: Triton, name: str, capacity: float, p: LabParams,
                     distributions: tuple[str, ...] = ("constant", "poisson")) -> pd.DataFrame:
    """``distributions`` of arrivals (constant, Poisson) at ``base_rate_fraction`` × capacity."""
    rate = base_rate(capacity, p)
    return measure_all(triton, name, p, "arrivals",
                        [{"rate": rate, "distribution": d, "label": f"{d} {rate:g}/s"}
                         for d in distributions])


def rates_for(capacity: float, p: LabParams) -> list[float]:
    """The Poisson rates of the batching runs: each ``rate_fractions`` × capacity (a cell shows them with
    their unit and where they come from)."""
    fractions = ", ".join(f"{f:g}" for f in p.rate_fractions)
    return Amounts([round(f * capacity, 1) for f in p.rate_fractions], "requests/s",
                   f"{fractions} × the capacity of {float(capacity):.1f} inferences/s")


def batching_runs(triton: Triton, name: str, capacity: float, p: LabParams, enabled: bool) -> pd.DataFrame:
    """Poisson arrivals at each rate with dynamic batching as it is configured now (``enabled`` says
    which, for the rows and the check that the live config agrees)."""
    from servelab.lab.triton_steps import live_config

    live = live_config(triton, name).HasField("dynamic_batching")
    if live != enabled:
        raise RuntimeError(f"dynamic batching is {'on' if live else 'off'} in {name}'s live config, "
                           f"but this cell measures it {'on' if enabled else 'off'}: run the cell that "
                           "changes it first")
    state = "on" if enabled else "off"
    return measure_all(triton, name, p, "dynamic_batching",
                       [{"rate": r, "distribution": "poisson", "label": f"batching {state} {r:g}/s"}
                        for r in rates_for(capacity, p)])


def executions_by_batch_size(before: dict[str, Any], after: dict[str, Any], timed: pd.DataFrame,
                             ) -> pd.DataFrame:
    """Executions per batch size between two ``stats_json`` reads, split into the timed windows (the
    measurement rows' ``batch_counts``, which the histogram and the report count) and the rest: the
    warm-up perf_analyzer runs before each level, which the server counts too. Prints both totals."""
    from servelab.lab.triton_stats import stats_change

    between = stats_change(before, after)
    total = {int(s): int(n) for s, n in zip(between["batch_size"], between["executions"], strict=True)}
    windows = batch_size_counts(timed)
    sizes = sorted(set(total) | set(windows))
    out = pd.DataFrame({"batch_size": sizes, "executions": [total.get(s, 0) for s in sizes],
                        "timed_windows": [windows.get(s, 0) for s in sizes]})
    out["warm_ups"] = out["executions"] - out["timed_windows"]
    several = out["batch_size"] > 1
    timed_n, warm_n = int(out["timed_windows"].sum()), int(out["warm_ups"].sum())
    print(f"of these, the timed windows (the rows' batch_counts, the histogram below): {timed_n} executions, "
          f"{int(out.loc[several, 'timed_windows'].sum())} with more than one request; perf_analyzer's "
          f"warm-ups: {warm_n}, {int(out.loc[several, 'warm_ups'].sum())} with more than one")
    return out


COUNTERS = ("nv_inference_count", "nv_inference_exec_count")  # inferences, executions (the metrics port's)


def metrics_counts(triton: Triton, name: str) -> dict[str, float]:
    """``name``'s inference and execution counters on the metrics port now, printed with where they count
    from: the server's start (a reload does not reset them), unlike the statistics (the model's load)."""
    from servelab.lab.monitoring import parse, scrape_once

    samples = parse(scrape_once(triton.metrics_url))
    counts = {c: sum(v for (metric, labels), v in samples.items()
                     if metric == c and ("model", name) in labels) for c in COUNTERS}
    print(f"$ curl -s {triton.metrics_url}  # {name}'s counters, since the server started: "
          + ", ".join(f"{c} {v:.0f}" for c, v in counts.items()))
    return counts


def counts_since(triton: Triton, name: str, before: dict[str, float]) -> None:
    """Print the two counts from one origin: the metrics port's counters now minus ``before`` (read with
    the statistics at the reload, ``metrics_counts``) against the statistics now, which count from that
    reload, in one line that says where each counter starts."""
    import contextlib
    import io

    from servelab.lab.triton_stats import stats_json

    with contextlib.redirect_stdout(io.StringIO()):  # its table was printed above: only the counts here
        stats = stats_json(triton, name)
    now = metrics_counts(triton, name)
    got = {"metrics_inferences": round(now[COUNTERS[0]] - before[COUNTERS[0]]),
           "metrics_executions": round(now[COUNTERS[1]] - before[COUNTERS[1]]),
           "stats_inferences": int(stats.get("inference_count", 0)),
           "stats_executions": int(stats.get("execution_count", 0))}
    same = (got["metrics_inferences"], got["metrics_executions"]) == (got["stats_inferences"],
                                                                      got["stats_executions"])
    print(f"since the reload that turned batching on: the metrics port counted {now[COUNTERS[0]]:.0f} − "
          f"{before[COUNTERS[0]]:.0f} = {got['metrics_inferences']} inferences in "
          f"{got['metrics_executions']} executions, the statistics {got['stats_inferences']} in "
          f"{got['stats_executions']}: "
          + ("the same count from the same origin. The metrics port's counters start with the server (their "
             f"{before[COUNTERS[0]]:.0f} before the reload are the runs before it, warm-ups included), the "
             "statistics with the model's last load" if same else
             "requests reached the server between the two reads (the metrics port counts from the server's "
             "start, the statistics from the model's last load)"))


def plot_rates(df: pd.DataFrame) -> Any:
    print(read_rates(df))
    return as_image(fig_rates(df))


def plot_batch_sizes(df: pd.DataFrame) -> Any:
    counts = batch_size_counts(df[df["dynamic_batching"] == True])  # noqa: E712
    print(read_batch_sizes(counts))
    return as_image(fig_batch_sizes(counts))


def fig_rates(df: pd.DataFrame) -> Figure:
    """p50 and p99 against the Poisson arrival rate, dynamic batching off vs on."""
    fig, ax = figure()
    for enabled, group in df.groupby("dynamic_batching", sort=True):
        group = group.sort_values("rate")
        name = "batching on" if bool(enabled) else "batching off"
        ax.plot(num(group, "rate"), num(group, "p50_ms"), "o-", label=f"{name} p50")
        ax.plot(num(group, "rate"), num(group, "p99_ms"), "s--", label=f"{name} p99")
    return finish(fig, ax, "Poisson arrival rate (requests/s)", "latency (ms)",
                  "dynamic batching across arrival rates")


def fig_batch_sizes(counts: dict[int, int], title: str = "") -> Figure:
    """Executions per batch size, as the server's statistics counted them."""
    fig, ax = figure(height=3.0)
    ax.bar([str(k) for k in counts], list(counts.values()), color="tab:purple")
    ax.set_xlabel("batch size of an execution")
    ax.set_ylabel("executions")
    ax.set_title(title or "batch sizes with dynamic batching on", fontsize=11)
    fig.tight_layout()
    return fig


def read_arrivals(df: pd.DataFrame) -> str:
    capacity = first(df, "throughput", step="capacity")
    constant = first(df, "p99_ms", step="arrivals", distribution="constant")
    poisson = first(df, "p99_ms", step="arrivals", distribution="poisson")
    rate = first(df, "rate", step="arrivals")
    if None in (capacity, constant, poisson, rate):
        return "no arrival-pattern measurements"
    return (f"one instance serves ≈{capacity:.1f}/s; at {rate:.1f}/s p99 is {constant:.0f} ms with evenly "
            f"spaced arrivals and {poisson:.0f} ms with Poisson arrivals")


def read_rates(df: pd.DataFrame) -> str:
    if df.empty:
        return "no measurements"
    top = num(df, "rate").max()
    on = first(df, "p99_ms", rate=top, dynamic_batching=True)
    off = first(df, "p99_ms", rate=top, dynamic_batching=False)
    if on is None or off is None:
        return f"highest rate {top:.0f}/s"
    return (f"at the highest rate ({top:.0f}/s) p99 is {off:.0f} ms with batching off "
            f"and {on:.0f} ms with it on")


def read_batch_sizes(counts: dict[int, int]) -> str:
    total = sum(counts.values())
    if not total:
        return "no executions counted"
    batched = sum(c for s, c in counts.items() if s > 1)
    mean = sum(s * c for s, c in counts.items()) / total
    return (f"{batched} of {total} executions carried more than one request (mean batch {mean:.1f} over "
            "these executions), although every client sent single images")


# ----------------------------------------------------------------------------- report and rules

def _batched_counts(triton: pd.DataFrame) -> dict[int, int]:
    dyn = step_rows(triton, "dynamic_batching")
    return batch_size_counts(dyn[dyn["dynamic_batching"] == True]) if not dyn.empty else {}  # noqa: E712


def sections(data: RunData) -> list[Section]:
    """Arrival patterns at one instance's capacity, latency across rates, the batch sizes formed."""
    out = []
    arrivals = step_rows(data.triton, "capacity", "arrivals")
    patterns = step_rows(data.triton, "arrivals")  # none when the notebook stopped after the capacity
    if not patterns.empty:
        out.append(Section("Capacity and arrival patterns (one instance)", [
            plot_html(fig_breakdown(patterns, "distribution", "constant vs Poisson arrivals"),
                      read_arrivals(arrivals)),
            table_html(arrivals, TRITON_COLUMNS)]))
    elif not arrivals.empty:
        out.append(Section("Capacity (one instance)", [table_html(arrivals, TRITON_COLUMNS)]))
    dyn = step_rows(data.triton, "dynamic_batching")
    if not dyn.empty:
        out.append(Section("Dynamic batching across arrival rates", [
            plot_html(fig_rates(dyn), read_rates(dyn)), table_html(dyn, TRITON_COLUMNS)]))
    counts = _batched_counts(data.triton)
    if counts:
        out.append(Section("Batch sizes the server formed (dynamic batching on)", [
            plot_html(fig_batch_sizes(counts), read_batch_sizes(counts))]))
    return out


def _batching_figures(rate: float | None, off: float, on: float) -> tuple[Quantity, ...]:
    """p99 without and with dynamic batching at ``rate``, and the change, as a verdict's figures."""
    return (Quantity(f"p99 at {rate:g} requests/s, off", off, "ms"), Quantity("on", on, "ms"),
            Quantity("change", 100 * (on - off) / off, "%"))


def rules(data: RunData) -> list[Check]:
    """Poisson arrivals queue more; batches form; at the lowest rate batching costs latency (on a CPU a
    batch of n costs about n images' compute, so a request in a batch waits for the others' compute,
    not for the 100 µs ``max_queue_delay``: the evidence splits p99's change into queue and compute); p99
    at the top rate no worse with batching (GPU). Each comparison needs its two levels settled and, where
    their windows were accepted at any spread (the quick preset's rate levels), a band narrower than the
    difference it judges: docs/decisions/2026-11-28-lessons-third-pass.md."""
    arrivals = step_rows(data.triton, "arrivals")
    counts = _batched_counts(data.triton)
    dyn = step_rows(data.triton, "dynamic_batching")
    low, top = row(dyn, "rate", "min"), row(dyn, "rate", "max")

    def p99(rate: float | None, on: bool) -> tuple[float | None, float | None, str | None]:
        if rate is None:
            return None, None, None
        return (row(dyn, "p99_ms", rate=rate, dynamic_batching=on),
                spread(dyn, "p99_ms", rate=rate, dynamic_batching=on),
                any_spread(dyn, "p99_ms", rate=rate, dynamic_batching=on))

    def parts(rate: float | None, on: bool) -> str:  # where a request's server time went at that rate
        if rate is None:
            return ""
        queue = row(dyn, QUEUE, rate=rate, dynamic_batching=on)
        compute = row(dyn, "compute_infer_ms", rate=rate, dynamic_batching=on)
        return "" if queue is None or compute is None else f" (queue {queue:.1f} + compute {compute:.1f} ms)"

    def settled(rate: float | None) -> tuple[Need, ...]:  # both sides of the comparison at this rate settled
        return (settled_need(dyn, {"rate": rate, "dynamic_batching": False},
                             {"rate": rate, "dynamic_batching": True}),) if rate is not None else ()

    (low_off, low_off_s, low_off_x), (low_on, low_on_s, low_on_x) = p99(low, False), p99(low, True)
    (top_off, top_off_s, top_off_x), (top_on, top_on_s, top_on_x) = p99(top, False), p99(top, True)
    sides = ({"distribution": "constant"}, {"distribution": "poisson"})

    def at(rate: float | None) -> tuple[dict[str, Any], dict[str, Any]]:
        return {"rate": rate, "dynamic_batching": False}, {"rate": rate, "dynamic_batching": True}

    return [
        check("Poisson arrivals queue more than evenly spaced ones at the same rate (p99)",
              (row(arrivals, "p99_ms", distribution="constant"),
               row(arrivals, "p99_ms", distribution="poisson")),
              lambda c, p: p > c, lambda c, p: f"constant {c:.1f} ms, Poisson {p:.1f} ms",
              noise=(spread(arrivals, "p99_ms", distribution="constant"),
                     spread(arrivals, "p99_ms", distribution="poisson")), unit="ms",
              needs=(settled_need(arrivals, *sides),), names=("p99 evenly spaced", "Poisson"),
              loose=any_spread(arrivals, "p99_ms", **sides[0]) or any_spread(arrivals, "p99_ms", **sides[1]),
              rerun=perf_rerun(arrivals, "p99_ms", *sides)),
        check("With dynamic batching on, some executions carry more than one request",
              (sum(c for s, c in counts.items() if s > 1) if counts else None,),
              lambda n: n > 0, lambda n: f"{n} batched executions",
              figures=lambda n: (Quantity("executions of more than one request", n, ""),)),
        check("At the lowest rate, dynamic batching costs latency: p99 with it ≥ p99 without",
              (low_off, low_on), lambda off, on: on >= off,
              lambda off, on: f"at {low:g}/s: off {off:.1f} ms{parts(low, False)}, on {on:.1f} ms"
                              f"{parts(low, True)} ({(on - off) / off:+.0%})",
              noise=(low_off_s, low_on_s), unit="ms", needs=settled(low), loose=low_off_x or low_on_x,
              figures=lambda off, on: _batching_figures(low, off, on),
              rerun=perf_rerun(dyn, "p99_ms", *at(low))),
        check("At the highest rate, p99 with dynamic batching ≤ p99 without",
              (top_off, top_on), lambda off, on: on <= off,
              lambda off, on: f"at {top:g}/s: off {off:.1f} ms{parts(top, False)}, on {on:.1f} ms"
                              f"{parts(top, True)} ({(on - off) / off:+.0%}){computed_on(dyn)}",
              gpu_only=True, noise=(top_off_s, top_on_s), unit="ms", needs=settled(top),
              loose=top_off_x or top_on_x,
              figures=lambda off, on: _batching_figures(top, off, on),
              rerun=perf_rerun(dyn, "p99_ms", *at(top))),
    ]
