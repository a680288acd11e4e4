"""GPU utilisation over a measurement: the driver's own samples of the window, or "not sampled" — never
the 0.0 a poll of a short run reads. The driver is a stand-in held to the real pynvml's API."""

from __future__ import annotations

import inspect
import sys
import time
import types

import pynvml
import pytest

from servelab.core.monitor import Utilisation
from servelab.triton.experiments import gpu_utilisation

UUID = "GPU-41ca7adb-efa2-eb78-0907-e6f3c253be0a"


def stand_in(window: list[float] | None, polled: float = 0.0) -> types.ModuleType:
    """A pynvml with one GPU whose moving average reads ``polled`` and whose driver kept ``window``
    (utilisation samples after the start; None: NVML answers NOT_FOUND)."""
    fake = types.ModuleType("pynvml")

    def get_samples(handle: object, sampling_type: int, last_seen: int) -> tuple[int, list[object]]:
        assert sampling_type == pynvml.NVML_GPU_UTILIZATION_SAMPLES and last_seen > 1.7e15  # µs, epoch
        if window is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        before = types.SimpleNamespace(timeStamp=last_seen - 5, sampleValue=types.SimpleNamespace(uiVal=99))
        return 1, [before, *(types.SimpleNamespace(timeStamp=last_seen + 1000 * (i + 1),
                                                   sampleValue=types.SimpleNamespace(uiVal=int(v)))
                             for i, v in enumerate(window))]

    fake.__dict__.update(
        nvmlInit=lambda: None, nvmlDeviceGetCount=lambda: 1, nvmlDeviceGetHandleByIndex=lambda index: "h0",
        nvmlDeviceGetUUID=lambda handle: UUID,
        nvmlDeviceGetUtilizationRates=lambda handle: types.SimpleNamespace(gpu=polled, memory=0),
        nvmlDeviceGetMemoryInfo=lambda handle: types.SimpleNamespace(used=2**30, total=80 * 2**30),
        nvmlDeviceGetSamples=get_samples, NVML_GPU_UTILIZATION_SAMPLES=pynvml.NVML_GPU_UTILIZATION_SAMPLES)
    return fake


def test_the_stand_in_is_held_to_the_real_pynvml() -> None:
    for name, value in vars(stand_in([])).items():
        if name.startswith("nvml") and callable(value):
            real = getattr(pynvml, name)
            required = [p for p in inspect.signature(real).parameters.values() if p.default is p.empty]
            assert len(inspect.signature(value).parameters) == len(required), name
        elif name.startswith("NVML_"):
            assert getattr(pynvml, name) == value


def _measure(monkeypatch: pytest.MonkeyPatch, fake: types.ModuleType, seconds: float = 0.3) -> dict:
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with Utilisation(interval=0.1) as util:
        time.sleep(seconds)
    return util.summary()


def test_a_short_run_reads_the_drivers_samples_of_its_window(monkeypatch: pytest.MonkeyPatch) -> None:
    summary = _measure(monkeypatch, stand_in([40, 12, 26]))  # the poll reads 0.0, as the GPU run saw
    assert summary["gpu0_util_mean_pct"] == 26.0 and summary["gpu0_util_max_pct"] == 40.0
    assert summary["gpu0_util_samples"] == 3 and summary["gpu_util_method"] == "nvml samples"


def test_a_short_run_without_driver_samples_is_not_sampled_not_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Utilisation, "POLLED_MIN_S", 60.0)  # "short" however slowly a loaded CI stops it
    summary = _measure(monkeypatch, stand_in(None))
    assert summary["gpu0_util_mean_pct"] is None and summary["gpu_util_method"] == "not sampled"
    assert summary["gpu0_mem_max_mib"] == 1024.0  # memory is still read
    # Triton's own figure (perf_analyzer's --collect-metrics) then stands in, where there is one
    merged = gpu_utilisation({"Avg GPU Utilization": f"{UUID}:0.37;"}, summary)
    assert merged["gpu_util_source"] == "perf_analyzer" and merged["gpu0_util_mean_pct"] == 37.0, merged


def test_a_run_longer_than_nvmls_period_may_use_its_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Utilisation, "POLLED_MIN_S", 0.2)
    summary = _measure(monkeypatch, stand_in(None, polled=55.0), seconds=0.35)
    assert summary["gpu0_util_mean_pct"] == 55.0 and summary["gpu_util_method"] == "nvml polled"
