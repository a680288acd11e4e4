"""The lab's Triton GPU plans as data: which model, which config, which load, for the GPUs present.

These are the lab's steps 5–7 as the 2×P100 node runs them (``PYTHON_SCALING``, ``ONNX_SCALING``), the
same steps fitted to a host with one GPU or more than two (``instance_steps``, ``onnx_step``: what
notebooks 05 and 06 apply), plus one step beyond the original lab: the ONNX model with the
TensorRT execution accelerator, which is only a config change. Every config is
built from the staged config.pbtxt as a ``ModelConfig`` protobuf with
``servelab.triton.config`` — never by editing text — so a notebook shows the
diff, writes the file through the stack and reloads the model, exactly as for
the CPU experiments.

Triton reads ``count`` in an instance group as *per listed GPU*: ``count: 2,
gpus: [0, 1]`` (the lab's ONNX scaling step) starts 2 instances on each GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servelab.core.gpu import COMPUTE_CAP_QUERY, parse_compute_capabilities
from servelab.core.paths import STAGING_DIR
from servelab.triton.config import (
    ConfigError,
    ModelConfig,
    read_config,
    set_dynamic_batching,
    set_instance_groups,
)
from servelab.triton.defaults import MAX_QUEUE_DELAY_US, PREFERRED_BATCH_SIZES

GPU = "KIND_GPU"
# TensorRT 10 (in the tritonserver 24.10 image) is built for compute capability 7.0 and newer:
# the P100 (6.0) cannot run the TensorRT experiment with this image.
TENSORRT_MIN_CAPABILITY = (7, 0)
ONNX_BACKENDS = ("onnxruntime", "onnxruntime_onnx")
InstanceGroups = tuple[tuple[int, str, tuple[int, ...]], ...]


@dataclass(frozen=True)
class DynamicBatching:
    """The lab's dynamic batching settings (step 7)."""

    preferred_batch_sizes: tuple[int, ...] = PREFERRED_BATCH_SIZES
    max_queue_delay_us: int = MAX_QUEUE_DELAY_US


@dataclass(frozen=True)
class TensorRT:
    """ONNX Runtime's TensorRT execution provider, as Triton's onnxruntime backend takes it.

    FP16 is where TensorRT gains most; the engine cache keeps a reload (or a
    second run) from rebuilding the engine, which takes tens of seconds.
    """

    precision_mode: str = "FP16"
    max_workspace_size_bytes: int = 1 << 30
    engine_cache_path: str | None = "/tmp/servelab_trt_cache"


@dataclass(frozen=True)
class GpuExperiment:
    """One measured configuration of one model on the GPU node."""

    step: str
    label: str
    model: str
    instance_groups: InstanceGroups
    concurrency: tuple[int, ...] = (1, 8, 16)
    dynamic_batching: DynamicBatching | None = None
    tensorrt: TensorRT | None = None

    def apply(self, cfg: ModelConfig) -> ModelConfig:
        """``cfg`` (the staged config) changed to this experiment's settings."""
        new = set_instance_groups(cfg, self.instance_groups)
        if self.dynamic_batching is None:
            new = set_dynamic_batching(new, enabled=False)
        else:
            new = set_dynamic_batching(new, True, self.dynamic_batching.preferred_batch_sizes,
                                       self.dynamic_batching.max_queue_delay_us)
        return with_tensorrt(new, self.tensorrt) if self.tensorrt else without_tensorrt(new)


