"""The quick headless run executes every notebook and leaves data, notebooks and a full report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from servelab.lab import runner as lab
from servelab.results import schema

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # the first test runs the whole lab

TRITON_STEPS = {
    "04_triton_python": {"python_concurrency", "python_client_batch"},
    "05_instance_scaling": {"instance_scaling", "threads_lesson"},
    "06_onnx_backend": {"onnx_backend", "python_vs_onnx", "onnx_scaling"},
    "07_dynamic_batching": {"capacity", "arrivals", "dynamic_batching"},
}
REPORT_SECTIONS = [
    "Machine and run", "FastAPI: PyTorch vs ONNX Runtime", "GourmetGram (Flask) through each backend",
    "Triton, Python backend: concurrency sweep", "Triton, Python backend: client batch",
    "Instance scaling", "Threads per instance", "Python backend vs ONNX backend",
    "ONNX backend: 1 vs 2 instances", "Capacity and arrival patterns",
    "Dynamic batching across arrival rates",
    "Batch sizes the server formed", "CPU / GPU utilisation during each run", "expected effects",
]


def test_every_notebook_runs(lab_run: lab.RunOutcome) -> None:
    failure = lab_run.failure
    assert failure is None, failure.error
    names = [n.name for n in lab_run.notebooks]
    assert names == [p.stem for p in lab.notebook_paths()]
    for outcome in lab_run.notebooks:
        assert outcome.output.is_file(), f"no executed copy of {outcome.name}"
    summary = json.loads((lab_run.run_dir / "run.json").read_text())
    assert summary["ok"] and summary["seconds"] > 0


def test_fastapi_rows(run_dir: Path) -> None:
    rows = schema.load(run_dir, schema.FASTAPI)
    measured = set(zip(rows["backend"], rows["mode"], strict=True))
    assert measured >= {("pt", "sequential"), ("pt", "concurrent"), ("onnx", "sequential"),
                        ("onnx", "concurrent")}
    assert (rows["errors"] == 0).all()
    assert (rows["throughput_rps"] > 0).all()
    assert rows["cpu_util_pct"].notna().all(), "utilisation sampled during every FastAPI run"


def test_flask_rows(run_dir: Path) -> None:
    rows = schema.load(run_dir, schema.FLASK)
    assert set(rows["step"]) == {"fastapi_onnx", "triton_python", "triton_onnx"}
    assert (rows["errors"] == 0).all()


@pytest.mark.parametrize("notebook", sorted(TRITON_STEPS))
def test_triton_rows(run_dir: Path, notebook: str) -> None:
    rows = schema.RunData.load(run_dir).triton
    for step in TRITON_STEPS[notebook]:
        got = rows[rows["step"] == step]
        assert not got.empty, f"{notebook}: no rows for step {step}"
        assert (pd.to_numeric(got["throughput"]) > 0).all(), f"{step}: throughput"
        assert got["cpu_util_pct"].notna().all(), f"{step}: utilisation"


def test_dynamic_batching_rows_carry_batch_counts(run_dir: Path) -> None:
    rows = schema.RunData.load(run_dir).triton
    on = rows[(rows["step"] == "dynamic_batching") & (rows["dynamic_batching"] == True)]  # noqa: E712
    assert sum(schema.batch_size_counts(on).values()) > 0


def test_rates_derive_from_measured_capacity(run_dir: Path) -> None:
    rows = schema.RunData.load(run_dir).triton
    capacity = float(rows[rows["step"] == "capacity"]["throughput"].iloc[-1])
    rates = sorted(set(rows[rows["step"] == "dynamic_batching"]["rate"]))
    from servelab.lab.params import SPECS

    expected = [round(f * capacity, 1) for f in SPECS["rate_fractions"].quick]
    assert rates == pytest.approx(expected, abs=0.11)


def test_report_has_every_section_and_plot(run_dir: Path) -> None:
    page = (run_dir / "report.html").read_text()
    for title in REPORT_SECTIONS:
        assert title in page, f"report lacks the section {title!r}"
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) >= 11, f"only {len(images)} plots"
    assert all(len(i) > 1000 for i in images)
    assert page.count("<figcaption>") == len(images), "every plot has a one-line reading"
    assert re.search(r"\d+ of \d+ expected effects observed", page)
    assert "http://" not in page.replace("http://127.0.0.1", ""), "self-contained: no external links"


def test_the_run_shows_at_least_what_a_cpu_can_show(run_dir: Path) -> None:
    """Every effect not marked as a GPU effect is one this CPU run can show: at least that many are
    observed (GPU effects observed here count too), and the report says the same number."""
    from servelab.lab.run_report import expected_effects

    checks = expected_effects(schema.RunData.load(run_dir))
    cpu_can_show = [c for c in checks if not c.gpu_only]
    observed = [c for c in checks if c.status == "observed"]
    missing = [f"{c.effect}: {c.status} ({c.evidence})" for c in cpu_can_show if c.status != "observed"]
    assert len(observed) >= len(cpu_can_show), f"not observed on this CPU: {missing}"
    page = (run_dir / "report.html").read_text()
    assert f"{len(observed)} of {len(checks)} expected effects observed" in page


def test_executed_notebooks_show_tables_and_plots(run_dir: Path) -> None:
    import nbformat

    nb = nbformat.read(run_dir / "04_triton_python.ipynb", as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert any("image/png" in o.get("data", {}) for o in outputs)
    assert any("text/html" in o.get("data", {}) for o in outputs)
    assert any("+  count: 2" in o.get("text", "") for c in
               nbformat.read(run_dir / "05_instance_scaling.ipynb", as_version=4).cells
               for o in c.get("outputs", [])), "the instance change is shown as a diff"
