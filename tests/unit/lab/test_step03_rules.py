"""Notebook 03's expected effects on made-up FastAPI rows: queuing, ONNX Runtime faster, each rule
naming its numbers."""

from __future__ import annotations

from servelab.lab import (
    step03_fastapi,
)
from tests.unit.lab.made_up_runs import data, fastapi_rows, status


def test_fastapi_queuing_and_onnx_faster() -> None:
    checks = step03_fastapi.rules(data(fastapi_rows(pt=(20, 200), onnx=(7, 20))))
    assert status(checks, "FastAPI pt: with many clients") == "observed"  # 10× ≥ 4×
    assert status(checks, "FastAPI onnx: with many clients") == "not observed"  # 2.9× < 4×
    assert status(checks, "ONNX Runtime answers one client faster") == "observed"
    slower = step03_fastapi.rules(data(fastapi_rows(pt=(7, 200), onnx=(20, 200))))
    assert status(slower, "ONNX Runtime answers one client faster") == "not observed"
    assert {c.status for c in step03_fastapi.rules(data())} == {"cannot show here"}


def test_a_rule_names_its_numbers() -> None:
    pt, _, faster = step03_fastapi.rules(data(fastapi_rows(pt=(20, 200), onnx=(7, 20))))[:3]
    assert pt.evidence == "20 ms → 200 ms (10.0×)"
    assert faster.evidence == "PyTorch 20 ms, ONNX 7 ms (medians)"
    # the verdict's own figures, each with its unit, as its one line shows them
    assert [str(q) for q in pt.figures] == ["1 client 20 ms", "16 clients 200 ms", "10×"]
    assert faster.line() == ("observed: FastAPI: ONNX Runtime answers one client faster than PyTorch — "
                             "PyTorch 20 ms, ONNX Runtime 7 ms")
