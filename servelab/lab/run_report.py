"""The lab's report: its steps in the notebooks' order, drawn by ``servelab.report``."""

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
)
from servelab.report import html
from servelab.report.effects import Check
from servelab.results.schema import RunData

# each draws its report sections and checks its expected effects (sections(data), rules(data))
STEPS = (step03_fastapi, step04_triton_python, step05_instance_scaling, step06_onnx_backend,
         step07_dynamic_batching, step09_llm_serving, step09_vllm)


def write_report(run_dir: Path, compare: Path | None = None) -> Path:
    """``run_dir/report.html`` for this run (``compare``: another run's folder beside it)."""
    return html.write_report(run_dir, STEPS, compare)


def expected_effects(data: RunData) -> list[Check]:
    """The lab's expected effects, checked on ``data``."""
    return html.expected_effects(STEPS, data)
