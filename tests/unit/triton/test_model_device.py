"""The Python-backend model on a GPU its torch cannot run: it computes on the CPU and says so in Triton's
log, and the notebooks' device label agrees (``repository.serving_device``). A stand-in for Triton's
``triton_python_backend_utils`` records the log lines; the model, its weights and torch are the real ones."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from typing import Any

import pytest

from servelab.core.paths import STAGING_DIR


def load_model_module(monkeypatch: pytest.MonkeyPatch, logged: list[tuple[str, str]]) -> Any:
    logger = types.SimpleNamespace(log_info=lambda m: logged.append(("info", m)),
                                   log_warn=lambda m: logged.append(("warn", m)))
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", types.SimpleNamespace(Logger=logger))
    spec = importlib.util.spec_from_file_location("food_classifier_model",
                                                  STAGING_DIR / "food_classifier" / "1" / "model.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def args(kind: str) -> dict[str, str]:
    return {"model_config": json.dumps({"name": "food_classifier", "parameters": {}}),
            "model_repository": str(STAGING_DIR / "food_classifier"), "model_version": "1",
            "model_instance_kind": kind, "model_instance_device_id": "0",
            "model_instance_name": f"food_classifier_0_{kind.lower()}"}


def test_kind_gpu_on_a_gpu_torch_cannot_run_computes_on_the_cpu_and_says_so(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import torch

    logged: list[tuple[str, str]] = []
    model = load_model_module(monkeypatch, logged).TritonPythonModel()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # the driver shows a GPU ...
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=0: (6, 0))  # ... a P100
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: ["sm_75", "sm_80", "sm_90"])  # no sm_60
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=0: "Tesla P100-PCIE-16GB")
    model.initialize(args("GPU"))
    assert model.device == "cpu"
    warnings = [m for level, m in logged if level == "warn"]
    assert any("Tesla P100-PCIE-16GB (sm_60) is not supported by this torch build" in m for m in warnings)
    assert any("KIND_GPU, but torch" in m and "this instance computes on the CPU" in m for m in warnings)
    assert any("on cpu" in m for level, m in logged if level == "info")
