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
        first = providers[0] if isinstance(providers[0], str) else providers[0][0]
        loads = first in self.providers  # a provider that is not there falls back to the CPU
        return SimpleNamespace(get_providers=lambda: [first if loads else "CPUExecutionProvider"])


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
    with pytest.raises(RuntimeError, match="needs onnxruntime-gpu"):
        _replica(monkeypatch, [1], ["CPUExecutionProvider"], devices=1)
    with pytest.raises(RuntimeError, match="needs a GPU the driver shows"):
        _replica(monkeypatch, [1], ["CUDAExecutionProvider", "CPUExecutionProvider"], devices=0)


def test_replicas_ask_for_half_a_gpu_only_where_the_cluster_has_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    import onnxruntime
    import ray

    p = params.resolve("local", "quick", scaling_max_replicas=None)
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 32.0, "GPU": 2.0})
    monkeypatch.setattr(onnxruntime, "get_available_providers",  # onnxruntime-gpu, as the node's image has
                        lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert step10_scaling_out.policy(p).num_gpus == 0.5
    assert step10_scaling_out.policy(p).deployment_options()["ray_actor_options"]["num_gpus"] == 0.5
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    assert step10_scaling_out.policy(p).num_gpus == 0.0


def test_a_failed_deploy_says_why_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Serve's status is a str enum: DEPLOY_FAILED with the replica's error ends the wait with that error."""
    from ray import serve
    from ray.serve.schema import ApplicationStatus

    from servelab.scaling.cluster import Cluster, ScalingError

    app_status = SimpleNamespace(status=ApplicationStatus.DEPLOY_FAILED, deployments={},
                                 message="RuntimeError: ... it needs onnxruntime-gpu ...")
    monkeypatch.setattr(serve, "status", lambda: SimpleNamespace(applications={"food11": app_status}))
    with pytest.raises(ScalingError, match=r"failed to deploy: RuntimeError: .* onnxruntime-gpu"):
        Cluster().wait_replicas(lambda n: n == 1, "1 running replica", timeout_s=30)
