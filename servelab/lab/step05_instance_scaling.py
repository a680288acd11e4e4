"""Notebook 05: more model instances (over two GPUs on the node; over the cores on a CPU), and threads.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from servelab.core.cpu import cpu_cores
from servelab.lab.params import LabParams
from servelab.lab.tables import show_columns
from servelab.lab.triton_steps import Triton, live_config, measure, set_instances
from servelab.lab.triton_views import live_instances, server_view
from servelab.report.effects import (
    Check,
    Need,
    any_spread,
    check,
    chosen,
    perf_rerun,
    row,
    settled_need,
    spread,
    unusable,
    usable,
)
from servelab.report.figures import Section, as_image, fig_scaling, plot_html, table_html
from servelab.report.readings import read_scaling, shared_level
from servelab.results.schema import TRITON_COLUMNS, RunData, num, relative_spread, step_rows
from servelab.targets.base import Stack

SETTLED = "the steps it compares settled, each after its warm-up"
# what a verdict's "(spread …)" spans here (servelab.report.terms)
# the verdict the report's first screen gives as this step's one line (servelab.report.html.headline)
HEADLINE = "one thread each beats"
SPREAD_OVER = ("perf_analyzer's last three windows of each level, and for the configuration measured twice "
               "(two instances, split threads) the two readings")


def instance_plan(stack: Stack, p: LabParams) -> pd.DataFrame:
    """The instance steps the notebook's cells apply, one row each, fitted to the stack's GPUs
    (``servelab.triton.gpu_plans.instance_steps``): the node's 1 on GPU 0 → 2 on each of GPUs 0 and 1
    → 4 on each; one GPU: 1 → 2 → 4 on GPU 0; on a CPU 1 → the cores → twice the cores (at least 2
    and 4). ``count`` is per listed GPU, as in config.pbtxt's instance_group."""
    from servelab.triton.gpu_plans import describe, instance_steps

    if p.instance_counts:
        counts = list(p.instance_counts)
    elif stack.has_gpu:
        counts = [1, 2, 4]
    else:
        cores = max(2, cpu_cores())
        counts = [1, cores, 2 * cores]
    rows = []
    for count, gpus in instance_steps(stack.gpu_count, counts):
        rows.append({"count": count, "kind": "KIND_GPU" if gpus else "KIND_CPU", "gpus": list(gpus),
                     "instances": count * max(1, len(gpus)), "label": describe(count, gpus)})
    return pd.DataFrame(rows)


def measure_instances(triton: Triton, name: str, p: LabParams) -> pd.DataFrame:
    """The server's view of the instances now live (their stub processes, or ``nvidia-smi``), then one
    measurement at ``scaling_concurrency``, labelled with the live instance_group."""
    server_view(triton, name)
    rows = measure(triton, name, p, "instance_scaling", live_instances(triton, name),
                   concurrency=p.scaling_concurrency)
    return show_columns(rows, TRITON_COLUMNS)


def further_steps(triton: Triton, name: str, plan: pd.DataFrame, p: LabParams, first: int = 3,
                  ) -> list[pd.DataFrame]:
    """The plan's rows from ``first`` on (a longer ``instance_counts``), each applied and measured as the
    notebook's two cells per step do."""
    out = []
    for _, step in plan.iloc[first:].iterrows():
        set_instances(triton, name, count=int(step["count"]), kind=str(step["kind"]), gpus=list(step["gpus"]))
        out.append(measure_instances(triton, name, p))
    return out


def measure_threads(triton: Triton, name: str, p: LabParams) -> pd.DataFrame:
    """The threads lesson's measurement with the live CPU_THREADS: "default" (the framework's: every core
    each) or "split" (``auto``: the cores shared out); the server's view of the stubs' threads first.
    Both settings settle as the preset's rate levels do (``rate_stability_pct``: quick takes any spread
    between the windows, and the verdict weighs it as noise): oversubscribed cores swing the default
    setting's windows too far for the concurrency levels' band, and an unsettled level is never counted."""
    from servelab.lab.params import SPECS

    setting = live_config(triton, name).parameters["CPU_THREADS"].string_value
    threads = {"default": "default", "auto": "split"}.get(setting, f"{setting} each")
    server_view(triton, name)
    band = getattr(SPECS["rate_stability_pct"], p.preset)
    rows = measure(triton, name, p, "threads_lesson", f"{live_instances(triton, name)}, {threads} threads",
                   concurrency=p.scaling_concurrency, extra={"thread_setting": threads},
                   stability_pct=max(p.stability_pct, band))
    return show_columns(rows, TRITON_COLUMNS)


def cpu_reading(r: pd.Series) -> str:
    """One measurement's CPU as 05's model answer says it: the machine's busy share, and the server's own
    processes' where this notebook sees them (not in another container: docker)."""
    server = pd.to_numeric(pd.Series([r.get("server_cpu_pct")]), errors="coerce").iloc[0]
    return f"CPU {r['cpu_util_pct']:.0f} % busy" + ("" if pd.isna(server) else f" (server {server:.0f} %)")


def plot_scaling(df: pd.DataFrame, title: str = "") -> Any:
    print(read_scaling(df))
    return as_image(fig_scaling(df, title))


# ----------------------------------------------------------------------------- report and rules

def sections(data: RunData) -> list[Section]:
    """Throughput and latency per instance configuration, then the threads lesson."""
    out = []
    for step, title, plot_title in (
            ("instance_scaling", "Instance scaling (Python backend)", "instance scaling, Python backend"),
            ("threads_lesson", "Threads per instance", "two instances: default threads vs split")):
        rows = step_rows(data.triton, step)
        if not rows.empty:
            out.append(Section(title, [plot_html(fig_scaling(rows, plot_title), read_scaling(rows)),
                                       table_html(rows, TRITON_COLUMNS)]))
    return out


