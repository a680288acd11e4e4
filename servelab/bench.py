"""Benchmarks of the FastAPI services and of the model alone.

``python -m servelab.bench fastapi --url URL``: N sequential requests from one
client, then M from 16 concurrent clients; median, p95, p99 latency and
throughput. ``raw``: the model without a server (ONNX Runtime and PyTorch at
batch 1 and 16, plus decode + preprocessing per image), the ceiling a service
here can approach. ``fastapi-all``: all of it against local services, with the
model timed before and after them, and the services' speed targets
(``speed_targets``) as PASS/FAIL. The functions return dicts, for notebooks
and ``servelab.results.store.append_rows``.

The client is the standard library's ``http.client``: bodies encoded up
front, one keep-alive connection per client thread, a dropped connection
reopened once and retried.

Long on purpose: the client, the raw timings, the targets' formulas and the
CLI make one measurement; the formulas combine the raw rows and client
results defined above them, and read best beside them.
"""
# why: docs/decisions/2026-11-22-bench-stdlib-http-client.md

from __future__ import annotations

import argparse
import base64
import functools
import http.client
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from servelab.core.progress import bar as tqdm
from servelab.core.samples import sample_paths

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
        for attempt in range(2):  # the server may have closed an idle keep-alive connection
            try:
                self.conn.request("POST", self.path, body=body, headers={"Content-Type": "application/json"})
                response = self.conn.getresponse()
                response.read()
                return response.status
            except (http.client.HTTPException, OSError):
                self.conn.close()
                if attempt:
                    return 0
        return 0

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _timed_post(client: Connection, body: bytes) -> tuple[float, int]:
    """One request: (seconds, status code); a connection error counts as status 0."""
    started = time.perf_counter()
    status = client.post(body)
    return time.perf_counter() - started, status


def summarise(latencies_s: Sequence[float], wall_s: float, errors: int = 0,
              **extra: Any) -> dict[str, Any]:
    """Latencies of the successful requests (in the order they finished) + the wall time → the figures
    the lab reports. ``median_spread`` is the noise of the median: (max − min) / mean of the medians of
    the run's first, second and last third (None below 9 requests)."""
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
        "median_spread": round((max(thirds) - min(thirds)) / float(np.mean(thirds)), 4) if thirds else None,
        "mean_ms": float(ms.mean()),
        "throughput_rps": len(ms) / wall_s if wall_s > 0 else float("nan"),
        "wall_s": wall_s,
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
    latencies, errors = [], 0
    with Connection(url) as client:
        started = time.perf_counter()
        for i in tqdm(range(n), desc="sequential", unit="req", disable=not progress,
                      mininterval=1.0):
            seconds, status = _timed_post(client, bodies[i % len(bodies)])
            if status == 200:
                latencies.append(seconds)
            else:
                errors += 1
        wall = time.perf_counter() - started
    return summarise(latencies, wall, errors, mode="sequential", url=url, concurrency=1)


def run_concurrent(url: str, n: int = DEFAULT_CONCURRENT, concurrency: int = DEFAULT_CONCURRENCY,
                   images: ImageSource = None, warmup: int = 16, progress: bool = True) -> dict[str, Any]:
    """``n`` requests in total from ``concurrency`` clients, each sending its next as soon as one returns."""
    url, bodies = _predict_url(url), request_bodies(images)
    _warm_up(url, bodies, warmup)
    lock = threading.Lock()
    issued = 0
    latencies: list[float] = []
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
                seconds, status = _timed_post(client, bodies[index % len(bodies)])
                with lock:
                    if status == 200:
                        latencies.append(seconds)
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
    return summarise(latencies, wall, errors, mode="concurrent", url=url, concurrency=concurrency)


# ----------------------------------------------------------------------------- the model alone

def _time_per_call(call: Callable[[], Any], min_seconds: float, min_calls: int = 3) -> float:
    """Median seconds of one ``call`` over at least ``min_seconds`` (after one warm-up call)."""
    call()
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < min_calls or time.perf_counter() - started < min_seconds:
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def time_preprocess(images: ImageSource = None, min_seconds: float = 2.0) -> float:
    """Seconds to decode + preprocess one image (base64 text → [3,224,224]), one thread."""
    from servelab.core.preprocess import image_from_base64, preprocess

    texts = [json.loads(body)["image"] for body in request_bodies(images)]
    per_round = _time_per_call(lambda: [preprocess(image_from_base64(t)) for t in texts], min_seconds)
    return per_round / len(texts)


