"""Utilisation sampled while something runs: CPU per core, and GPUs where present.

Around any measurement (perf_analyzer, the FastAPI benchmark): ``with
Utilisation() as u: run(); u.summary()``. A background thread samples psutil's
per-core CPU load and, when NVML finds a GPU (nvidia-ml-py), each GPU's
utilisation and memory — the numbers nvtop shows in the original lab, kept as
data. A GPU's utilisation over the run comes from the driver's own samples
of that window; a run too short for any reads "not sampled" (None), never 0.
``pids`` adds the CPU of given processes and their children (e.g. the Triton
server and its Python-backend stubs), which on a shared machine says more
than the whole-host figure.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from typing import Any

import psutil


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


class Gpus:
    """NVML handles, or none on a host without an NVIDIA driver."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        self.uuids: list[str | None] = []  # by NVML index: to line up perf_analyzer's per-UUID figures
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception:  # no driver / no library: a CPU host
            self.handles = []
        for handle in self.handles:
            try:
                uuid = self.nvml.nvmlDeviceGetUUID(handle)
                self.uuids.append(uuid.decode() if isinstance(uuid, bytes) else str(uuid))
            except Exception:
                self.uuids.append(None)

    def util_since(self, since_us: int) -> list[list[float]]:
        """Per GPU, the driver's own utilisation samples taken after ``since_us`` (NVML's clock: µs since
        the epoch): what the GPU did during a window, however short. An empty list where the driver kept
        none (NVML answers NOT_FOUND) or cannot say."""
        out = []
        for handle in self.handles:
            try:
                _, samples = self.nvml.nvmlDeviceGetSamples(handle, self.nvml.NVML_GPU_UTILIZATION_SAMPLES,
                                                            since_us)
                out.append([float(s.sampleValue.uiVal) for s in samples if s.timeStamp > since_us])
            except Exception:  # no sample in the window, or a driver without the query
                out.append([])
        return out

    def sample(self) -> list[dict[str, float]]:
        out = []
        for handle in self.handles:
            try:
                util = self.nvml.nvmlDeviceGetUtilizationRates(handle)
                memory = self.nvml.nvmlDeviceGetMemoryInfo(handle)
                out.append({"util_pct": float(util.gpu), "mem_used_mib": memory.used / 2**20,
                            "mem_total_mib": memory.total / 2**20})
            except Exception:
                out.append({"util_pct": float("nan"), "mem_used_mib": float("nan"),
                            "mem_total_mib": float("nan")})
        return out


