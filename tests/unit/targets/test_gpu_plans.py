"""Every GPU plan fits the GPUs present: the local target's GPU choice and the plans of 05, 06 and 10
for hosts with 0, 1, 2 and 4 GPUs. The driver's answer is a stand-in (``cuda_device_count``), so this
runs in CI without a GPU."""

from __future__ import annotations

import pytest

from servelab.core import gpu
from servelab.lab import params, step05_instance_scaling, step06_onnx_backend, step10_scaling_out
from servelab.targets.local import LocalStack
from servelab.triton.gpu_configs import ONNX_SCALING, PYTHON_SCALING, onnx_scaling, python_scaling

GPU_COUNTS = (0, 1, 2, 4)


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """``driver(n)``: the NVIDIA driver shows ``n`` GPUs to this process (``SERVELAB_GPUS`` unset)."""
    monkeypatch.delenv(gpu.GPUS_SETTING, raising=False)

    def shows(count: int) -> None:
        monkeypatch.setattr(gpu, "cuda_device_count", lambda: count)
    return shows


@pytest.mark.parametrize("count", GPU_COUNTS)
def test_the_local_target_uses_the_gpus_the_driver_shows(driver, count: int) -> None:  # type: ignore[no-untyped-def]
    driver(count)
    stack = LocalStack()
    assert (stack.gpu_count, stack.has_gpu) == (count, count > 0)


def test_servelab_gpus_keeps_a_gpu_host_on_the_cpu_and_refuses_gpus_that_are_not_there(
        driver, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    driver(2)
    monkeypatch.setenv(gpu.GPUS_SETTING, "0")
    assert not LocalStack().has_gpu
    monkeypatch.setenv(gpu.GPUS_SETTING, "1")
    assert LocalStack().gpu_count == 1
    monkeypatch.setenv(gpu.GPUS_SETTING, "3")
    with pytest.raises(ValueError, match="SERVELAB_GPUS=3 but the driver shows 2 GPU"):
        LocalStack()
    monkeypatch.setenv(gpu.GPUS_SETTING, "two")
    with pytest.raises(ValueError, match="give a number of GPUs"):
        LocalStack()


def _listed(plan_rows: list[list[int]]) -> set[int]:
    return {g for gpus in plan_rows for g in gpus}


@pytest.mark.parametrize("count", GPU_COUNTS)
def test_05s_instance_plan_fits_the_gpus_present(driver, count: int) -> None:  # type: ignore[no-untyped-def]
    driver(count)
    p = params.resolve("local", "quick", instance_counts=None)
    plan = step05_instance_scaling.instance_plan(LocalStack(), p)
    assert _listed(list(plan["gpus"])) <= set(range(count))
    if count == 0:
        assert set(plan["kind"]) == {"KIND_CPU"} and not _listed(list(plan["gpus"]))
    elif count == 1:  # 1 -> 2 -> 4 on GPU 0
        assert list(plan["count"]) == [1, 2, 4] and list(plan["gpus"]) == [[0], [0], [0]]
        assert list(plan["instances"]) == [1, 2, 4]
        assert list(plan["label"]) == ["1 instance on GPU 0", "2 instances on GPU 0", "4 instances on GPU 0"]
    else:  # the node's steps: 1 on GPU 0 -> 2 + 2 -> 4 + 4 on GPUs 0 and 1
        assert list(plan["count"]) == [1, 2, 4] and list(plan["gpus"]) == [[0], [0, 1], [0, 1]]
        assert list(plan["instances"]) == [1, 4, 8]
        assert list(plan["label"])[1] == "2 + 2 instances on GPUs 0 and 1"


def test_a_longer_instance_counts_plan_spreads_each_step_after_the_first(driver) -> None:  # type: ignore[no-untyped-def]
    driver(1)
    p = params.resolve("local", "quick", instance_counts=[1, 2, 3, 6])
    plan = step05_instance_scaling.instance_plan(LocalStack(), p)
    assert list(plan["gpus"]) == [[0]] * 4 and list(plan["count"]) == [1, 2, 3, 6]


@pytest.mark.parametrize("count", GPU_COUNTS)
def test_06s_scaled_step_fits_the_gpus_present(driver, count: int) -> None:  # type: ignore[no-untyped-def]
    driver(count)
    p = params.resolve("local", "quick", onnx_instances=None)
    step = step06_onnx_backend.scaled_step(LocalStack(), p)
    assert set(step["gpus"]) <= set(range(count))
    expected = {0: ("KIND_CPU", []), 1: ("KIND_GPU", [0]), 2: ("KIND_GPU", [0, 1]), 4: ("KIND_GPU", [0, 1])}
    assert (step["count"], step["kind"], step["gpus"]) == (2, *expected[count])


@pytest.mark.parametrize("count", (1, 2, 4))
def test_the_experiment_plans_list_only_gpus_present(count: int) -> None:
    for experiment in (*python_scaling(count), *onnx_scaling(count)):
        listed = {g for _, kind, gpus in experiment.instance_groups for g in gpus}
        assert listed <= set(range(count)), (count, experiment.label)
    assert [e.label for e in python_scaling(1)] == ["1 instance on GPU 0", "2 instances on GPU 0",
                                                    "4 instances on GPU 0"]
    assert python_scaling(2) == PYTHON_SCALING and onnx_scaling(2) == ONNX_SCALING  # the node's plans


@pytest.mark.parametrize(("gpus", "replicas", "share"), [(0, 2, 0.0), (1, 2, 0.5), (1, 4, 0.25),
                                                         (2, 4, 0.5), (4, 4, 0.5)])
def test_10s_replicas_fit_the_gpus_present(gpus: int, replicas: int, share: float) -> None:
    assert step10_scaling_out.gpu_share(gpus, replicas) == share
    assert share * replicas <= gpus or gpus == 0


def test_10s_policy_shares_one_gpu_among_every_replica_it_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    import onnxruntime
    import ray

    p = params.resolve("local", "quick", scaling_max_replicas=4)
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 16.0, "GPU": 1.0})
    monkeypatch.setattr(onnxruntime, "get_available_providers",
                        lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])  # onnxruntime-gpu
    assert step10_scaling_out.policy(p).num_gpus == 0.25
    assert step10_scaling_out.policy(p, fixed=1).num_gpus == 0.25  # the same share as the autoscaled runs