def run_raw(batch_sizes: Sequence[int] = (1, 16), backends: Sequence[str] = ("onnx", "pt"),
            threads: int | None = None, min_seconds: float = 3.0, images: ImageSource = None,
            model_paths: dict[str, Path] | None = None) -> list[dict[str, Any]]:
    """Model-only speed: one row per (backend, batch) with images/s and ms/image, plus preprocessing.

    Uses the same backend classes and thread settings as the services
    (``servelab.serving.engines``), so the figures are what a service's worker gets.
    """
    from servelab.core.cpu import cpu_cores
    from servelab.core.paths import REPO_ROOT
    from servelab.core.preprocess import preprocess_bytes
    from servelab.serving.engines import load_backend

    threads = threads or cpu_cores()
    paths = {"onnx": REPO_ROOT / "fastapi_onnx" / "food11.onnx",
             "pt": REPO_ROOT / "fastapi_pt" / "food11.pth", **(model_paths or {})}
    sources = list(images) if images is not None else sample_paths()
    arrays = [preprocess_bytes(s if isinstance(s, bytes) else Path(s).read_bytes()) for s in sources]
    rows: list[dict[str, Any]] = []
    steps = [(b, n) for b in backends for n in batch_sizes]
    with tqdm(total=len(steps) + 1, desc="raw model timing", unit="step") as bar:
        pre = time_preprocess(images, min_seconds=min_seconds / 2)
        rows.append({"mode": "raw", "what": "preprocess", "batch": 1, "threads": 1,
                     "ms_per_image": pre * 1000, "images_per_s": 1 / pre})
        bar.update(1)
        for kind in backends:
            backend = load_backend(kind, paths[kind], threads)
            for size in batch_sizes:
                batch = np.stack([arrays[i % len(arrays)] for i in range(size)])
                per_call = _time_per_call(functools.partial(backend.infer, batch), min_seconds)
                rows.append({"mode": "raw", "what": backend.name, "batch": size, "threads": threads,
                             "device": backend.device, "ms_per_image": per_call / size * 1000,
                             "images_per_s": size / per_call})
                bar.update(1)
    return rows


# ----------------------------------------------------------------------------- targets

def raw_figure(rows: Sequence[dict[str, Any]], what: str, batch: int = 1) -> float:
    """ms per image of one raw row (``what`` = "preprocess", "onnxruntime" or "pytorch")."""
    for row in rows:
        if row["what"] == what and row["batch"] == batch:
            return float(row["ms_per_image"])
    raise BenchError(f"no raw measurement of {what} at batch {batch}")


def speed_targets(raw: Sequence[dict[str, Any]], onnx: dict[str, dict[str, Any]],
                  pt: dict[str, dict[str, Any]], cores: int) -> list[dict[str, Any]]:
    """The services' speed targets, each with its bound (from this run's raw timings), the figure, pass/fail.

    ``onnx`` and ``pt`` map "sequential"/"concurrent" to a result of ``run_*``.
    """
    pre = raw_figure(raw, "preprocess")
    ort16, ort1 = raw_figure(raw, "onnxruntime", 16), raw_figure(raw, "onnxruntime")
    pt1 = raw_figure(raw, "pytorch")
    ceiling = 1000.0 / (ort16 + pre / cores)
    onnx_rps = onnx["concurrent"]["throughput_rps"]
    targets = [
        ("FastAPI-ONNX 16 clients throughput ≥ 0.9 × ceiling (req/s)", onnx_rps, 0.9 * ceiling, ">="),
        ("FastAPI-ONNX 16 clients p99 ≤ 1.5 × 16 / throughput (ms)", onnx["concurrent"]["p99_ms"],
         1.5 * onnx["concurrent"]["concurrency"] / onnx_rps * 1000.0, "<="),
        ("FastAPI-PT 16 clients throughput ≥ 0.9 × raw PT batch-1 (req/s)",
         pt["concurrent"]["throughput_rps"], 0.9 * 1000.0 / pt1, ">="),
        ("FastAPI-ONNX sequential p50 ≤ 1.3 × (ORT batch 1 + preprocess) (ms)",
         onnx["sequential"]["median_ms"], 1.3 * (ort1 + pre), "<="),
        ("FastAPI-PT sequential p50 ≤ 1.3 × (PT batch 1 + preprocess) (ms)",
         pt["sequential"]["median_ms"], 1.3 * (pt1 + pre), "<="),
    ]
    rows = []
    for name, measured, bound, op in targets:
        ok = measured >= bound if op == ">=" else measured <= bound
        rows.append({"target": name, "measured": measured, "bound": bound, "pass": ok})
    rows.append({"target": "ceiling = 1 / (ORT ms/img at batch 16 + preprocess ms/img / cores) (req/s)",
                 "measured": ceiling, "bound": None, "pass": None})
    return rows


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
RAW_COLUMNS = ("what", "batch", "threads", "ms_per_image", "images_per_s")


