"""Notebook 07: one instance's capacity, constant vs Poisson arrivals, and dynamic batching across rates.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from servelab.lab.params import LabParams
from servelab.lab.triton_steps import Triton, measure_all
from servelab.report.effects import Check, check, computed_on, row, spread, unusable
from servelab.report.figures import Section, as_image, fig_breakdown, figure, finish, plot_html, table_html
from servelab.report.readings import first
from servelab.results.schema import QUEUE, TRITON_COLUMNS, RunData, batch_size_counts, num, step_rows

# what a verdict's "(spread …)" spans here (servelab.report.terms)
SPREAD_OVER = ("perf_analyzer's last three windows of each level (the ones its stability check judges)")


def measure_capacity(triton: Triton, name: str, p: LabParams) -> float:
    """What one instance serves at most (inferences/s at ``capacity_concurrency``); rates derive from it."""
    rows = measure_all(triton, name, p, "capacity",
                        [{"concurrency": p.capacity_concurrency, "label": "capacity"}])
    capacity = float(rows["throughput"].iloc[0])
    if not capacity > 0:
        raise RuntimeError(f"measured capacity of {name} is {capacity}: cannot derive arrival rates")
    print(f"one instance of {name} serves at most ≈{capacity:.1f} inferences/s on this target")
    return capacity


def arrival_patterns(triton: Triton, name: str, capacity: float, p: LabParams) -> pd.DataFrame:
    """Constant vs Poisson arrivals at ``base_rate_fraction`` × capacity."""
    rate = round(p.base_rate_fraction * capacity, 1)
    return measure_all(triton, name, p, "arrivals",
                        [{"rate": rate, "distribution": d, "label": f"{d} {rate:g}/s"}
                         for d in ("constant", "poisson")])


def rates_for(capacity: float, p: LabParams) -> list[float]:
    """The Poisson rates of the batching runs: each ``rate_fractions`` × capacity."""
    return [round(f * capacity, 1) for f in p.rate_fractions]


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


def rules(data: RunData) -> list[Check]:
    """Poisson arrivals queue more; batches form; at the lowest rate batching costs latency (on a CPU a
    batch of n costs about n images' compute, so a request in a batch waits for the others' compute,
    not for the 100 µs ``max_queue_delay``: the evidence splits p99's change into queue and compute); p99
    at the top rate no worse with batching (GPU)."""
    arrivals = step_rows(data.triton, "arrivals")
    counts = _batched_counts(data.triton)
    dyn = step_rows(data.triton, "dynamic_batching")
    low, top = row(dyn, "rate", "min"), row(dyn, "rate", "max")

    def p99(rate: float | None, on: bool) -> tuple[float | None, float | None, str | None]:
        if rate is None:
            return None, None, None
        return (row(dyn, "p99_ms", rate=rate, dynamic_batching=on),
                spread(dyn, "p99_ms", rate=rate, dynamic_batching=on),
                unusable(dyn, rate=rate, dynamic_batching=on))

    def parts(rate: float | None, on: bool) -> str:  # where a request's server time went at that rate
        if rate is None:
            return ""
        queue = row(dyn, QUEUE, rate=rate, dynamic_batching=on)
        compute = row(dyn, "compute_infer_ms", rate=rate, dynamic_batching=on)
        return "" if queue is None or compute is None else f" (queue {queue:.1f} + compute {compute:.1f} ms)"

    (low_off, low_off_s, low_off_x), (low_on, low_on_s, low_on_x) = p99(low, False), p99(low, True)
    (top_off, top_off_s, top_off_x), (top_on, top_on_s, top_on_x) = p99(top, False), p99(top, True)
    return [
        check("Poisson arrivals queue more than evenly spaced ones at the same rate (p99)",
              (row(arrivals, "p99_ms", distribution="constant"),
               row(arrivals, "p99_ms", distribution="poisson")),
              lambda c, p: p > c, lambda c, p: f"constant {c:.1f} ms, Poisson {p:.1f} ms",
              noise=(spread(arrivals, "p99_ms", distribution="constant"),
                     spread(arrivals, "p99_ms", distribution="poisson")), unit="ms",
              blocked=unusable(arrivals, distribution="constant")
              or unusable(arrivals, distribution="poisson")),
        check("With dynamic batching on, some executions carry more than one request",
              (sum(c for s, c in counts.items() if s > 1) if counts else None,),
              lambda n: n > 0, lambda n: f"{n} batched executions"),
        check("At the lowest rate, dynamic batching costs latency: p99 with it ≥ p99 without",
              (low_off, low_on), lambda off, on: on >= off,
              lambda off, on: f"at {low:g}/s: off {off:.1f} ms{parts(low, False)}, on {on:.1f} ms"
                              f"{parts(low, True)} ({(on - off) / off:+.0%})",
              noise=(low_off_s, low_on_s), unit="ms", blocked=low_off_x or low_on_x),
        check("At the highest rate, p99 with dynamic batching ≤ p99 without",
              (top_off, top_on), lambda off, on: on <= off,
              lambda off, on: f"at {top:g}/s: off {off:.1f} ms{parts(top, False)}, on {on:.1f} ms"
                              f"{parts(top, True)}{computed_on(dyn)}",
              gpu_only=True, noise=(top_off_s, top_on_s), unit="ms", blocked=top_off_x or top_on_x),
    ]
