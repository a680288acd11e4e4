"""Where a replica computes: on the CPU without a GPU share; on its GPU share with ONNX Runtime's
CUDA provider; and a replica given a GPU that its ONNX Runtime cannot use refuses to start, saying
what to install (Ray and ONNX Runtime stood in for: no GPU here)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import servelab.scaling.app as app
from servelab.lab import params, step10_scaling_out

Food11: Any = app.Food11.func_or_class  # the class under @serve.deployment


class FakeOrt:
    """onnxruntime's surface the replica uses; records the providers it was asked for."""

    __version__ = "1.20.2"

    def __init__(self, providers: list[str]) -> None:
        self.providers = providers
        self.asked: list[Any] = []

    def get_available_providers(self) -> list[str]:
        return self.providers

    def SessionOptions(self) -> Any:  # noqa: N802 - onnxruntime's name
        return SimpleNamespace()

    def InferenceSession(self, model: str, options: Any, providers: list[Any]) -> Any:  # noqa: N802
        self.asked.append(providers)
        return SimpleNamespace()


def _replica(monkeypatch: pytest.MonkeyPatch, gpu_ids: list[int], providers: list[str], devices: int) -> Any:
    import sys

    import ray
    from ray import serve

    ort = FakeOrt(providers)
    monkeypatch.setitem(sys.modules, "onnxruntime", ort)
    monkeypatch.setattr(ray, "get_gpu_ids", lambda: gpu_ids)
    replica_id = SimpleNamespace(unique_id="r1", to_full_id_str=lambda: "SERVE_REPLICA::food11#food11#r1")
    monkeypatch.setattr(serve, "get_replica_context", lambda: SimpleNamespace(replica_id=replica_id))
    monkeypatch.setattr("servelab.core.gpu.cuda_device_count", lambda: devices)
    replica = Food11(model="m.onnx")
    return replica, ort


def test_no_gpu_share_computes_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    replica, ort = _replica(monkeypatch, [], ["CUDAExecutionProvider", "CPUExecutionProvider"], devices=1)
    assert replica.device == "CPU" and ort.asked == [["CPUExecutionProvider"]]
    assert replica.actor == "SERVE_REPLICA::food11#food11#r1"


def test_a_gpu_share_runs_the_cuda_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    replica, ort = _replica(monkeypatch, [0], ["CUDAExecutionProvider", "CPUExecutionProvider"], devices=1)
    [providers] = ort.asked
    assert replica.device == "GPU" and providers[0][0] == "CUDAExecutionProvider"
    assert providers[-1] == "CPUExecutionProvider"


def test_a_gpu_share_without_onnxruntime_gpu_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RuntimeError, match="install onnxruntime-gpu"):
        _replica(monkeypatch, [1], ["CPUExecutionProvider"], devices=1)


def test_replicas_ask_for_half_a_gpu_only_where_the_cluster_has_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    p = params.resolve("local", "quick", scaling_max_replicas=None)
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 32.0, "GPU": 2.0})
    assert step10_scaling_out.policy(p).num_gpus == 0.5
    assert step10_scaling_out.policy(p).deployment_options()["ray_actor_options"]["num_gpus"] == 0.5
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    assert step10_scaling_out.policy(p).num_gpus == 0.0
