"""The lab's report: its notebooks in order, each with the modules that report on it (``servelab.report``),
as the registry of the lab's steps (``servelab.core.lab_steps``) names them."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import cast

from servelab.core.lab_steps import LAB_STEPS, LabStep
from servelab.report import html
from servelab.report.effects import Check
from servelab.report.html import Notebook, ReportStep
from servelab.results.schema import RunData


def notebook(step: LabStep) -> Notebook:
    """A lab step as the report sees it: its modules draw its report sections and check its expected effects
    (``sections``, ``rules``); its rows are the names of the Triton rows it measures (the verdict counts
    their warnings, recoveries)."""
    modules = tuple(cast(ReportStep, import_module(f"servelab.lab.{name}")) for name in step.report)
    return Notebook(step.name, modules, step.triton_rows)


NOTEBOOKS = tuple(notebook(step) for step in LAB_STEPS if step.report)
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