def _write_json(path: Path | None, payload: Any) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
        print(f"wrote {path}")


def bench_fastapi(url: str, sequential: int, concurrent: int, concurrency: int) -> dict[str, dict[str, Any]]:
    """Both measurements against one service; skips one when its count is 0."""
    results: dict[str, dict[str, Any]] = {}
    if sequential:
        results["sequential"] = run_sequential(url, sequential)
    if concurrent:
        results["concurrent"] = run_concurrent(url, concurrent, concurrency)
    return results


def bracket_raw(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Raw rows timed before and after the services, averaged row by row: the bounds' model speed.

    A shared machine's speed drifts over minutes, so the bounds use the
    model's speed around the time the services ran, not only before.
    """
    # why: docs/decisions/2026-11-22-bench-bounds-from-the-model-timed-around-the-services.md
    rows = []
    for first, last in zip(before, after, strict=True):
        ms = (first["ms_per_image"] + last["ms_per_image"]) / 2
        rows.append({**first, "ms_per_image": ms, "images_per_s": 1000.0 / ms,
                     "ms_before": first["ms_per_image"], "ms_after": last["ms_per_image"]})
    return rows


def fastapi_all(sequential: int, concurrent: int, concurrency: int, min_seconds: float) -> dict[str, Any]:
    """Raw timings, each local service in turn (started and stopped here), raw again, then the targets."""
    from servelab.core.cpu import cpu_cores
    from servelab.targets.services import start_fastapi

    before = run_raw(min_seconds=min_seconds)
    print(format_table(before, RAW_COLUMNS))
    services: dict[str, dict[str, dict[str, Any]]] = {}
    for kind in ("onnx", "pt"):
        with start_fastapi(kind) as service:
            print(f"benchmarking fastapi_{kind} at {service.url}")
            services[kind] = bench_fastapi(service.url, sequential, concurrent, concurrency)
            for result in services[kind].values():
                result["service"] = f"fastapi_{kind}"
        print(format_table(list(services[kind].values()), ("service", *LATENCY_COLUMNS)))
    raw = bracket_raw(before, run_raw(min_seconds=min_seconds))
    print("the model alone, before and after the services (the bounds use the mean):")
    print(format_table(raw, ("what", "batch", "ms_before", "ms_after", "ms_per_image")))
    targets = speed_targets(raw, services["onnx"], services["pt"], cpu_cores())
    return {"raw": raw, "services": services, "targets": targets}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servelab.bench", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    fa = sub.add_parser("fastapi", help="sequential + concurrent requests against a running service")
    fa.add_argument("--url", required=True, help="service base URL, e.g. http://127.0.0.1:8000")
    for p in (fa, all_ := sub.add_parser("fastapi-all", help="raw + both local services + speed targets")):
        p.add_argument("--sequential", type=int, default=DEFAULT_SEQUENTIAL, help="sequential requests")
        p.add_argument("--concurrent", type=int, default=DEFAULT_CONCURRENT,
                       help="requests in the concurrent run")
        p.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="concurrent clients")
        p.add_argument("--json", type=Path, help="also write the results to this JSON file")
    raw = sub.add_parser("raw", help="time the model alone: ORT and PyTorch at batch 1 and 16")
    raw.add_argument("--json", type=Path)
    for p in (raw, all_):
        p.add_argument("--seconds", type=float, default=3.0, help="time spent per raw measurement")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except FileNotFoundError as exc:  # e.g. a model artefact not built: the message names the command
        sys.stderr.write(f"error: {exc}\n")
        return 2


def _run(args: argparse.Namespace) -> int:
    """One sub-command; its exit status."""
    if args.command == "fastapi":
        results = bench_fastapi(args.url, args.sequential, args.concurrent, args.concurrency)
        print(format_table(list(results.values()), LATENCY_COLUMNS))
        _write_json(args.json, results)
        return 0
    if args.command == "raw":
        rows = run_raw(min_seconds=args.seconds)
        print(format_table(rows, RAW_COLUMNS))
        _write_json(args.json, rows)
        return 0
    report = fastapi_all(args.sequential, args.concurrent, args.concurrency, args.seconds)
    print(format_table(report["targets"], ("target", "measured", "bound", "pass")))
    _write_json(args.json, report)
    return 0 if all(t["pass"] is not False for t in report["targets"]) else 1


if __name__ == "__main__":
    sys.exit(main())
