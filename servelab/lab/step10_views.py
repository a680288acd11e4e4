"""Notebook 10's time series as figures and one-line readings, all from one time origin (the step):
``step10_scaling_out`` measures and records the runs; ``step10_report`` checks their rules."""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from servelab.report.figures import as_image
from servelab.results.schema import num
from servelab.scaling.load import LoadRun, scale_events


def high_load_said(series: list[dict[str, Any]], high: list[dict[str, Any]]) -> str:
    """"during the high load: 33.1 answers/s of the 67.2 requests/s offered (49 %); 408 in flight as it
    ended": whether the replicas kept up, the lesson's first precondition (``step10_report.outran``)."""
    seconds = sum(x["interval_s"] for x in high)
    if not high or not seconds:
        return "no sample fell in the high load"
    answered = sum(x["ok"] for x in high) / seconds
    offered = sum(x["rate"] * x["interval_s"] for x in high) / seconds
    return (f"during the high load: {answered:.1f} answers/s of the {offered:.1f} requests/s offered "
            f"({answered / offered:.0%}); {high[-1]['in_flight']} in flight as it ended")


def fig_timeline(series: pd.DataFrame, title: str = "step load", step_s: float = 0.0) -> Figure:
    """Replicas, ongoing requests per replica, p50/p99 and CPU on one time axis, in seconds from the step
    (``step_s`` into each run: the notebook's one time origin); scale events marked. Drawn on its own
    canvas (no pyplot): a notebook shows it once, where ``as_image`` puts it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure(figsize=(8, 8))
    FigureCanvasAgg(fig)
    axes = fig.subplots(4, 1, sharex=True)
    for name, run in series.groupby("run", sort=False):
        t = num(run, "t") - step_s
        line = axes[0].step(t, num(run, "replicas"), where="post", label=str(name))[0]
        if "starting" in run:
            axes[0].step(t, num(run, "replicas") + num(run, "starting").fillna(0), ":", where="post",
                         color=line.get_color())
        axes[1].plot(t, num(run, "ongoing_per_replica"), label=str(name))
        axes[2].plot(t, num(run, "p99_ms"), label=f"{name} p99")
        axes[2].plot(t, num(run, "p50_ms"), ":", label=f"{name} p50")
        axes[3].plot(t, num(run, "cpu_util_pct"), label=f"{name} CPU")
        if "gpu_util_pct" in run and run["gpu_util_pct"].notna().any():
            axes[3].plot(t, num(run, "gpu_util_pct"), "--", label=f"{name} GPU")
        for e in scale_events([{str(k): v for k, v in r.items()} for r in run.to_dict("records")]):
            for ax in axes:
                ax.axvline(e["t"] - step_s, color="grey", linestyle="--", linewidth=0.8)
    # the CPU: the whole machine's, 100 % = all its cores (Serve's proxy and the load generator included)
    names = ("replicas", "ongoing / replica", "latency (ms)", "machine CPU, GPU (%,\n100 = all cores)")
    for ax, label in zip(axes, names, strict=True):
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[2].set_yscale("log")
    axes[0].legend(fontsize=7, loc="upper right")
    axes[2].legend(fontsize=6, loc="upper left", ncol=2)
    axes[3].set_ylim(0, 105)  # percentages: 100 % = every core (or the GPU) busy
    axes[-1].set_xlabel(("seconds from the step (the high load starts at 0)" if step_s else "seconds since "
                         "the load started") + "\n(dashed: replica count changed; dotted: replicas including "
                                               "those starting)")
    axes[0].set_title(title, fontsize=11)
    fig.tight_layout()
    return fig


def plot_timeline(*runs: LoadRun, title: str = "step load") -> Any:
    """The runs' time series on one axis from the step (the runs share one schedule), each described."""
    series = pd.DataFrame([row for run in runs for row in run.series])
    step_s = runs[0].step_s if runs else 0.0
    for run in runs:
        print(describe_replicas(run.label, run.series, step_s))
    return as_image(fig_timeline(series, title, step_s), f"scaling {title}")


def when(t: float, step_s: float = 0.0) -> str:
    """A moment of a run as the notebook says it: "8.5 s after the step" (or before it), from the one
    time origin every verdict and plot uses; "at 8.5 s" for a run without a step (``step_s`` 0)."""
    if not step_s:
        return f"at {t:.1f} s"
    since = t - step_s
    return f"{abs(since):.1f} s {'after' if since >= 0 else 'before'} the step"


def describe_replicas(label: str, series: list[dict[str, Any]], step_s: float = 0.0) -> str:
    """One line on what the replicas of a run did: when the serving count changed, and a replica that
    started but never served (the dotted line of the plot), so the line agrees with the plot; times from
    the step (``step_s`` into the run), as the verdicts give them."""
    events = ", ".join(f"{when(e['t'], step_s)} ({e['from']}→{e['to']})" for e in scale_events(series))
    serving = f"serving replicas changed {events}" if events else \
        f"{series[0]['replicas'] if series else '?'} replica(s) serving throughout"
    started = next((x["t"] for x in series if x.get("starting")), None)
    grew = [e for e in scale_events(series) if e["to"] > e["from"]]
    if started is not None and not any(e["t"] >= started for e in grew):
        serving += f"; a replica starting {when(started, step_s)} never served before the run ended"
    return f"{label}: {serving}"