def with_tensorrt(cfg: ModelConfig, trt: TensorRT | None = None) -> ModelConfig:
    """``cfg`` with ``optimization { execution_accelerators { gpu_execution_accelerator: [tensorrt] } }``.

    Only Triton's onnxruntime backend reads it; anything else is refused here
    instead of being ignored by the server.
    """
    trt = trt or TensorRT()
    if (cfg.backend or cfg.platform) not in ONNX_BACKENDS:
        raise ConfigError(f"the TensorRT execution accelerator needs the onnxruntime backend; "
                          f"{cfg.name or 'this model'} uses {cfg.backend or cfg.platform or 'none'}")
    new = without_tensorrt(cfg)
    accelerator = new.optimization.execution_accelerators.gpu_execution_accelerator.add(name="tensorrt")
    accelerator.parameters["precision_mode"] = trt.precision_mode
    accelerator.parameters["max_workspace_size_bytes"] = str(trt.max_workspace_size_bytes)
    if trt.engine_cache_path:
        accelerator.parameters["trt_engine_cache_enable"] = "1"
        accelerator.parameters["trt_engine_cache_path"] = trt.engine_cache_path
    return new


def without_tensorrt(cfg: ModelConfig) -> ModelConfig:
    """``cfg`` with no GPU execution accelerator (the plain CUDA execution provider)."""
    new = ModelConfig()
    new.CopyFrom(cfg)
    accelerators = new.optimization.execution_accelerators
    del accelerators.gpu_execution_accelerator[:]
    if not accelerators.cpu_execution_accelerator:
        new.optimization.ClearField("execution_accelerators")
    if not new.optimization.ListFields():
        new.ClearField("optimization")
    return new


def _groups(*groups: tuple[int, Sequence[int]]) -> InstanceGroups:
    return tuple((count, GPU, tuple(gpus)) for count, gpus in groups)


NODE_GPUS = 2  # the 2×P100 node: the original lab's steps


def spread_gpus(gpus: int) -> tuple[int, ...]:
    """The GPUs a scaled step spreads over on a host with ``gpus`` GPUs: the node's two (0 and 1)
    where there are two or more, GPU 0 where there is one, none on a CPU."""
    if gpus < 0:
        raise ValueError(f"a host cannot have {gpus} GPUs")
    return (0, 1) if gpus >= 2 else (0,) if gpus == 1 else ()


def instance_steps(gpus: int, counts: Sequence[int] = (1, 2, 4)) -> list[tuple[int, tuple[int, ...]]]:
    """05's instance steps as (count per listed GPU, GPUs): the first on GPU 0, the others spread
    (``spread_gpus``). The node: 1 on GPU 0 → 2 on each of GPUs 0 and 1 → 4 on each; one GPU:
    1 → 2 → 4 on GPU 0; a CPU: the counts alone (no GPUs listed)."""
    spread = spread_gpus(gpus)
    return [(int(count), spread[:1] if i == 0 else spread) for i, count in enumerate(counts)]


def describe(count: int, gpus: Sequence[int]) -> str:
    """A step as the notebooks label it: "1 instance on GPU 0", "2 + 2 instances on GPUs 0 and 1"."""
    if not gpus:
        return f"{count} instance{'s' if count != 1 else ''} on the CPU"
    total = " + ".join([str(count)] * len(gpus))
    where = f"GPU {gpus[0]}" if len(gpus) == 1 else "GPUs " + " and ".join(map(str, gpus))
    return f"{total} instance{'s' if count * len(gpus) != 1 else ''} on {where}"


def python_scaling(gpus: int = NODE_GPUS) -> tuple[GpuExperiment, ...]:
    """05's Python-backend steps on a host with ``gpus`` GPUs (at least one)."""
    steps = instance_steps(max(1, gpus))
    return tuple(GpuExperiment("instance_scaling", describe(count, where), "food_classifier",
                               _groups(*((count, [g]) for g in where)),
                               concurrency=(1, 8, 16) if i == 0 else (8, 16))
                 for i, (count, where) in enumerate(steps))


def onnx_step(gpus: int, count: int = 2) -> tuple[int, tuple[int, ...]]:
    """06's scaled ONNX step: ``count`` per GPU over ``spread_gpus`` (the node: ``count: 2, gpus:
    [0, 1]``; one GPU: 2 on GPU 0; a CPU: ``count`` instances)."""
    return int(count), spread_gpus(gpus)


