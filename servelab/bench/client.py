"""The benchmark's HTTP client: N sequential requests from one client, M from concurrent clients.

``run_sequential`` and ``run_concurrent`` return the lab's figures (median, p95, p99 latency,
throughput, the median's spread) as a dict, for notebooks and ``servelab.results.store.append_rows``.
The client is the standard library's ``http.client``: bodies encoded up front, one keep-alive
connection per client thread, a dropped connection reopened once and retried. Each answer's
``Server-Timing`` header (the service's stages, ``servelab.serving.stages``) is read, and a
measurement reports each stage's mean beside the client's latency (``stage_means``).
"""
# why: docs/decisions/2026-11-22-bench-stdlib-http-client.md

from __future__ import annotations

import base64
import http.client
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from servelab.core.progress import bar as tqdm
from servelab.core.samples import sample_paths
from servelab.results.schema import robust_spread
from servelab.serving.stages import OUTSIDE_COLUMN, STAGE_COLUMNS, parse_server_timing, stage_means

DEFAULT_SEQUENTIAL = 100
DEFAULT_CONCURRENT = 1000
DEFAULT_CONCURRENCY = 16
REQUEST_TIMEOUT_S = 60.0
ImageSource = Sequence[Path | bytes] | None


class BenchError(RuntimeError):
    """The benchmark could not measure (service down, every request failed…)."""


# ----------------------------------------------------------------------------- HTTP client side

def request_bodies(images: ImageSource = None) -> list[bytes]:
    """JSON bodies ``{"image": <base64>}`` for image files or bytes (default: the sample photos)."""
    sources = list(images) if images is not None else sample_paths()
    if not sources:
        raise BenchError("no images to send: data/samples/ is empty (python -m servelab.core.samples)")
    raw = [src if isinstance(src, bytes) else Path(src).read_bytes() for src in sources]
    return [json.dumps({"image": base64.b64encode(data).decode()}).encode() for data in raw]


