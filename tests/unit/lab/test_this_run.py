"""What this run shows (``servelab.lab.this_run``): the verdicts a cell prints are read from this run's
data."""

from __future__ import annotations

from pathlib import Path

from servelab.lab import (
    step03_fastapi,
    step04_triton_python,
)
from tests.unit.lab.made_up_runs import fastapi_rows, write_run


def test_what_this_run_shows_reads_this_runs_data(tmp_path: Path, monkeypatch, capsys) -> None:
    from servelab.lab import common

    run = write_run(tmp_path / "run", fastapi_rows(pt=(20, 200), onnx=(7, 20)), [])
    monkeypatch.setenv("SERVELAB_RESULTS", str(run))
    from servelab.report import verdicts

    verdicts.forget()
    lines = common.what_this_run_shows(step03_fastapi, "FastAPI onnx", "ONNX Runtime answers").lines()
    assert lines == [
        "NOT observed: FastAPI onnx: with many clients the median latency is ≥ 4× one client's "
        "(queuing) — 1 client 7 ms, 16 clients 20 ms, 2.86×",
        "observed: FastAPI: ONNX Runtime answers one client faster than PyTorch — "
        "PyTorch 20 ms, ONNX Runtime 7 ms"]
    printed = capsys.readouterr().out.splitlines()
    assert [line for line in printed if not line.startswith(("  ", "How to read"))] == lines
    [gpu] = common.what_this_run_shows(step04_triton_python, "Client batch")
    assert gpu.status == "cannot show here" and "a GPU effect: expect it on the GPU node" in gpu.details()