class Utilisation:
    """Background sampler; a context manager. ``interval`` seconds between samples."""

    def __init__(self, interval: float = 0.5, pids: Sequence[int] = ()) -> None:
        self.interval = interval
        self.pids = list(pids)
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._gpus: Gpus | None = None
        self._procs: dict[int, psutil.Process] = {}
        self.started = self.stopped = 0.0
        self._since_us = 0  # NVML's clock at the start
        self._gpu_window: list[list[float]] = []  # per GPU: the driver's samples during the run

    def _tracked(self) -> list[psutil.Process]:
        """The given processes and all their current children (new stubs appear on reload)."""
        found: list[psutil.Process] = []
        for pid in self.pids:
            with contextlib.suppress(psutil.Error):
                root = self._procs.setdefault(pid, psutil.Process(pid))
                for proc in [root, *root.children(recursive=True)]:
                    found.append(self._procs.setdefault(proc.pid, proc))
        return found

    def _sample(self) -> dict[str, Any]:
        sample: dict[str, Any] = {"t": time.monotonic() - self.started,
                                  "cpu_per_core": psutil.cpu_percent(percpu=True)}
        if self.pids:
            total = 0.0
            for proc in self._tracked():
                with contextlib.suppress(psutil.Error):
                    total += proc.cpu_percent(None)
            sample["proc_cpu_pct"] = total
        if self._gpus and self._gpus.handles:
            sample["gpus"] = self._gpus.sample()
        return sample

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append(self._sample())

    def start(self) -> Utilisation:
        self._gpus = Gpus()
        self.started = time.monotonic()
        self._since_us = int(time.time() * 1e6)
        psutil.cpu_percent(percpu=True)  # prime: the first call has no interval to measure over
        for proc in self._tracked():
            with contextlib.suppress(psutil.Error):
                proc.cpu_percent(None)
        self._thread = threading.Thread(target=self._loop, name="utilisation", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.interval * 4 + 1)
        if not self.samples or time.monotonic() - self.started > self.interval / 2:
            self.samples.append(self._sample())  # at least one sample, even for a short run
        self.stopped = time.monotonic()
        if self._gpus and self._gpus.handles:
            self._gpu_window = self._gpus.util_since(self._since_us)
        return self.summary()

    def __enter__(self) -> Utilisation:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def summary(self) -> dict[str, Any]:
        """Mean/max per measure, flat (for one results row), plus per-core means."""
        cores = [s["cpu_per_core"] for s in self.samples]
        per_core_mean = [_mean([c[i] for c in cores]) for i in range(len(cores[0]))] if cores else []
        host = [_mean(c) for c in cores]
        out: dict[str, Any] = {
            "util_samples": len(self.samples),
            "util_duration_s": round((self.stopped or time.monotonic()) - self.started, 2),
            "cpu_mean_pct": round(_mean(host), 1),
            "cpu_max_pct": round(max(host), 1) if host else float("nan"),
            "cpu_per_core_mean_pct": [round(v, 1) for v in per_core_mean],
        }
        if self.pids:
            procs = [s.get("proc_cpu_pct", 0.0) for s in self.samples]
            out["proc_cpu_mean_pct"] = round(_mean(procs), 1)
            out["proc_cpu_max_pct"] = round(max(procs), 1) if procs else float("nan")
        gpu_samples = [s["gpus"] for s in self.samples if "gpus" in s]
        out["gpu_count"] = len(gpu_samples[0]) if gpu_samples else 0
        methods = []
        for index in range(out["gpu_count"]):
            util, method = self._gpu_util(index, [g[index]["util_pct"] for g in gpu_samples],
                                          out["util_duration_s"])
            memory = [g[index]["mem_used_mib"] for g in gpu_samples]
            out[f"gpu{index}_util_mean_pct"] = round(_mean(util), 1) if util else None
            out[f"gpu{index}_util_max_pct"] = round(max(util), 1) if util else None
            out[f"gpu{index}_util_samples"] = len(util)
            out[f"gpu{index}_util_method"] = method
            methods.append(method)
            out["gpu_util_method"] = ", ".join(dict.fromkeys(methods))  # each GPU's, once
            out[f"gpu{index}_mem_max_mib"] = round(max(memory), 1)
            uuids = self._gpus.uuids if self._gpus else []
            if index < len(uuids) and uuids[index]:
                out[f"gpu{index}_uuid"] = uuids[index]
        return out

    # NVML's utilisation is a moving average over its last sample period (1/6 s to 1 s by GPU): a poll
    # of a shorter run reads mostly what came before it. Why: docs/decisions/2026-11-26-gpu-utilisation.md
    POLLED_MIN_S = 1.0

    def _gpu_util(self, index: int, polled: list[float], duration_s: float) -> tuple[list[float], str]:
        """One GPU's utilisation figures for the summary and how they were taken: the driver's own
        samples in the window ("nvml samples"); else the polls, for a run long enough for them
        ("nvml polled"); else none ("not sampled": a run shorter than NVML's averaging period)."""
        window = self._gpu_window[index] if index < len(self._gpu_window) else []
        if window:
            return window, "nvml samples"
        polled = [u for u in polled if u == u]
        if polled and duration_s >= self.POLLED_MIN_S:
            return polled, "nvml polled"
        return [], "not sampled"

    def frame(self) -> Any:
        """Samples as a DataFrame (time, CPU per core, GPU utilisation) for plotting."""
        import pandas as pd

        rows = []
        for s in self.samples:
            row: dict[str, Any] = {"t": s["t"]}
            row.update({f"cpu{i}_pct": v for i, v in enumerate(s["cpu_per_core"])})
            if "proc_cpu_pct" in s:
                row["proc_cpu_pct"] = s["proc_cpu_pct"]
            for i, g in enumerate(s.get("gpus", [])):
                row[f"gpu{i}_util_pct"] = g["util_pct"]
                row[f"gpu{i}_mem_used_mib"] = g["mem_used_mib"]
            rows.append(row)
        return pd.DataFrame(rows)
