"""Notebook 06's expected effects on made-up rows: the ONNX backend's compute against the Python
backend's, each comparison at one concurrency, and the concurrency it holds fixed named."""

from __future__ import annotations

import pandas as pd

from servelab.lab import (
    step06_onnx_backend,
)
from servelab.report.figures import fig_breakdown
from servelab.report.readings import read_breakdown
from tests.unit.lab.made_up_runs import backends, data, one, status, triton_run


def test_onnx_backend_rules() -> None:
    rows = [{"step": "python_vs_onnx", "model": "food_classifier", "concurrency": 8, "compute_infer_ms": 20,
             "throughput": 50},
            {"step": "onnx_backend", "model": "food_classifier_onnx", "concurrency": 8, "compute_infer_ms": 5,
             "throughput": 150},
            {"step": "onnx_scaling", "model": "food_classifier_onnx", "concurrency": 8, "compute_infer_ms": 5,
             "throughput": 280}]
    checks = step06_onnx_backend.rules(data(triton=rows))
    assert status(checks, "inference time is lower") == "observed"
    assert status(checks, "two instances serve more") == "observed"
    rows[2]["throughput"] = 150
    assert status(step06_onnx_backend.rules(data(triton=rows)), "two instances serve more") == "not observed"
    assert {c.status for c in step06_onnx_backend.rules(data())} == {"cannot show here"}


def test_the_backends_are_compared_at_each_concurrency_never_across_them() -> None:
    """The old reading set the Python backend at concurrency 1 against ONNX at 16 ("34.2 -> 11.5")."""
    [section, _] = step06_onnx_backend.sections(triton_run(backends()))
    caption = section.parts[0]
    assert "at concurrency 1: compute infer 34.2 → 9.9 ms" in caption
    assert "at concurrency 8: compute infer 30.0 → 11.0 ms" in caption
    assert "34.2 → 11.5" not in caption


def test_one_and_two_instances_are_compared_at_each_concurrency_with_one_series_each() -> None:
    """The old reading of 06's '1 vs 2 instances' said "9.9 → 17.9 ms" (one instance at concurrency 1,
    two at 16), and its plot joined both configurations with one line."""
    rows = pd.DataFrame([r for r in backends() if r["model"] == "food_classifier_onnx"])
    reading = read_breakdown(rows)
    assert "at concurrency 16: compute infer 11.5 → 17.9 ms" in reading and "9.9 → 17.9" not in reading
    fig = fig_breakdown(rows)
    lines = fig.axes[1].get_lines()
    assert len(lines) == 4  # p50 and p99 for each configuration
    assert all(list(line.get_xdata()) == [0, 1, 2] for line in lines)  # each over the three levels
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["1", "8", "16"]


def test_the_onnx_verdict_names_the_concurrency_it_holds_fixed() -> None:
    verdict = one(step06_onnx_backend.rules(triton_run(backends())), "inference time")
    assert verdict.evidence.startswith("at concurrency 8: compute infer Python 30.0 ms, ONNX 11.0 ms")