def onnx_scaling(gpus: int = NODE_GPUS) -> tuple[GpuExperiment, ...]:
    """06's ONNX-backend steps on a host with ``gpus`` GPUs (at least one)."""
    count, where = onnx_step(max(1, gpus))
    return (
        GpuExperiment("onnx_backend", "1 instance on GPU 0", "food_classifier_onnx", _groups((1, [0])),
                      concurrency=(1, 8, 16)),
        GpuExperiment("onnx_backend", f"count {count} over GPUs {list(where)}", "food_classifier_onnx",
                      _groups((count, where)), concurrency=(8, 16)),
    )


PYTHON_SCALING = python_scaling()  # the node's plans
ONNX_SCALING = onnx_scaling()
DYNAMIC_BATCHING = (
    GpuExperiment("dynamic_batching", "1 instance, no dynamic batching", "food_classifier_onnx",
                  _groups((1, [0])), concurrency=()),
    GpuExperiment("dynamic_batching", f"1 instance, dynamic batching {list(PREFERRED_BATCH_SIZES)} / "
                  f"{MAX_QUEUE_DELAY_US} µs",
                  "food_classifier_onnx", _groups((1, [0])), concurrency=(),
                  dynamic_batching=DynamicBatching()),
)
# one step beyond the original lab: the same model, TensorRT as a config change
TENSORRT = (
    GpuExperiment("tensorrt", "1 instance on GPU 0, CUDA execution provider", "food_classifier_onnx",
                  _groups((1, [0])), concurrency=(1, 8, 16)),
    GpuExperiment("tensorrt", "1 instance on GPU 0, TensorRT FP16 execution accelerator",
                  "food_classifier_onnx", _groups((1, [0])), concurrency=(1, 8, 16), tensorrt=TensorRT()),
)
GPU_EXPERIMENTS = (*PYTHON_SCALING, *ONNX_SCALING, *DYNAMIC_BATCHING, *TENSORRT)
# the lab's Poisson arrival rates on the GPU node (step 7), requests per second
GPU_REQUEST_RATES = {"constant_vs_poisson": (120,), "dynamic_batching": (180, 240, 300)}


def experiments(step: str | None = None) -> tuple[GpuExperiment, ...]:
    """The GPU experiments, all or those of one step."""
    chosen = tuple(e for e in GPU_EXPERIMENTS if step is None or e.step == step)
    if not chosen:
        steps = sorted({e.step for e in GPU_EXPERIMENTS})
        raise ValueError(f"no GPU experiments for step {step!r}: choose one of {', '.join(steps)}")
    return chosen


def experiment_config(experiment: GpuExperiment, staging_dir: Path = STAGING_DIR) -> ModelConfig:
    """The experiment's config, built from the model's staged config.pbtxt."""
    return experiment.apply(read_config(Path(staging_dir) / experiment.model))


def compute_capabilities(stack: Any) -> list[tuple[int, int]]:
    """The GPUs' compute capabilities on the stack's host (empty when it has no GPU)."""
    if not stack.has_gpu:
        return []
    result = stack.run(COMPUTE_CAP_QUERY, timeout=60)
    return parse_compute_capabilities(result.check().stdout)


def tensorrt_problem(capabilities: Sequence[tuple[int, int]]) -> str | None:
    """Why the TensorRT experiment cannot run on these GPUs, or None when it can."""
    if not capabilities:
        return "no GPU: the TensorRT execution accelerator needs an NVIDIA GPU (targets docker, chameleon)"
    old = [c for c in capabilities if c < TENSORRT_MIN_CAPABILITY]
    if old:
        found = ", ".join(sorted({f"{a}.{b}" for a, b in old}))
        need = ".".join(map(str, TENSORRT_MIN_CAPABILITY))
        return (f"GPU compute capability {found} is below {need}, the oldest TensorRT 10 (tritonserver "
                "24.10) supports (the P100 is 6.0): no TensorRT engine can be built with this image; the "
                "CUDA execution provider result stands alone")
    return None
