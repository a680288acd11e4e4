"""The two inference engines (PyTorch, ONNX Runtime), which device each runs on, and their warm-up.

Contract: an engine turns a float32 batch [N,3,224,224] into logits [N,11]
with ``infer(batch, alone=...)``; ``alone`` says whether other inference
workers are busy, so an engine can use every core for a lone request and one
core beside the others. An engine runs on a GPU only when its build can run
that GPU, else on the CPU with a warning. torch is imported lazily: the ONNX
service must run without it.

ONNX Runtime variables (CUDA provider only unless said): ``ORT_ALLOW_SPINNING``
[worker 0 alone: 1, else 0; CPU too], ``ORT_PAD_BATCHES`` [1: pad every batch
to ``MAX_BATCH``], ``ORT_CUDNN_CONV_ALGO_SEARCH`` [HEURISTIC, read by
``servelab.core.gpu``].
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from servelab.core import gpu
from servelab.core.gpu import ort_has_cuda, ort_providers, pad_rows
from servelab.core.model import ONNX_INPUT, ONNX_OUTPUT, require_file

LOG = logging.getLogger("uvicorn.error")  # uvicorn configures this logger before importing the app


class Backend(Protocol):
    """An inference engine: a float32 batch [N,3,224,224] → logits [N,11]."""

    name: str
    device: str
    pad_to: int | None  # every batch is padded to this many rows (one shape), or None

    def infer(self, batch: np.ndarray, alone: bool = True) -> np.ndarray: ...


# ----------------------------------------------------------------------------- which device
# why: docs/decisions/2026-11-22-fastapi-engines-fall-back-to-the-cpu.md

def torch_gpu_usable(torch: Any) -> bool:
    """``servelab.core.gpu.torch_gpu_usable``, its warning in the server's log."""
    return gpu.torch_gpu_usable(torch, warn=LOG.warning)


@functools.cache
def torch_gpu_here() -> bool:
    """``torch_gpu_usable`` for this process's torch, decided (and warned about) once per process."""
    import torch

    return torch_gpu_usable(torch)


def engine_uses_gpu(kind: str) -> bool:
    """Will the ``kind`` ("pt"/"onnx") engine run on a GPU here? Decides the settings' defaults.

    Asked before the model is loaded, with the same test the engines apply:
    torch can run the GPU, or onnxruntime has the CUDA provider and the driver
    shows a device (every onnxruntime-gpu build lists the provider, GPU or not).
    """
    if kind == "pt":
        return torch_gpu_here()
    import onnxruntime as ort

    return ort_has_cuda(ort)


def first_pass_works(session: Any) -> bool:
    """One pass on a blank image: False when the engine cannot run on its device at all."""
    try:
        session.run([ONNX_OUTPUT], {ONNX_INPUT: np.zeros((1, 3, 224, 224), dtype=np.float32)})
    except Exception as exc:  # onnxruntime raises its own Fail/RuntimeException types
        LOG.warning("first pass failed: %s", exc)
        return False
    return True


# ----------------------------------------------------------------------------- the engines

class OnnxBackend:
    """ONNX Runtime session: CUDAExecutionProvider when the build and host have it, else CPU.

    ``threads`` intra-op threads when alone; ``shared_threads`` (one session
    more, never spinning) when other workers are busy; None: one session.
    On CUDA every batch is padded to ``pad_to`` rows, one shape.
    """

    name = "onnxruntime"

    def __init__(self, path: Path, threads: int, shared_threads: int | None = None,
                 pad_to: int | None = None) -> None:
        import onnxruntime as ort

        providers = ort_providers(ort)

        def session(intra_threads: int, spin: str) -> Any:
            options = ort.SessionOptions()
            options.intra_op_num_threads = intra_threads
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning",
                                             os.environ.get("ORT_ALLOW_SPINNING", spin))
            return ort.InferenceSession(str(path), options, providers=providers)

        # why: docs/decisions/2026-11-22-fastapi-cpu-threads-and-workers.md (spinning alone only)
        spin_alone = "1" if shared_threads is not None else "0"
        self.session = session(threads, spin_alone)
        if len(providers) > 1 and not first_pass_works(self.session):
            LOG.warning("ONNX Runtime's CUDA provider failed a first pass on this GPU: using the CPU")
            providers = ["CPUExecutionProvider"]
            self.session = session(threads, spin_alone)
        self.shared_session = session(shared_threads, "0") if shared_threads is not None else self.session
        self.providers = self.session.get_providers()
        self.device = "cuda" if self.providers[0] == "CUDAExecutionProvider" else "cpu"
        # why: docs/decisions/2026-11-22-fastapi-onnxruntime-cuda-padding.md
        wanted_pad = os.environ.get("ORT_PAD_BATCHES", "1") != "0"
        self.pad_to = pad_to if self.device == "cuda" and wanted_pad else None

    def infer(self, batch: np.ndarray, alone: bool = True) -> np.ndarray:
        session = self.session if alone else self.shared_session
        return session.run([ONNX_OUTPUT], {ONNX_INPUT: pad_rows(batch, self.pad_to)})[0][:len(batch)]