def rules(data: RunData) -> list[Check]:
    """More instances raise throughput (a GPU effect); the largest count no better than the middle one;
    one thread per instance beats the framework's default threads. Each needs the steps it compares
    settled (a level that never settled, or ran without its warm-up, is shown but never counted); the
    threads lesson, whose windows the quick preset accepts at any spread, a band narrower than its
    difference. Its split row repeats a configuration of the instance steps: the two readings' gap is
    noise too."""
    scaling = step_rows(data.triton, "instance_scaling").reset_index(drop=True)
    counted = set(usable(scaling).index)  # a level measured without its warm-up is shown, never counted
    tput, noise = num(scaling, "throughput"), num(scaling, "throughput_spread")

    def level(i: int) -> tuple[float | None, float | None]:
        if i not in counted or pd.isna(tput.get(i)):
            return None, None
        return float(tput[i]), (None if pd.isna(noise[i]) else float(noise[i]))

    def why(*indices: int) -> str | None:  # the first of these levels a rule may not read, and why
        return next((unusable(scaling.iloc[[i]]) for i in indices if 0 <= i < len(scaling)
                     and unusable(scaling.iloc[[i]])), None)

    def settled(*indices: int) -> tuple[Need, ...]:  # the precondition: the steps compared settled
        if not all(0 <= i < len(scaling) for i in indices):
            return (Need(SETTLED),)
        reason = why(*indices)
        return (Need(SETTLED, False, reason) if reason else Need(SETTLED, True),)

    steps = len(scaling)
    load = shared_level(scaling)  # the load every step had
    counts = f" ({_count(scaling, -1)} vs {_count(scaling, -2)} instances)" if steps >= 3 else ""
    first = level(0)
    best = max((level(i) for i in range(1, steps)), key=lambda v: v[0] or -1.0, default=(None, None))
    middle, top = (level(steps - 2), level(steps - 1)) if steps >= 3 else ((None, None), (None, None))

    def side(i: int) -> dict[str, Any]:  # the row of step i, as perf_rerun finds it
        ok = 0 <= i < steps and "label" in scaling
        return {"label": scaling.iloc[i]["label"] if ok else None}

    checks = [
        check(f"More instances raise throughput{' at ' + load if load else ''} (best vs one instance)",
              (first[0], best[0]),
              lambda a, b: b > 1.1 * a, lambda a, b: f"{a:.1f} → best {b:.1f} inferences/s", gpu_only=True,
              noise=(first[1], best[1]), unit="inferences/s", needs=settled(0),
              names=("one instance", "the best"), rerun=perf_rerun(scaling, "throughput", side(0))),
        check(f"The largest instance count is no better than the middle one{counts}", (middle[0], top[0]),
              lambda mid, hi: hi <= 1.05 * mid,
              lambda mid, hi: f"middle {mid:.1f}, largest {hi:.1f} inferences/s",
              noise=(middle[1], top[1]), unit="inferences/s", needs=settled(steps - 2, steps - 1),
              names=(f"{_count(scaling, -2)} instances" if steps >= 3 else "middle",
                     f"{_count(scaling, -1)} instances" if steps >= 3 else "largest"),
              rerun=perf_rerun(scaling, "throughput", side(steps - 2), side(steps - 1))),
    ]
    threads = step_rows(data.triton, "threads_lesson")
    default = row(threads, "throughput", thread_setting="default")
    split = row(threads, "throughput", thread_setting="split")
    again = _repeat(scaling, chosen(threads, "throughput", thread_setting="split"))
    split_noise = spread(threads, "throughput", thread_setting="split")
    if again is not None and split is not None:  # the same configuration measured twice: its repeat noise
        split_noise = max(split_noise or 0.0, relative_spread([split, again]) or 0.0)
    sides = ({"thread_setting": "default"}, {"thread_setting": "split"})
    checks.append(check(
        "Several instances: one thread each beats the framework's default threads", (default, split),
        lambda d, s: s > d, lambda d, s: f"default threads {d:.1f}/s, split {s:.1f}/s" + (
            "" if again is None else f" (the same configuration read {again:.1f}/s in the instance step: "
                                     f"repeats {relative_spread([s, again]) or 0:.0%} apart)"),
        noise=(spread(threads, "throughput", thread_setting="default"), split_noise), unit="inferences/s",
        needs=(settled_need(threads, *sides),), names=("default threads", "one thread each"),
        loose=any_spread(threads, "throughput", **sides[0]) or any_spread(threads, "throughput", **sides[1]),
        rerun=perf_rerun(threads, "throughput", *sides)))
    return checks


def _count(scaling: pd.DataFrame, i: int) -> str:
    """The instance count of step ``i`` as its label says it: "4" ("4 instances on the CPU"), "2 + 2"
    ("2 + 2 instances on GPUs 0 and 1"); the ``instances`` column's where the label does not say."""
    label = str(scaling.iloc[i].get("label") or "")  # i < 0 counts from the last step
    return label.split(" instance")[0] if " instance" in label else str(scaling.iloc[i].get("instances"))


def _repeat(scaling: pd.DataFrame, split: pd.Series | None) -> float | None:
    """The instance step's throughput for the configuration the threads lesson's ``split`` row measured
    again (same instances, same threads per instance), or None."""
    if split is None or scaling.empty or not {"instances", "threads"} <= set(scaling) \
            or not {"instances", "threads"} <= set(split.index):
        return None
    same = usable(scaling)
    same = same[(same["instances"] == split["instances"]) & (num(same, "threads") == float(split["threads"]))]
    return row(same, "throughput")
