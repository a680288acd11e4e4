"""The GPU reference as a notebook shows it (``common.reference``): evidence under a line naming its host,
where each row computed (a GPU host's row on its CPU says CPU, never a GPU expectation), the notebooks it ran;
what today's code reads from its rows; a notebook it holds nothing of says so once; its CPU % on its own
cores; GPU % blank where that run never sampled the GPU.
Why: docs/decisions/2026-11-28-gpu-reference-and-site-third-pass.md
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.core.lab_steps import and_list, measuring
from servelab.lab import common, gpu_reference, step03_fastapi
from servelab.report import terms
from servelab.results.reference import REFERENCE_SETTING
from servelab.results.schema import FASTAPI_COLUMNS

# the measuring notebooks the lab's GPU reference run (03 and 09) did not run
NOT_RAN = and_list([n for n in measuring() if n not in ("03", "09")], "or")

H100 = "NVIDIA H100 80GB HBM3"
# the monitor before it sampled the driver's window: one poll of NVML, read 0
POLLED = {"util_samples": 1, "cpu_mean_pct": 6.7, "gpu_count": 1, "gpu0_util_mean_pct": 0.0}


def _row(backend: str, device: str, mode: str, median: float, step: str) -> dict:
    concurrency = 1 if mode == "sequential" else 16
    return {"experiment": "fastapi", "timestamp": "2026-11-26T09:23:40+0000", "host": "vm", "cpu_count": 16,
            "gpu": H100, "step": step, "backend": backend, "device": device, "max_batch": 16, "mode": mode,
            "concurrency": concurrency, "requests": 100, "errors": 0, "median_ms": median,
            "p95_ms": median * 1.1, "p99_ms": median * 1.2, "median_spread": 0.2,
            "throughput_rps": 1000 / median * concurrency, "cpu_util_pct": 6.7, "gpu_util_pct": 0.0,
            "utilisation": POLLED}


@pytest.fixture
def reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A GPU host's run of 03 and 09: PyTorch on its GPU, ONNX Runtime on its 16-core CPU (as the H100's)."""
    run = tmp_path / "h100"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({
        "preset": "quick", "target": "local", "started": "2026-11-26 09:23:32 UTC", "ok": True,
        "machine": {"gpu": H100, "cpu_count": 16},
        "notebooks": [{"name": "03_fastapi", "ok": True}, {"name": "09_llm_serving", "ok": True}]}))
    rows = [_row("pt", "cuda", "sequential", 7.9, "fastapi_pt"),
            _row("pt", "cuda", "concurrent", 32.6, "fastapi_pt"),
            _row("onnx", "cpu", "sequential", 5.8, "fastapi_onnx"),
            _row("onnx", "cpu", "concurrent", 26.0, "fastapi_onnx")]
    (run / "fastapi.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setenv(REFERENCE_SETTING, str(run))
    monkeypatch.setattr(gpu_reference, "_NO_ROWS_SAID", set())  # a kernel of its own
    terms.forget()
    return run


def test_a_cpu_computed_reference_row_is_never_captioned_as_a_gpu_expectation(
        reference: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shown = common.reference("fastapi", FASTAPI_COLUMNS, backend="onnx")
    said = capsys.readouterr().out
    assert shown is not None and len(shown) == 2
    assert "expected" not in said.lower().replace("the expectation above", "")
    assert "onnx on its CPU (16 cores): a CPU figure, not a GPU one" in said
    assert "on its GPU" not in said  # none of these rows computed on it
    assert f"one {H100} host with a 16-core CPU" in said
    assert f"it ran notebooks 03 and 09 only, not {NOT_RAN}" in said
    assert said.startswith("Evidence from a GPU beside the expectation above (which is for your 2×P100 node)")


def test_each_rows_device_is_named_and_gpu_percent_unsampled_is_blank(
        reference: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shown = common.reference("fastapi", FASTAPI_COLUMNS)
    said = capsys.readouterr().out
    assert f"pt on its GPU ({H100}); onnx on its CPU (16 cores): a CPU figure, not a GPU one" in said
    table = repr(shown)
    assert "GPU %" not in table and "0.0" not in table.split("CPU %")[-1]  # never sampled: no 0.0 shown
    assert "pt sequential c=1 · cuda" in table and "onnx sequential c=1 · cpu" in table
    assert "100 % = all 16 of its cores" in table and "all 2 cores" not in table


def test_todays_code_reads_the_reference_rows(reference: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The verdict drawn now from its rows, never the words its own run printed: the engines ran on different
    devices there, so the comparison cannot be shown."""
    common.reference("fastapi", FASTAPI_COLUMNS, rules=step03_fastapi, effects=["faster than PyTorch"])
    said = capsys.readouterr().out
    assert "Today's code reads that run's rows so:" in said
    assert ("cannot show here: FastAPI: ONNX Runtime answers one client faster than PyTorch — PyTorch ran on "
            "the GPU, ONNX Runtime on the CPU") in said
    assert f"  why: PyTorch ran on the GPU ({H100}), ONNX Runtime on the CPU" in said
    assert "  figures: PyTorch 7.9 ms, ONNX Runtime 5.8 ms" in said
    assert "with many clients" not in said  # effects picks the lines


def test_a_notebook_without_reference_rows_says_so_once(reference: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert common.reference("triton", FASTAPI_COLUMNS, step="python_concurrency") is None
    assert common.reference("triton", FASTAPI_COLUMNS, step="python_client_batch") is None
    said = capsys.readouterr().out
    assert said.count("No GPU reference rows") == 1 and "it ran notebooks 03 and 09 only" in said
    common.reference("triton", FASTAPI_COLUMNS, step="python_concurrency")  # the same cell, run again
    assert capsys.readouterr().out.count("No GPU reference rows") == 1


def test_gpu_percent_is_blank_where_the_gpu_was_never_sampled(reference: Path) -> None:
    """For the report, the rules and the notebooks alike (``RunData.load``): a polled 0 is no figure; a row
    the monitor sampled from the driver's window keeps its own, 0 included."""
    from servelab.results.schema import RunData

    assert RunData.load(reference).fastapi["gpu_util_pct"].isna().all()
    sampled = _row("pt", "cuda", "sequential", 7.9, "fastapi_pt")
    sampled["utilisation"] = {**POLLED, "gpu_util_method": "nvml samples"}
    (reference / "fastapi.jsonl").write_text(json.dumps(sampled) + "\n")
    assert RunData.load(reference).fastapi["gpu_util_pct"].tolist() == [0.0]
