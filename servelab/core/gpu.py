"""Is there a CUDA GPU here, and how ONNX Runtime is run on one.

``cuda_device_count`` answers through the driver alone (``libcuda``), so the
ONNX service and the Triton stubs can ask without importing torch, and a CUDA
build of an engine on a host without a GPU answers 0."""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np


def cuda_device_count() -> int:
    """CUDA devices the driver shows this process (0 without a driver or GPU).

    ``CUDA_VISIBLE_DEVICES`` is honoured by the driver itself, so a container
    given one GPU, or a shell that hides them all, gets the right answer.
    """
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return 0
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:  # no NVIDIA driver on this host
        return 0
    count = ctypes.c_int(0)
    if libcuda.cuInit(0) != 0 or libcuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


def _arch(name: str) -> tuple[str, int, int]:
    """``"sm_86"`` → ("sm", 8, 6); ``"compute_90a"`` → ("compute", 9, 0)."""
    kind, _, number = name.partition("_")
    digits = number.rstrip("abcdefghijklmnopqrstuvwxyz")
    return kind, int(digits[:-1] or 0), int(digits[-1:] or 0)


def torch_gpu_usable(torch: Any, device: int = 0, warn: Any = None) -> bool:
    """CUDA is there and this torch build has kernels for GPU ``device`` (else False, and ``warn`` is
    called with one line saying why: the FastAPI engine and the Triton model then use the CPU).

    ``torch.cuda.is_available()`` is also true for a GPU the build cannot run.
    Machine code (``sm_XY``) runs on its own major version at an equal or
    higher minor one; PTX (``compute_XY``) is compiled for any newer GPU.
    Why: docs/decisions/2026-11-22-fastapi-engines-fall-back-to-the-cpu.md
    """
    if not torch.cuda.is_available():
        return False
    major, minor = torch.cuda.get_device_capability(device)
    for kind, a_major, a_minor in (_arch(a) for a in torch.cuda.get_arch_list()):
        if kind == "sm" and a_major == major and a_minor <= minor:
            return True
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return True
    if warn is not None:
        warn(f"GPU {torch.cuda.get_device_name(device)} (sm_{major}{minor}) is not supported by this torch "
             f"build (kernels for {', '.join(torch.cuda.get_arch_list())}): using the CPU")
    return False


GPUS_SETTING = "SERVELAB_GPUS"


def gpu_count(query: Any = None) -> int:
    """GPUs the local target's Triton plans use on this host: ``SERVELAB_GPUS`` (a count; 0 keeps
    Triton's models on KIND_CPU; the other engines pick their device themselves) over what the driver
    shows (``query``, default ``cuda_device_count``; tests pass a stand-in).

    A setting above what the driver shows is refused: a plan for GPUs that are not there fails later
    and less clearly."""
    found = int((query or cuda_device_count)())
    setting = os.environ.get(GPUS_SETTING, "").strip().lower()
    if setting in ("", "auto"):
        return found
    if not setting.isdigit():
        raise ValueError(f"{GPUS_SETTING}={setting!r}: give a number of GPUs (0 for the CPU only) or auto")
    if int(setting) > found:
        raise ValueError(f"{GPUS_SETTING}={setting} but the driver shows {found} GPU(s) here")
    return int(setting)


COMPUTE_CAP_QUERY = ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"]


def parse_compute_capabilities(text: str) -> list[tuple[int, int]]:
    """``nvidia-smi --query-gpu=compute_cap --format=csv,noheader`` output → [(major, minor), …]."""
    caps = []
    for line in text.split():
        major, _, minor = line.strip().partition(".")
        caps.append((int(major), int(minor or 0)))
    return caps


# ----------------------------------------------------------------------------- ONNX Runtime on CUDA
# Shared by the FastAPI ONNX service (servelab.serving) and the Triton ONNX
# runner (servelab/triton/onnx_runner_model.py), which must stay free of heavy
# imports: only os, ctypes and numpy here.

def ort_has_cuda(ort: Any) -> bool:
    """onnxruntime has the CUDA provider AND the driver shows a GPU.

    Every onnxruntime-gpu build lists the provider, GPU or not.
    """
    return "CUDAExecutionProvider" in ort.get_available_providers() and cuda_device_count() > 0


def ort_providers(ort: Any, device_id: int = 0) -> list[Any]:
    """The providers to ask for: CUDA first where ``ort_has_cuda``, the CPU always.

    The CUDA provider's default cuDNN search, EXHAUSTIVE, benchmarks every
    algorithm of every convolution for a new input shape; HEURISTIC
    (``ORT_CUDNN_CONV_ALGO_SEARCH``) picks at once. Changing shapes stay dear
    all the same: see ``pad_rows``.
    """
    if not ort_has_cuda(ort):
        return ["CPUExecutionProvider"]
    if hasattr(ort, "preload_dlls"):
        ort.preload_dlls()  # CUDA/cuDNN from the nvidia-* wheels (onnxruntime-gpu[cuda,cudnn])
    search = os.environ.get("ORT_CUDNN_CONV_ALGO_SEARCH", "HEURISTIC")
    return [("CUDAExecutionProvider", {"device_id": device_id, "cudnn_conv_algo_search": search}),
            "CPUExecutionProvider"]


def pad_rows(batch: np.ndarray, rows: int | None) -> np.ndarray:
    """``batch`` zero-padded to ``rows`` rows (unchanged when it has that many, or ``rows`` is None/0).

    On CUDA every batch is padded to one size, so ONNX Runtime's session only ever sees one shape.
    """
    # why: docs/decisions/2026-11-22-fastapi-onnxruntime-cuda-padding.md
    if not rows or len(batch) >= rows:
        return batch
    padded = np.zeros((rows, *batch.shape[1:]), dtype=batch.dtype)
    padded[:len(batch)] = batch
    return padded
