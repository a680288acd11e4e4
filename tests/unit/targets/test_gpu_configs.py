"""The GPU experiment configs: built from the staged configs as protobufs, as the lab's steps say."""

from __future__ import annotations

import json

import pytest
from google.protobuf import json_format, text_format

from servelab.core.paths import STAGING_DIR
from servelab.triton.config import ConfigError, ModelConfig, config_text, read_config, summary
from servelab.triton.gpu_configs import (
    DYNAMIC_BATCHING,
    GPU_EXPERIMENTS,
    ONNX_SCALING,
    PYTHON_SCALING,
    TENSORRT,
    TensorRT,
    experiment_config,
    experiments,
    with_tensorrt,
    without_tensorrt,
)


def groups(cfg: ModelConfig) -> list[tuple[int, str, list[int]]]:
    kinds = {1: "KIND_GPU", 2: "KIND_CPU"}
    return [(g.count, kinds.get(g.kind, str(g.kind)), list(g.gpus)) for g in cfg.instance_group]


def test_python_backend_scaling_1_then_2_plus_2_then_4_plus_4() -> None:
    configs = [experiment_config(e) for e in PYTHON_SCALING]
    assert [groups(c) for c in configs] == [
        [(1, "KIND_GPU", [0])],
        [(2, "KIND_GPU", [0]), (2, "KIND_GPU", [1])],
        [(4, "KIND_GPU", [0]), (4, "KIND_GPU", [1])],
    ]
    assert all(c.backend == "python" and not c.HasField("dynamic_batching") for c in configs)
    staged = read_config(STAGING_DIR / "food_classifier")
    assert configs[1].parameters == staged.parameters  # only the instance groups changed


def test_onnx_scaling_count_2_over_both_gpus() -> None:
    one, two = (experiment_config(e) for e in ONNX_SCALING)
    assert groups(one) == [(1, "KIND_GPU", [0])]
    assert groups(two) == [(2, "KIND_GPU", [0, 1])]


def test_dynamic_batching_on_and_off() -> None:
    off, on = (experiment_config(e) for e in DYNAMIC_BATCHING)
    assert not off.HasField("dynamic_batching")
    assert list(on.dynamic_batching.preferred_batch_size) == [4, 6, 8]
    assert on.dynamic_batching.max_queue_delay_microseconds == 100
    assert summary(on)["instances"] == "1xKIND_GPU[0]"


def test_tensorrt_accelerator_is_a_config_change() -> None:
    plain, trt = (experiment_config(e) for e in TENSORRT)
    assert not plain.HasField("optimization")
    expected = text_format.Parse("""
        optimization { execution_accelerators { gpu_execution_accelerator: [ {
          name: "tensorrt"
          parameters { key: "precision_mode" value: "FP16" }
          parameters { key: "max_workspace_size_bytes" value: "1073741824" }
          parameters { key: "trt_engine_cache_enable" value: "1" }
          parameters { key: "trt_engine_cache_path" value: "/tmp/servelab_trt_cache" }
        } ] } }""", ModelConfig())
    assert trt.optimization == expected.optimization
    # what reload_model sends: the JSON form Triton's load API takes, round-tripping exactly
    sent = json_format.MessageToJson(trt)
    assert json.loads(sent)["optimization"]["executionAccelerators"]["gpuExecutionAccelerator"][0][
        "name"] == "tensorrt"
    assert json_format.Parse(sent, ModelConfig()) == trt
    assert without_tensorrt(trt) == plain
    assert with_tensorrt(with_tensorrt(plain)) == trt  # applying twice adds one accelerator
    fp32 = with_tensorrt(plain, TensorRT(precision_mode="FP32", engine_cache_path=None))
    assert dict(fp32.optimization.execution_accelerators.gpu_execution_accelerator[0].parameters) == {
        "precision_mode": "FP32", "max_workspace_size_bytes": "1073741824"}


def test_tensorrt_refused_for_the_python_backend() -> None:
    with pytest.raises(ConfigError, match="needs the onnxruntime backend; food_classifier uses python"):
        with_tensorrt(read_config(STAGING_DIR / "food_classifier"))


def test_every_experiment_builds_and_steps_are_named() -> None:
    for experiment in GPU_EXPERIMENTS:
        text = config_text(experiment_config(experiment))
        assert f'name: "{experiment.model}"' in text
    assert len(experiments("instance_scaling")) == 3
    with pytest.raises(ValueError, match="choose one of"):
        experiments("int8")


def test_tensorrt_needs_a_new_enough_gpu() -> None:
    from servelab.core.gpu import parse_compute_capabilities
    from servelab.targets.base import CommandResult
    from servelab.targets.compose import ComposeStack
    from servelab.targets.local import LocalStack
    from servelab.triton.gpu_configs import compute_capabilities, tensorrt_problem

    assert parse_compute_capabilities("6.0\n6.0\n") == [(6, 0), (6, 0)]
    assert "compute capability 6.0 is below 7.0" in (tensorrt_problem([(6, 0), (6, 0)]) or "")
    assert tensorrt_problem([(9, 0)]) is None
    assert "no GPU" in (tensorrt_problem([]) or "")
    assert compute_capabilities(LocalStack()) == []

    class Host:
        host = "localhost"

        def __init__(self) -> None:
            self.commands: list[list[str]] = []

        def run(self, argv: list[str], timeout: float | None) -> CommandResult:
            self.commands.append(list(argv))
            return CommandResult(list(argv), 0, "9.0\n", "")

    host = Host()  # a Docker engine with the NVIDIA runtime: its GPUs are asked
    assert compute_capabilities(ComposeStack(transport=host, gpu=True)) == [(9, 0)]
    assert host.commands == [["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"]]
    host = Host()  # one without it (a CPU-only Docker host): no GPU, and nothing is asked
    assert compute_capabilities(ComposeStack(transport=host, gpu=False)) == []
    assert host.commands == []
