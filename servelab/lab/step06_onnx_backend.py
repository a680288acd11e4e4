"""Notebook 06: the ONNX Runtime backend against the Python backend, then two instances of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from servelab.lab.params import LabParams
from servelab.lab.tables import concat
from servelab.lab.triton_steps import Triton, measure_all, not_loaded
from servelab.lab.triton_views import live_instances
from servelab.report.effects import Check, check, computed_on, device_gap, perf_rerun, row, spread, unusable
from servelab.report.figures import Section, as_image, fig_breakdown, figure, plot_html, table_html
from servelab.report.readings import read_breakdown, read_pairs
from servelab.results.schema import TRITON_COLUMNS, RunData, num, step_rows
from servelab.targets.base import Stack

# what a verdict's "(spread …)" spans here (servelab.report.terms)
# the verdict the report's first screen gives as this step's one line (servelab.report.html.headline)
HEADLINE = "inference time is lower"
SPREAD_OVER = ("perf_analyzer's last three windows of each level (the ones its stability check judges)")


def sweep_live(triton: Triton, name: str, p: LabParams, step: str, levels: Sequence[int]) -> pd.DataFrame:
    """A concurrency sweep of the instances now live, each row labelled with them ("2 instances on the
    CPU, c=8"); nothing measured, and one line saying why, when the model is not loaded."""
    if not_loaded(triton, name):
        return measure_all(triton, name, p, step, [])
    where = live_instances(triton, name)
    runs = [{"concurrency": c, "label": f"{where}, c={c}"} for c in levels]
    return measure_all(triton, name, p, step, runs)


def scaled_step(stack: Stack, p: LabParams) -> dict[str, Any]:
    """The scaled step's ``instance_group`` for this stack's GPUs (``set_instances``' keywords): the
    node's ``count: 2, gpus: [0, 1]``; one GPU: 2 on GPU 0; a CPU: ``onnx_instances`` instances
    (``servelab.triton.gpu_plans.onnx_step``)."""
    from servelab.triton.gpu_plans import onnx_step

    count, gpus = onnx_step(stack.gpu_count, p.onnx_instances)
    return {"count": count, "kind": "KIND_GPU" if gpus else "KIND_CPU", "gpus": list(gpus)}


def plot_backends(python_rows: pd.DataFrame, onnx_rows: pd.DataFrame) -> Any:
    """The two backends compared at each concurrency both measured (one line per level), and the plot."""
    both = concat(python_rows, onnx_rows)
    print(read_pairs(both, "model"))
    return as_image(fig_backends(both))


def fig_backends(df: pd.DataFrame) -> Figure:
    """Python vs ONNX backend: compute time and throughput at each concurrency."""
    fig, (left, right) = figure(cols=2)
    for model, group in df.groupby("model", sort=True):
        group = group.sort_values("concurrency")
        left.plot(num(group, "concurrency"), num(group, "compute_infer_ms"), "o-", label=str(model))
        right.plot(num(group, "concurrency"), num(group, "throughput"), "o-", label=str(model))
    levels = sorted(set(num(df, "concurrency").dropna()))
    for ax in (left, right):
        ax.set_xticks(levels, [f"{c:g}" for c in levels])
    left.set_xlabel("concurrency")
    left.set_ylabel("compute infer (ms)")
    right.set_xlabel("concurrency")
    right.set_ylabel("inferences/s")
    left.legend(fontsize=7)
    fig.suptitle("Python backend vs ONNX backend (one instance)", fontsize=11)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- report and rules

def sections(data: RunData) -> list[Section]:
    """Python vs ONNX backend at each concurrency, then one vs two ONNX instances."""
    out = []
    both = step_rows(data.triton, "python_vs_onnx", "onnx_backend")
    if not both.empty:
        out.append(Section("Python backend vs ONNX backend", [
            plot_html(fig_backends(both), read_pairs(both, "model")), table_html(both, TRITON_COLUMNS)]))
    scaled = step_rows(data.triton, "onnx_backend", "onnx_scaling")
    if not scaled.empty:
        out.append(Section("ONNX backend: 1 vs 2 instances", [
            plot_html(fig_breakdown(scaled, "concurrency", "ONNX backend: 1 vs 2 instances"),
                      read_breakdown(scaled)), table_html(scaled, TRITON_COLUMNS)]))
    return out


def rules(data: RunData) -> list[Check]:
    """The ONNX backend infers faster than the Python one; two instances serve more (a GPU effect)."""
    both = step_rows(data.triton, "python_vs_onnx", "onnx_backend")
    levels = sorted(set(num(both, "concurrency").dropna())) if not both.empty else []
    under_load = next((c for c in levels if c > 1), levels[0] if levels else None)  # 8 with the defaults
    onnx1, onnx2 = step_rows(data.triton, "onnx_backend"), step_rows(data.triton, "onnx_scaling")
    c_top = row(onnx2, "concurrency", "max")
    return [
        check("The ONNX backend's inference time is lower than the Python backend's at the same concurrency",
              (row(both, "compute_infer_ms", model="food_classifier", concurrency=under_load),
               row(both, "compute_infer_ms", model="food_classifier_onnx", concurrency=under_load)),
              lambda py, ox: ox < py,
              lambda py, ox: f"at concurrency {under_load:g}: compute infer Python {py:.1f} ms, "
                             f"ONNX {ox:.1f} ms",
              noise=(spread(both, "compute_infer_ms", model="food_classifier", concurrency=under_load),
                     spread(both, "compute_infer_ms", model="food_classifier_onnx", concurrency=under_load)),
              unit="ms", names=("Python backend", "ONNX backend"),
              rerun=perf_rerun(both, "compute_infer_ms",
                               {"model": "food_classifier", "concurrency": under_load},
                               {"model": "food_classifier_onnx", "concurrency": under_load}),
              blocked=unusable(both, model="food_classifier", concurrency=under_load)
              or unusable(both, model="food_classifier_onnx", concurrency=under_load)
              or device_gap(both, "model", {"food_classifier": "the Python backend",
                                            "food_classifier_onnx": "the ONNX backend"})),
        check("ONNX backend: two instances serve more than one",
              (row(onnx1, "throughput", concurrency=c_top), row(onnx2, "throughput", concurrency=c_top)),
              lambda a, b: b > 1.1 * a,
              lambda a, b: f"at concurrency {c_top:g}: 1 instance {a:.1f}, 2 instances {b:.1f} inferences/s"
                           f"{computed_on(onnx2)}",
              gpu_only=True, noise=(spread(onnx1, "throughput", concurrency=c_top),
                                    spread(onnx2, "throughput", concurrency=c_top)), unit="inferences/s",
              names=("1 instance", "2 instances"),
              rerun=perf_rerun(onnx2, "throughput", {"concurrency": c_top}),
              blocked=unusable(onnx1, concurrency=c_top) or unusable(onnx2, concurrency=c_top)),
    ]