def _predict_url(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/predict") else f"{url}/predict"


class Connection:
    """One persistent HTTP/1.1 connection that POSTs JSON bodies to one URL."""

    def __init__(self, url: str, timeout: float = REQUEST_TIMEOUT_S) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BenchError(f"not an http(s) URL: {url!r}")
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self.path = parts.path or "/"
        self.conn = kind(parts.hostname, parts.port, timeout=timeout)

    def post(self, body: bytes) -> int:
        """Send one request and read the whole answer: its status, or 0 when the connection failed."""
        return self.post_timed(body)[0]

    def post_timed(self, body: bytes) -> tuple[int, dict[str, float]]:
        """``post``, and the answer's ``Server-Timing`` as {stage: ms} ({} without one)."""
        for attempt in range(2):  # the server may have closed an idle keep-alive connection
            try:
                self.conn.request("POST", self.path, body=body, headers={"Content-Type": "application/json"})
                response = self.conn.getresponse()
                response.read()
                timing = response.getheader("server-timing")
                return response.status, parse_server_timing(timing) if timing else {}
            except (http.client.HTTPException, OSError):
                self.conn.close()
                if attempt:
                    return 0, {}
        return 0, {}

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _timed_post(client: Connection, body: bytes) -> tuple[float, int, dict[str, float]]:
    """One request: (seconds, status code, its stages); a connection error counts as status 0."""
    started = time.perf_counter()
    status, timing = client.post_timed(body)
    return time.perf_counter() - started, status, timing


def summarise(latencies_s: Sequence[float], wall_s: float, errors: int = 0,
              timings: Sequence[dict[str, float]] = (), **extra: Any) -> dict[str, Any]:
    """Latencies of the successful requests (in the order they finished) + the wall time → the figures
    the lab reports. ``median_spread`` is the noise of the median: (max − min) / mean of the medians of
    the run's first, second and last third, without the one farthest from the others (one slow third
    cannot widen it: ``robust_spread``; None below 9 requests); ``median_thirds_ms`` keeps all three.
    ``timings``: the successful answers' stages, whose means (``stage_means``) come after the client's
    figures."""
    if not latencies_s:
        raise BenchError(f"every request failed ({errors} errors): is the service up and healthy?")
    ms = np.asarray(latencies_s) * 1000.0
    thirds = [float(np.median(part)) for part in np.array_split(ms, 3)] if len(ms) >= 9 else []
    return {
        **extra,
        "requests": len(ms) + errors,
        "errors": errors,
        "median_ms": float(np.percentile(ms, 50)),
        "p95_ms": float(np.percentile(ms, 95)),
        "p99_ms": float(np.percentile(ms, 99)),
        "median_spread": robust_spread(thirds) if thirds else None,
        "median_thirds_ms": [round(t, 3) for t in thirds] if thirds else None,
        "mean_ms": float(ms.mean()),
        "throughput_rps": len(ms) / wall_s if wall_s > 0 else float("nan"),
        "wall_s": wall_s,
        **stage_means(list(timings), float(ms.mean())),
    }


def _warm_up(url: str, bodies: list[bytes], count: int) -> None:
    with Connection(url) as client:
        for i in range(count):
            client.post(bodies[i % len(bodies)])


def run_sequential(url: str, n: int = DEFAULT_SEQUENTIAL, images: ImageSource = None,
                   warmup: int = 5, progress: bool = True) -> dict[str, Any]:
    """``n`` requests one after another from one client (the lab's single-user latency)."""
    url, bodies = _predict_url(url), request_bodies(images)
    _warm_up(url, bodies, warmup)
    latencies, timings, errors = [], [], 0
    with Connection(url) as client:
        started = time.perf_counter()
        for i in tqdm(range(n), desc="sequential", unit="req", disable=not progress,
                      mininterval=1.0):
            seconds, status, timing = _timed_post(client, bodies[i % len(bodies)])
            if status == 200:
                latencies.append(seconds)
                timings.append(timing)
            else:
                errors += 1
        wall = time.perf_counter() - started
    return summarise(latencies, wall, errors, timings, mode="sequential", url=url, concurrency=1)


def run_concurrent(url: str, n: int = DEFAULT_CONCURRENT, concurrency: int = DEFAULT_CONCURRENCY,
                   images: ImageSource = None, warmup: int = 16, progress: bool = True) -> dict[str, Any]:
    """``n`` requests in total from ``concurrency`` clients, each sending its next as soon as one returns."""
    url, bodies = _predict_url(url), request_bodies(images)
    _warm_up(url, bodies, warmup)
    lock = threading.Lock()
    issued = 0
    latencies: list[float] = []
    timings: list[dict[str, float]] = []
    errors = 0
    bar = tqdm(total=n, desc=f"{concurrency} clients", unit="req", disable=not progress, mininterval=1.0)

    def next_index() -> int | None:
        nonlocal issued
        with lock:
            if issued >= n:
                return None
            issued += 1
            return issued - 1

    def client_loop() -> None:
        nonlocal errors
        with Connection(url) as client:
            while (index := next_index()) is not None:
                seconds, status, timing = _timed_post(client, bodies[index % len(bodies)])
                with lock:
                    if status == 200:
                        latencies.append(seconds)
                        timings.append(timing)
                    else:
                        errors += 1
                bar.update(1)

    threads = [threading.Thread(target=client_loop, name=f"client-{i}") for i in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=REQUEST_TIMEOUT_S * n)
    wall = time.perf_counter() - started
    bar.close()
    return summarise(latencies, wall, errors, timings, mode="concurrent", url=url, concurrency=concurrency)


def bench_fastapi(url: str, sequential: int, concurrent: int, concurrency: int) -> dict[str, dict[str, Any]]:
    """Both measurements against one service; skips one when its count is 0."""
    results: dict[str, dict[str, Any]] = {}
    if sequential:
        results["sequential"] = run_sequential(url, sequential)
    if concurrent:
        results["concurrent"] = run_concurrent(url, concurrent, concurrency)
    return results


# ----------------------------------------------------------------------------- output

def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """A plain-text table (numbers to 1 decimal place) for the terminal."""
    def cell(value: Any) -> str:
        if isinstance(value, bool) or value is None:
            return {True: "PASS", False: "FAIL", None: ""}[value]
        return f"{value:.1f}" if isinstance(value, float) else str(value)

    cells = [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


LATENCY_COLUMNS = ("mode", "concurrency", "requests", "errors", "median_ms", "p95_ms", "p99_ms",
                   "throughput_rps")
STAGE_TABLE = ("mode", "concurrency", "mean_ms", *STAGE_COLUMNS, OUTSIDE_COLUMN)  # where the mean went
