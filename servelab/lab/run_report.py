"""The lab's report: its notebooks in order, each with the steps that report on it (``servelab.report``)."""

from __future__ import annotations

from pathlib import Path

from servelab.lab import (
    step03_fastapi,
    step04_triton_python,
    step05_instance_scaling,
    step06_onnx_backend,
    step07_dynamic_batching,
    step09_llm_serving,
    step09_vllm,
    step10_report,
    step11_report,
)
from servelab.report import html
from servelab.report.effects import Check
from servelab.report.html import Notebook
from servelab.results.schema import RunData

# each notebook's steps draw its report sections and check its expected effects (sections, rules); its
# rows are the `step` values of the Triton rows it measures (the verdict counts their warnings, recoveries)
NOTEBOOKS = (
    Notebook("03_fastapi", (step03_fastapi,)),
    Notebook("04_triton_python", (step04_triton_python,), ("python_concurrency", "python_client_batch")),
    Notebook("05_instance_scaling", (step05_instance_scaling,), ("instance_scaling", "threads_lesson")),
    Notebook("06_onnx_backend", (step06_onnx_backend,), ("onnx_backend", "python_vs_onnx", "onnx_scaling")),
    Notebook("07_dynamic_batching", (step07_dynamic_batching,), ("capacity", "arrivals", "dynamic_batching")),
    Notebook("09_llm_serving", (step09_llm_serving, step09_vllm)),
    Notebook("10_scaling_out", (step10_report,)),
    Notebook("11_model_analyzer", (step11_report,), ("your_configuration", "model_analyzer_pick")),
)
STEPS = tuple(step for notebook in NOTEBOOKS for step in notebook.steps)


def write_report(run_dir: Path, compare: Path | None = None) -> Path:
    """``run_dir/report.html`` for this run, with ``compare`` (another run's folder) beside it; by default
    a run that computed nothing on a GPU gets the lab's GPU reference run there
    (``servelab.results.reference``; ``SERVELAB_REFERENCE=none`` leaves it out)."""
    if compare is None and not html.run_on_gpu(RunData.load(run_dir)):
        from servelab.results.reference import reference_run

        found = reference_run()
        compare = found if found is not None and found.resolve() != Path(run_dir).resolve() else None
    return html.write_report(run_dir, NOTEBOOKS, compare)


def expected_effects(data: RunData) -> list[Check]:
    """The lab's expected effects, checked on ``data``."""
    return html.expected_effects(STEPS, data)
