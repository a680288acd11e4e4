"""Is there a CUDA GPU here? Answered through the driver alone (``libcuda``), so
the ONNX service, the Triton stubs and the local stack can ask without importing
torch, and a CUDA build of an engine on a host without a GPU answers 0."""

from __future__ import annotations

import ctypes
import os


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