def test_10s_replicas_stay_on_the_cpu_where_onnxruntime_cannot_use_the_gpu(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A local GPU host with the venv's CPU build of onnxruntime: a replica given a GPU refused to start
    ("needs onnxruntime-gpu"), so the replicas ask for none and the notebook says why, once."""
    import onnxruntime
    import ray

    p = params.resolve("local", "quick", scaling_max_replicas=4)
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 16.0, "GPU": 1.0})
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    monkeypatch.setattr(step10_scaling_out, "_SAID_CPU", [])
    assert step10_scaling_out.policy(p).num_gpus == 0.0
    assert step10_scaling_out.policy(p, fixed=1).num_gpus == 0.0
    [line] = capsys.readouterr().out.splitlines()
    assert "has no CUDA provider: the replicas ask for no GPU and run on the CPU" in line


def test_a_local_gpu_host_deploys_the_onnx_model_through_the_python_runner(
        driver, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """The wheel's Triton has no onnxruntime backend: on KIND_GPU too the ONNX model goes through the
    generated Python-backend runner (with onnxruntime's backend it could not load at all)."""
    from servelab.triton import server

    driver(1)
    started: list[str] = []

    class Started:
        def start(self, timeout: float) -> Started:
            return self

        def argv(self) -> list[str]:
            return ["tritonserver"]

        url = "127.0.0.1:8000"

        def client(self):  # type: ignore[no-untyped-def]
            return type("C", (), {"load_model": lambda _self, name: started.append(name)})()

    monkeypatch.setattr(server, "TritonServer", lambda repository, log_path=None, server_flags=(): Started())
    stack = LocalStack(repository=tmp_path)
    stack._start_triton(timeout=5)
    for name in ("food_classifier", "food_classifier_onnx"):
        config = (tmp_path / name / "config.pbtxt").read_text()
        assert 'backend: "python"' in config and "KIND_GPU" in config, (name, config)
    assert (tmp_path / "food_classifier_onnx" / "1" / "model.py").is_file() and started == list(stack.models)
