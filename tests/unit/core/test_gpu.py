"""``servelab.core.gpu.cuda_device_count`` against a stand-in driver: the exact count, not merely
a plausible one (it replaces ``cuda_device_count() >= 0``, true of any int)."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest


class FakeDriver:
    """A stand-in for ``libcuda.so.1``: ``cuInit`` returns ``init_status``, then ``devices`` GPUs."""

    def __init__(self, devices: int, init_status: int = 0) -> None:
        self.devices = devices
        self.init_status = init_status

    def cuInit(self, flags: int) -> int:  # noqa: N802 (the driver API's names)
        return self.init_status

    def cuDeviceGetCount(self, count: Any) -> int:  # noqa: N802
        ctypes.cast(count, ctypes.POINTER(ctypes.c_int))[0] = self.devices  # count: byref(c_int)
        return 0


def with_driver(monkeypatch: pytest.MonkeyPatch, driver: FakeDriver | None) -> None:
    def load(name: str, *args: object, **kwargs: object) -> FakeDriver:
        assert name == "libcuda.so.1"
        if driver is None:
            raise OSError("libcuda.so.1: cannot open shared object file")
        return driver

    monkeypatch.setattr(ctypes, "CDLL", load)


@pytest.mark.parametrize(("driver", "visible", "expected"), [
    (FakeDriver(2), None, 2),              # the driver's own count
    (FakeDriver(1), "0", 1),
    (FakeDriver(2), "", 0),                # a shell that hides every GPU
    (FakeDriver(2), "-1", 0),
    (FakeDriver(2, init_status=100), None, 0),  # CUDA_ERROR_NO_DEVICE from cuInit
    (None, None, 0),                        # no NVIDIA driver on this host
], ids=["driver-says-2", "one-visible", "all-hidden", "minus-one-hides", "cuinit-fails", "no-driver"])
def test_cuda_device_count_is_what_the_driver_says(monkeypatch: pytest.MonkeyPatch, driver: FakeDriver | None,
                                                   visible: str | None, expected: int) -> None:
    from servelab.core.gpu import cuda_device_count

    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    with_driver(monkeypatch, driver)
    assert cuda_device_count() == expected


def test_cuda_device_count_agrees_with_torch_here() -> None:
    """On this host, GPU or not, the driver-only count equals PyTorch's (which asks the CUDA runtime)."""
    import torch

    from servelab.core.gpu import cuda_device_count

    assert cuda_device_count() == torch.cuda.device_count()
