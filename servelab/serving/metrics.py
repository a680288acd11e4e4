"""The service's Prometheus metrics: requests, errors, latency, requests in flight, batch sizes, pass times.

Each app gets a registry of its own, so two apps can share a process (tests).
``MetricsMiddleware`` (``http.py``) records the HTTP side; the micro-batcher
reports every forward pass to ``observe_batch``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


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
                               registry=self.registry)
        self.batch_size = Histogram("inference_batch_size", "Images per forward pass",
                                    buckets=(1, 2, 4, 8, 16, 32, 64), registry=self.registry)
        self.infer_seconds = Histogram(
            "inference_seconds", "Time of one forward pass",
            buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0), registry=self.registry)

    def observe_batch(self, size: int, seconds: float) -> None:
        self.batch_size.observe(size)
        self.infer_seconds.observe(seconds)
