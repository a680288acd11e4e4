"""The service's Prometheus metrics: requests, errors, latency, requests in flight, batch sizes, pass times,
the stages of each /predict request, and the worker processes that have the model loaded.

Each app gets a registry of its own, so two apps can share a process (tests).
``MetricsMiddleware`` (``http.py``) records the HTTP side and the stages; the micro-batcher
reports every forward pass to ``observe_batch``.

With several worker processes (``WORKERS``; ``serve.py`` sets ``PROMETHEUS_MULTIPROC_DIR`` for them
before any of them imports prometheus_client) each process writes its samples to files in that
folder and ``exposition`` sums every process's, so whichever worker answers ``/metrics`` reports
them all; the gauges count live processes only (``livesum``), and a worker that died leaves its
counts in the totals but not in the gauges.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess

from servelab.serving.settings import MULTIPROC_VARIABLE
from servelab.serving.stages import STAGES, Stopwatch

STAGE_BUCKETS = (0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0,
                 5.0, 10.0)
_LIVE_FILE = re.compile(r"gauge_live\w*?_(\d+)\.db")


def multiprocess_dir() -> Path | None:
    """The folder the worker processes share their samples in, when there is one."""
    value = os.environ.get(MULTIPROC_VARIABLE)
    return Path(value) if value else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process with that number: alive
        return True
    return True


def forget_dead_workers(directory: Path) -> list[int]:
    """Drop the live-gauge files of worker processes that are gone (killed, replaced); their pids."""
    dead = sorted({int(m.group(1)) for p in directory.glob("gauge_live*.db")
                   if (m := _LIVE_FILE.fullmatch(p.name)) and not _alive(int(m.group(1)))})
    for pid in dead:
        with contextlib.suppress(OSError):
            multiprocess.mark_process_dead(pid, str(directory))
    return dead


class Metrics:
    """The service's Prometheus metrics, in a registry of its own (two apps can share a process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("http_requests_total", "HTTP requests by path and status code",
                                ["path", "status"], registry=self.registry)
        self.errors = Counter("http_errors_total", "HTTP responses with status >= 400",
                              ["path", "status"], registry=self.registry)
        self.latency = Histogram(
            "http_request_duration_seconds", "Time from request to response", ["path"],
            buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0),
            registry=self.registry)
        self.in_flight = Gauge("http_requests_in_flight", "Requests being handled now",
                               registry=self.registry, multiprocess_mode="livesum")
        self.batch_size = Histogram("inference_batch_size", "Images per forward pass",
                                    buckets=(1, 2, 4, 8, 16, 32, 64), registry=self.registry)
        self.infer_seconds = Histogram(
            "inference_seconds", "Time of one forward pass",
            buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0), registry=self.registry)
        self.stage_seconds = Histogram(
            "predict_stage_seconds", "Time a served /predict request spent in each stage "
            "(servelab/serving/stages.py); the stages of one request add up to its time in the app",
            ["stage"], buckets=STAGE_BUCKETS, registry=self.registry)
        self._stages = {stage: self.stage_seconds.labels(stage) for stage in STAGES}  # looked up once
        self.workers = Gauge("service_workers_ready", "Worker processes with the model loaded",
                             registry=self.registry, multiprocess_mode="livesum")
        self.model_loads = Counter("model_loads_total", "Times a worker process loaded the model",
                                   registry=self.registry)

    def observe_batch(self, size: int, seconds: float) -> None:
        self.batch_size.observe(size)
        self.infer_seconds.observe(seconds)

    def observe_stages(self, watch: Stopwatch) -> None:
        """One served request's stages (those it passed; a stage it skipped counts as 0)."""
        for stage, histogram in self._stages.items():
            histogram.observe(watch.seconds.get(stage, 0.0))

    def model_loaded(self) -> None:
        self.model_loads.inc()
        self.workers.inc()

    def model_unloaded(self) -> None:
        self.workers.dec()

    def exposition(self) -> bytes:
        """The /metrics page: this process's registry, or every worker's samples summed."""
        directory = multiprocess_dir()
        if directory is None:
            return generate_latest(self.registry)
        forget_dead_workers(directory)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=str(directory))
        return generate_latest(registry)
