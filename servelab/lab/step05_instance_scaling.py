"""Notebook 05: more model instances (over two GPUs on the node; over the cores on a CPU), and threads.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from servelab.core.cpu import cpu_cores
from servelab.lab.common import show_columns
from servelab.lab.params import LabParams
from servelab.lab.triton_steps import Triton, measure, set_instances
from servelab.lab.triton_views import server_view
from servelab.report.effects import Check, check, row, spread
from servelab.report.figures import (
    Section,
    as_image,
    fig_scaling,
    plot_html,
    read_scaling,
    table_html,
)
from servelab.results.schema import TRITON_COLUMNS, RunData, num, step_rows
from servelab.targets.base import Stack


def instance_plan(stack: Stack, p: LabParams) -> pd.DataFrame:
    """The instance steps: 1 on GPU 0 → 2+2 → 4+4 on two GPUs; on CPU 1 → cores → 2 × cores."""
    if p.instance_counts:
        counts = list(p.instance_counts)
    elif stack.has_gpu:
        counts = [1, 2, 4]
    else:
        cores = cpu_cores()
        counts = sorted({1, cores, 2 * cores})
    rows = []
    for i, count in enumerate(counts):
        gpus = ([0] if i == 0 else [0, 1]) if stack.has_gpu else []
        total = count * max(1, len(gpus))
        where = f"{'+'.join([str(count)] * len(gpus))} on GPUs {gpus}" if gpus else f"{count} on the CPU"
        rows.append({"count": count, "gpus": gpus, "instances": total, "label": where})
    return pd.DataFrame(rows)


def instance_step(triton: Triton, name: str, plan: pd.DataFrame, index: int, p: LabParams) -> pd.DataFrame:
    """Step ``index`` of the plan, one change: the instance_group diff, the reload (timed), the server's
    view (its stub processes, or ``nvidia-smi``), then a measurement at ``scaling_concurrency``."""
    if index >= len(plan):
        print(f"the plan has {len(plan)} step(s): nothing to do for step {index + 1}")
        return pd.DataFrame()
    step = plan.iloc[index]
    print(f"step {index + 1} of {len(plan)}: {step['label']}")
    set_instances(triton, name, int(step["count"]), list(step["gpus"]))
    server_view(triton, name)
    rows = measure(triton, name, p, "instance_scaling", str(step["label"]),
                   concurrency=p.scaling_concurrency)
    return show_columns(rows, TRITON_COLUMNS)


def two_instances(triton: Triton, name: str, count: int = 2) -> None:
    """``count`` instances (on GPU 0 on a GPU host), threads split: where the threads lesson starts."""
    set_instances(triton, name, count, [0] if triton.stack.has_gpu else (), threads="auto")
    server_view(triton, name)


def threads_step(triton: Triton, name: str, p: LabParams, threads: str, count: int = 2) -> pd.DataFrame:
    """``count`` instances with ``threads`` "default" (the framework's: every core each) or "split"
    (the cores shared out, ``CPU_THREADS=auto``): the config diff, reload, the stubs' thread counts,
    measurement."""
    setting = {"default": "default", "split": "auto"}[threads]
    set_instances(triton, name, count, [0] if triton.stack.has_gpu else (), threads=setting)
    server_view(triton, name)
    rows = measure(triton, name, p, "threads_lesson", f"{count} instances, {threads} threads",
                   concurrency=p.scaling_concurrency, extra={"thread_setting": threads})
    return show_columns(rows, TRITON_COLUMNS)


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
    one thread per instance beats the framework's default threads."""
    scaling = step_rows(data.triton, "instance_scaling")
    checks: list[Check] = []
    if not scaling.empty:
        tput = num(scaling, "throughput").reset_index(drop=True)
        noise = num(scaling, "throughput_spread").reset_index(drop=True)
        first_count, best = float(tput.iloc[0]), float(tput.max())
        checks.append(check(
            "More instances raise throughput at concurrency 8 (best vs one instance)", (first_count, best),
            lambda a, b: b > 1.1 * a, lambda a, b: f"{a:.1f} → best {b:.1f} inferences/s", gpu_only=True,
            noise=(noise.iloc[0], noise.iloc[int(tput.to_numpy().argmax())])))
        if len(tput) >= 3:
            checks.append(check(
                "The largest instance count is no better than the middle one (4+4 vs 2+2)",
                (float(tput.iloc[-2]), float(tput.iloc[-1])), lambda mid, top: top <= 1.05 * mid,
                lambda mid, top: f"{mid:.1f} vs {top:.1f} inferences/s",
                noise=(noise.iloc[-2], noise.iloc[-1])))
    else:
        checks.append(Check("More instances raise throughput at concurrency 8", "not measured",
                            "this run has no numbers for it", True))
    threads = step_rows(data.triton, "threads_lesson")
    checks.append(check(
        "Several instances: one thread each beats the framework's default threads",
        (row(threads, "throughput", thread_setting="default"),
         row(threads, "throughput", thread_setting="split")),
        lambda d, s: s > d, lambda d, s: f"default threads {d:.1f}/s, split {s:.1f}/s",
        noise=(spread(threads, "throughput", thread_setting="default"),
               spread(threads, "throughput", thread_setting="split"))))
    return checks
