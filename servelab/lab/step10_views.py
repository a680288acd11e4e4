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
    ended": whether the replicas kept up, the lesson's first precondition (``step10_needs.outran``)."""
    seconds = sum(x["interval_s"] for x in high)
    if not high or not seconds:
        return "no sample fell in the high load"
    answered = sum(x["ok"] for x in high) / seconds
    offered = sum(x["rate"] * x["interval_s"] for x in high) / seconds
    return (f"during the high load: {answered:.1f} answers/s of the {offered:.1f} requests/s offered "
            f"({answered / offered:.0%}); {high[-1]['in_flight']} in flight as it ended")


# one colour per run, the same in every panel and every figure of the notebook (by the run's kind)
RUN_COLOURS = (("fixed 1", "tab:blue"), ("fixed 2", "tab:orange"), ("(queue depth)", "tab:green"),
               ("(utilisation)", "tab:red"), ("fixed", "tab:purple"), ("autoscaled", "tab:olive"))


def run_colour(label: str, n: int = 0) -> str:
    """The colour of the run ``label`` in every timeline (``RUN_COLOURS``: by its kind; a stand-in's run
    shares its kind's colour, drawn dashed); the ``n``-th of matplotlib's cycle for any other."""
    name = label.removesuffix(" on the stand-in")
    exact = dict(RUN_COLOURS)
    if name in exact:
        return exact[name]
    return next((colour for words, colour in RUN_COLOURS if words in name), f"C{n % 10}")


def fig_timeline(series: pd.DataFrame, title: str = "step load", step_s: float = 0.0) -> Figure:
    """Replicas, requests in flight (in total, and per replica: the autoscaler's metric), p50/p99 and CPU on
    one time axis, in seconds from the step (``step_s`` into each run: the notebook's one time origin);
    scale events marked; one colour per run in every panel (``run_colour``). Drawn on its own canvas (no
    pyplot): a notebook shows it once, where ``as_image`` puts it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure(figsize=(8, 9.5))
    FigureCanvasAgg(fig)
    axes = fig.subplots(5, 1, sharex=True)
    for n, (name, run) in enumerate(series.groupby("run", sort=False)):
        t = num(run, "t") - step_s
        colour = run_colour(str(name), n)
        dash = "--" if str(name).endswith("on the stand-in") else "-"
        axes[0].step(t, num(run, "replicas"), dash, where="post", label=str(name), color=colour)
        if "starting" in run:
            axes[0].step(t, num(run, "replicas") + num(run, "starting").fillna(0), ":", where="post",
                         color=colour)
        axes[1].plot(t, num(run, "in_flight"), dash, color=colour)
        axes[2].plot(t, num(run, "ongoing_per_replica"), dash, color=colour)
        axes[3].plot(t, num(run, "p99_ms"), dash, color=colour)
        axes[3].plot(t, num(run, "p50_ms"), ":", color=colour)
        axes[4].plot(t, num(run, "cpu_util_pct"), dash, color=colour)
        if "gpu_util_pct" in run and run["gpu_util_pct"].notna().any():
            axes[4].plot(t, num(run, "gpu_util_pct"), "-.", color=colour)
        for e in scale_events([{str(k): v for k, v in r.items()} for r in run.to_dict("records")]):
            for ax in axes:
                ax.axvline(e["t"] - step_s, color=colour, linestyle="--", linewidth=0.6, alpha=0.6)
    # the CPU: the whole machine's, 100 % = all its cores (Serve's proxy and the load generator included)
    names = ("replicas", "in flight, total\n(requests)", "in flight per\nreplica (the\nautoscaler's metric)",
             "latency (ms):\np99 solid, p50 dotted", "machine CPU (%,\n100 = all cores;\nGPU dash-dot)")
    for ax, label in zip(axes, names, strict=True):
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    axes[3].set_yscale("log")
    axes[0].legend(fontsize=7, loc="upper right")
    axes[4].set_ylim(0, 105)  # percentages: 100 % = every core (or the GPU) busy
    since = "seconds from the step (the high load starts at 0)" if step_s else \
        "seconds since the load started"
    axes[-1].set_xlabel(since + "\n(thin dashed: a run's replica count changed; dotted: replicas including "
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