def own_thread_count(torch: Any, threads: int) -> None:
    """Give the calling thread ``threads`` intra-op threads that no other thread can change later.

    PyTorch sets a thread's OpenMP count up lazily, at its first parallel op,
    from whatever ``set_num_threads`` anywhere in the process left last;
    asking for the count first runs that set-up now, so ours sticks.
    """
    # why: docs/decisions/2026-11-22-fastapi-torch-thread-count-race.md
    torch.get_num_threads()
    torch.set_num_threads(threads)


class TorchBackend:
    """PyTorch eager MobileNetV2 on CUDA when torch can run the GPU, else CPU with ``threads`` threads.

    Build it on the thread that will call ``infer``: each thread owns its
    OpenMP team. ``shared_threads``: the count while other workers are busy.
    """

    name = "pytorch"
    pad_to: int | None = None  # batches go to the engine as they come

    def __init__(self, path: Path, threads: int, shared_threads: int | None = None) -> None:
        import torch

        from servelab.core.model import load_model

        own_thread_count(torch, threads)
        self._torch = torch
        self._threads = {True: threads, False: shared_threads or threads}
        self._current = threads
        self.device = "cuda" if torch_gpu_here() else "cpu"
        self.model = load_model(path, self.device)

    def infer(self, batch: np.ndarray, alone: bool = True) -> np.ndarray:
        torch = self._torch
        wanted = self._threads[alone]
        if wanted != self._current:  # per calling thread: each worker owns its OpenMP team
            torch.set_num_threads(wanted)
            self._current = wanted
        with torch.inference_mode():
            logits = self.model(torch.from_numpy(batch).to(self.device))
        return logits.float().cpu().numpy()


def load_backend(kind: str, path: Path, threads: int, shared_threads: int | None = None,
                 max_batch: int | None = None) -> Backend:
    """``"onnx"`` or ``"pt"`` → a ready backend; ``FileNotFoundError`` naming the build command if missing.

    ``shared_threads``: intra-op threads to use when other inference workers are
    busy at the same time (``infer(batch, alone=False)``); None: always ``threads``.
    ``max_batch``: the largest batch it will get (ONNX Runtime on CUDA pads to it).
    """
    require_file(path)
    if kind == "onnx":
        return OnnxBackend(path, threads, shared_threads, pad_to=max_batch)
    if kind == "pt":
        return TorchBackend(path, threads, shared_threads)
    raise ValueError(f"unknown backend {kind!r}: use 'pt' or 'onnx'")


def warm_up(backend: Backend, max_batch: int) -> None:
    """Passes before the first client, so it does not pay for allocation and set-up.

    CPU: batch 1 and ``max_batch``. GPU: every batch size the batcher can
    form (each new shape costs cuDNN/cuBLAS set-up once), or the one padded
    shape of an engine that pads.
    """
    if backend.device != "cuda":
        sizes: list[int] = sorted({1, max_batch})
    elif backend.pad_to:
        sizes = [backend.pad_to]
    else:
        sizes = list(range(1, max_batch + 1))
    for size in sizes:
        backend.infer(np.zeros((size, 3, 224, 224), dtype=np.float32))
