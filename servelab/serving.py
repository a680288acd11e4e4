"""What both FastAPI inference services share: settings, backends, the micro-batcher, the app.

``fastapi_pt/app.py`` and ``fastapi_onnx/app.py`` only pick a backend and its
defaults; request validation, error mapping, limits, metrics, /health and the
scheduling of inference all live here, so the two services behave identically
and differ only in the engine that runs the model.

Why a micro-batcher with a few inference workers (see the speed targets of the
foundation issue): on a 2-core CPU the obvious design — run each request's
decode + preprocess + forward pass in a thread pool — runs several forward
passes at once, each asking for all cores, so the threads oversubscribe the
CPU and throughput drops (PyTorch to about 0.6 of its batch-1 rate, ONNX
Runtime to about 0.7 of what the machine can do). Here the work is split by
what it needs: decode + preprocess (~2.8 ms of one core for a 20-30 KB JPEG)
runs in a small thread pool, and forward passes run on ``INFER_WORKERS``
threads (one per core), each taking its share of the waiting requests as one
batch (up to ``MAX_BATCH``). Under load every worker runs with ONE intra-op
thread: measured here, two single-threaded passes side by side do about 1.5x
the images/s of one pass spread over both cores (ONNX Runtime batch 1: 310
vs 206 img/s; PyTorch: 83 vs 61), because intra-op parallelism pays for a
synchronisation at every layer. A lone request goes to worker 0, which uses
``INFER_THREADS`` threads (every core; ONNX Runtime spinning between
operators), and the other workers, built single-threaded, only
wake when two or more requests are pending, so their engines never spin
beside it. No worker waits to fill a batch: a lone client pays no batching delay.

Measured defaults (2-core lab machine, 16 clients): ONNX Runtime
``MAX_BATCH=1`` (~200 req/s, p99 1.3x the mean; batches of 4-8 gave no more
throughput and a p99 of 1.6-1.7x the mean), PyTorch ``MAX_BATCH=2`` with one
thread per worker (~75-90 req/s against ~61-85 for raw batch 1 on both
cores); ``PREPROCESS_WORKERS`` = half the cores (one here):
one worker preprocesses ~360 images/s, and a second one only preempts the
inference threads.

On a GPU (``engine_uses_gpu``) the defaults change: one inference worker,
``MAX_BATCH`` 16 for PyTorch and 1 for ONNX Runtime (see fastapi_onnx/app.py),
and every core decodes.

Environment (defaults in brackets, CPU / GPU): ``MODEL_PATH`` [the app folder's artefact],
``MAX_BATCH`` [per service / per service], ``INFER_WORKERS`` [cores / 1], ``INFER_THREADS`` [cores],
``PREPROCESS_WORKERS`` [cores / 2, at least 1 / cores], ``MAX_BODY_BYTES``
[10 MB], ``MAX_PIXELS`` [40 M], ``ORT_ALLOW_SPINNING`` [worker 0 alone: 1, else 0],
``ORT_CUDNN_CONV_ALGO_SEARCH`` [HEURISTIC] and ``ORT_PAD_BATCHES`` [1: pad every batch
to ``MAX_BATCH``] for ONNX Runtime's CUDA provider only.
Nothing here imports torch at module level: the ONNX service must run without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import queue
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from servelab.core.cpu import cpu_cores
from servelab.core.gpu import ort_has_cuda, ort_providers, pad_rows
from servelab.core.labels import NUM_CLASSES
from servelab.core.model import ONNX_INPUT, ONNX_OUTPUT, model_version, require_file
from servelab.core.preprocess import DEFAULT_MAX_PIXELS, ImageError, image_from_base64, preprocess, top1

LOG = logging.getLogger("uvicorn.error")  # uvicorn configures this logger before importing the app
DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
GPU_MAX_BATCH = 16  # one batch = the lab's 16 clients; a GPU pass at 16 costs little more than at 1
MONITORED_PATHS = frozenset({"/predict", "/health", "/metrics", "/docs", "/openapi.json"})


# ----------------------------------------------------------------------------- settings

def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"error: environment variable {name}={raw!r} is not an integer") from None
    if value < 1:
        raise SystemExit(f"error: environment variable {name}={value} must be at least 1")
    return value


@dataclass(frozen=True)
class Settings:
    """A service's configuration; ``from_env`` reads it, so containers configure it by env."""

    model_path: Path
    max_batch: int
    infer_threads: int
    preprocess_workers: int
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_pixels: int = DEFAULT_MAX_PIXELS
    infer_workers: int = 1

    @classmethod
    def from_env(cls, default_model_path: Path, default_max_batch: int,
                 env: Mapping[str, str] | None = None, gpu: bool = False,
                 gpu_max_batch: int = GPU_MAX_BATCH) -> Settings:
        """Read the settings from ``env`` (the process environment by default).

        ``gpu``: the engine will run on a GPU (see ``engine_uses_gpu``). The
        CPU defaults split the cores between inference workers; on a GPU one
        worker feeding it batches of up to ``gpu_max_batch`` is right (every
        worker would hold its own copy of the model and their passes would
        queue on the same device anyway), and decoding, now the slowest step,
        gets every core.
        """
        env = os.environ if env is None else env
        cores = cpu_cores()
        preprocess, workers = (cores, 1) if gpu else (max(1, cores // 2), cores)
        return cls(
            model_path=Path(env.get("MODEL_PATH") or default_model_path),
            max_batch=_env_int(env, "MAX_BATCH", gpu_max_batch if gpu else default_max_batch),
            infer_threads=_env_int(env, "INFER_THREADS", cores),
            preprocess_workers=_env_int(env, "PREPROCESS_WORKERS", preprocess),
            max_body_bytes=_env_int(env, "MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES),
            max_pixels=_env_int(env, "MAX_PIXELS", DEFAULT_MAX_PIXELS),
            infer_workers=_env_int(env, "INFER_WORKERS", workers),
        )


def _arch(name: str) -> tuple[str, int, int]:
    """``"sm_86"`` → ("sm", 8, 6); ``"compute_90a"`` → ("compute", 9, 0)."""
    kind, _, number = name.partition("_")
    digits = number.rstrip("abcdefghijklmnopqrstuvwxyz")
    return kind, int(digits[:-1] or 0), int(digits[-1:] or 0)


def torch_gpu_usable(torch: Any) -> bool:
    """CUDA is there and this torch build has kernels for the GPU (else: the CPU, with a warning).

    ``torch.cuda.is_available()`` is also true for a GPU the build cannot run:
    CUDA 12.8+ builds of PyTorch dropped the P100 (sm_60), and every pass
    would then fail. Machine code runs on its own major version at an equal or
    higher minor one; PTX (``compute_XY``) is compiled for any newer GPU.
    """
    if not torch.cuda.is_available():
        return False
    major, minor = torch.cuda.get_device_capability(0)
    for kind, a_major, a_minor in (_arch(a) for a in torch.cuda.get_arch_list()):
        if kind == "sm" and a_major == major and a_minor <= minor:
            return True
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return True
    LOG.warning("GPU %s (sm_%d%d) is not supported by this torch build (kernels for %s): using the CPU",
                torch.cuda.get_device_name(0), major, minor, ", ".join(torch.cuda.get_arch_list()))
    return False


@functools.cache
def torch_gpu_here() -> bool:
    """``torch_gpu_usable`` for this process's torch, decided (and warned about) once.

    The service asks before loading (its defaults) and every inference worker
    asks again; on a GPU the build cannot run that was one identical warning
    per worker.
    """
    import torch

    return torch_gpu_usable(torch)


def engine_uses_gpu(kind: str) -> bool:
    """Will the ``kind`` ("pt"/"onnx") engine run on a GPU here? Decides the defaults above.

    Asked before the model is loaded, with the same test the backends apply:
    torch sees CUDA, or onnxruntime has the CUDA provider and the driver shows
    a device (the provider is listed by every onnxruntime-gpu build, GPU or not).
    """
    if kind == "pt":
        return torch_gpu_here()
    import onnxruntime as ort

    return ort_has_cuda(ort)


# ----------------------------------------------------------------------------- backends

class Backend(Protocol):
    """An inference engine: a float32 batch [N,3,224,224] → logits [N,11]."""

    name: str
    device: str
    pad_to: int | None  # every batch is padded to this many rows (one shape), or None

    def infer(self, batch: np.ndarray, alone: bool = True) -> np.ndarray: ...


def first_pass_works(session: Any) -> bool:
    """One pass on a blank image: False when the engine cannot run on its device at all."""
    try:
        session.run([ONNX_OUTPUT], {ONNX_INPUT: np.zeros((1, 3, 224, 224), dtype=np.float32)})
    except Exception as exc:  # onnxruntime raises its own Fail/RuntimeException types
        LOG.warning("first pass failed: %s", exc)
        return False
    return True


class OnnxBackend:
    """ONNX Runtime session: CUDAExecutionProvider when the build and host have it, else CPU."""

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

        # Alone, the session may use every core and let its threads spin between
        # operators (-1.7 ms per image here). Beside other busy workers it gets
        # one thread that never spins: spinning would steal the cores they need.
        spin_alone = "1" if shared_threads is not None else "0"
        self.session = session(threads, spin_alone)
        if len(providers) > 1 and not first_pass_works(self.session):
            # e.g. a CUDA 13 build of onnxruntime-gpu on a P100 (sm_60): the
            # session is created, then every pass fails with no kernel image
            LOG.warning("ONNX Runtime's CUDA provider failed a first pass on this GPU: using the CPU")
            providers = ["CPUExecutionProvider"]
            self.session = session(threads, spin_alone)
        self.shared_session = session(shared_threads, "0") if shared_threads is not None else self.session
        self.providers = self.session.get_providers()
        self.device = "cuda" if self.providers[0] == "CUDAExecutionProvider" else "cpu"
        # on CUDA every batch is padded to ``pad_to`` rows: one shape (see pad_rows)
        wanted_pad = os.environ.get("ORT_PAD_BATCHES", "1") != "0"
        self.pad_to = pad_to if self.device == "cuda" and wanted_pad else None

    def infer(self, batch: np.ndarray, alone: bool = True) -> np.ndarray:
        session = self.session if alone else self.shared_session
        return session.run([ONNX_OUTPUT], {ONNX_INPUT: pad_rows(batch, self.pad_to)})[0][:len(batch)]


def own_thread_count(torch: Any, threads: int) -> None:
    """Give the calling thread ``threads`` intra-op threads that no other thread can change later.

    PyTorch sets up a thread's OpenMP count lazily, at its first parallel op,
    from the process-wide count of whichever thread called ``set_num_threads``
    last. The inference workers load their engines at the same time, so worker
    0 (all cores) could pick up worker 1's single thread before its first op
    and serve every lone request on one core: measured here in 7 paired starts,
    0.5-4.5 ms (2 ms on average) more per 13-16 ms pass, enough to miss the
    single-client latency target. Asking for the count first runs that set-up
    now, so our own setting below is the one that sticks.
    """
    torch.get_num_threads()
    torch.set_num_threads(threads)


class TorchBackend:
    """PyTorch eager MobileNetV2 on CUDA when available, else CPU with ``threads`` intra-op threads."""

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
    """``"onnx"`` or ``"pt"`` → a ready backend (exits naming the build command if the file is missing).

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


# ----------------------------------------------------------------------------- micro-batcher

def name_os_thread(name: str) -> None:
    """Give the calling thread ``name`` in the OS too (``top -H``, ``/proc/<pid>/task/*/comm``).

    So the CPU time of the decoding pool and of each inference worker can be
    told apart while the service is under load; best effort, Linux only.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


class InferenceError(RuntimeError):
    """The model failed on a batch: a server fault (500), not the client's."""


@dataclass
class _Job:
    array: np.ndarray
    future: asyncio.Future[np.ndarray]
    loop: asyncio.AbstractEventLoop


def _resolve(future: asyncio.Future[np.ndarray], result: np.ndarray | None,
             error: BaseException | None) -> None:
    """Runs on the event loop: settle a future unless its client already gave up."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class MicroBatcher:
    """Decode + preprocess in a thread pool; forward passes on ``workers`` inference threads.

    ``load(index)`` is called once on each inference thread and returns that
    thread's ``infer(batch, alone=...)``: [N,3,224,224] → [N,11], ``alone``
    telling whether any other request is being worked on, so worker 0 can use
    every core for a lone request and one core beside the others under load.
    ``on_batch(size, seconds)`` is told about every forward pass (metrics). A
    worker survives anything a batch raises: the requests in that batch get an
    ``InferenceError`` and the next batch runs.
    """

    def __init__(self, load: Callable[[int], Callable[..., np.ndarray]], max_batch: int,
                 preprocess_workers: int, max_pixels: int = DEFAULT_MAX_PIXELS,
                 max_image_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 on_batch: Callable[[int, float], None] | None = None,
                 load_timeout: float = 600.0, workers: int = 1) -> None:
        self._load = load
        self._load_error: BaseException | None = None
        self.max_batch = max_batch
        self.workers = workers
        self._max_pixels = max_pixels
        self._max_image_bytes = max_image_bytes
        self._on_batch = on_batch
        self._pool = ThreadPoolExecutor(preprocess_workers, thread_name_prefix="preprocess",
                                        initializer=name_os_thread, initargs=("preprocess",))
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._pending = 0  # accepted requests not yet answered by a worker
        self._loaded = threading.Semaphore(0)
        self._backlog = threading.Condition(self._lock)  # notified when a request arrives
        self._stopping = False
        self._threads = [threading.Thread(target=self._run, args=(i,), name=f"inference-{i}", daemon=True)
                         for i in range(workers)]
        for thread in self._threads:
            thread.start()
        deadline = time.monotonic() + load_timeout
        for _ in self._threads:
            if not self._loaded.acquire(timeout=max(0.0, deadline - time.monotonic())):
                raise RuntimeError(
                    f"the inference workers did not load the model within {load_timeout:.0f} s")
        if self._load_error is not None:
            self.close()
            raise self._load_error

    async def predict(self, image_b64: str) -> np.ndarray:
        """Logits [11] for one base64 image; raises ``ImageError`` or ``InferenceError``."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[np.ndarray] = loop.create_future()
        with self._lock:
            self._pending += 1
            if self._pending > 1:
                self._backlog.notify_all()
        try:
            self._pool.submit(self._prepare, image_b64, future, loop)
            return await future
        finally:
            with self._lock:
                self._pending -= 1

    def _prepare(self, image_b64: str, future: asyncio.Future[np.ndarray],
                 loop: asyncio.AbstractEventLoop) -> None:
        """Pool thread: decode and preprocess, then queue for the worker (no hop via the loop)."""
        if future.done():  # the client disconnected while waiting for a pool thread
            return
        try:
            array = preprocess(image_from_base64(image_b64, self._max_image_bytes, self._max_pixels))
        except Exception as exc:  # ImageError, or anything unexpected: answer this request only
            loop.call_soon_threadsafe(_resolve, future, None, exc)
            return
        self._queue.put(_Job(array, future, loop))

    def _take_batch(self, first: _Job) -> list[_Job]:
        """The first job plus its share of what is waiting, up to ``max_batch``; never waits.

        With several workers each takes about 1/workers of the backlog, so one
        worker does not run a big batch on one thread while the other idles.
        """
        jobs = [first]
        share = -(-(1 + self._queue.qsize()) // self.workers)  # ceil
        while len(jobs) < min(self.max_batch, share):
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is None:  # stop sentinel: put it back for the main loop
                self._queue.put(None)
                break
            jobs.append(job)
        return jobs

    def _next_job(self, index: int) -> _Job | None:
        """Worker 0 takes every job; the others only while two or more requests are pending.

        So a lone request always lands on worker 0 and uses its all-core
        engine: the other workers' engines stay cold and their threads never
        spin beside it.
        """
        if index == 0:
            return self._queue.get()
        while True:
            with self._backlog:
                self._backlog.wait_for(lambda: self._pending > 1 or self._stopping, timeout=1.0)
                if self._stopping:
                    return None
                if self._pending <= 1:
                    continue
            try:
                return self._queue.get(timeout=0.05)
            except queue.Empty:
                continue

    def _run(self, index: int = 0) -> None:
        name_os_thread(f"inference-{index}")
        # The model is loaded on this thread, the one that runs its forward
        # passes. Measured: PyTorch set up on the main thread and called from
        # another one uses its 2 OpenMP threads so badly that batch 1 takes
        # 40 ms instead of 15 ms (about one core busy); set up and called on
        # the same thread it takes 15 ms on both cores.
        try:
            infer = self._load(index)
        except BaseException as exc:  # re-raised on the thread that built the batcher
            self._load_error = exc
            return
        finally:
            self._loaded.release()
        while (first := self._next_job(index)) is not None:
            jobs = self._take_batch(first)
            try:
                self._run_batch(infer, jobs)
            except BaseException as exc:  # belt and braces: the worker must never die
                LOG.exception("inference worker: unexpected error")
                for job in jobs:
                    job.loop.call_soon_threadsafe(_resolve, job.future, None, InferenceError(str(exc)))
        self._queue.put(None)  # pass the stop sentinel on to the next worker

    def _alone(self, batch_size: int) -> bool:
        """No request besides this batch is being decoded, queued or run right now."""
        with self._lock:
            return self._pending <= batch_size

    def _run_batch(self, infer: Callable[..., np.ndarray], jobs: list[_Job]) -> None:
        batch = np.stack([job.array for job in jobs])
        started = time.perf_counter()
        try:
            logits = np.asarray(infer(batch, alone=self._alone(len(jobs))))
            if logits.shape != (len(jobs), NUM_CLASSES):
                raise InferenceError(
                    f"model returned shape {logits.shape}, expected ({len(jobs)}, {NUM_CLASSES})")
        except Exception as exc:
            LOG.exception("inference failed on a batch of %d", len(jobs))
            error = exc if isinstance(exc, InferenceError) else InferenceError(
                f"inference failed: {exc.__class__.__name__}: {exc}")
            for job in jobs:
                job.loop.call_soon_threadsafe(_resolve, job.future, None, error)
            return
        if self._on_batch is not None:
            self._on_batch(len(jobs), time.perf_counter() - started)
        for job, row in zip(jobs, logits, strict=True):
            job.loop.call_soon_threadsafe(_resolve, job.future, row, None)

    def close(self) -> None:
        """Stop the workers after the queued jobs and shut the pool down."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._backlog:
            self._stopping = True
            self._backlog.notify_all()
        self._queue.put(None)
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=30)


# ----------------------------------------------------------------------------- metrics

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


ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[dict[str, Any]]],
                    Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[None]]


class MetricsMiddleware:
    """Outermost ASGI layer: counts and times every HTTP request, including rejected ones."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"] if scope["path"] in MONITORED_PATHS else "other"
        status = 500
        started = time.perf_counter()

        async def send_and_record(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_and_record)
        finally:
            self.metrics.in_flight.dec()
            self.metrics.latency.labels(path).observe(time.perf_counter() - started)
            self.metrics.requests.labels(path, str(status)).inc()
            if status >= 400:
                self.metrics.errors.labels(path, str(status)).inc()


# ----------------------------------------------------------------------------- body limit

async def _send_json(send: Any, status: int, body: dict[str, Any]) -> None:
    """A JSON error straight from middleware; ``connection: close`` because the body was not read."""
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(payload)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": payload})


class BodyLimitMiddleware:
    """413 for a body over ``limit`` bytes, checked before any parsing.

    The declared Content-Length is checked first (nothing is read); the body
    is then read while counting, because a chunked upload declares no length
    and a client can lie. The app gets the body replayed from memory.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    def _too_large(self, size: int | None) -> dict[str, str]:
        told = f"is {size} bytes, " if size is not None else ""
        return {"detail": f"request body {told}over the limit of {self.limit} bytes (MAX_BODY_BYTES)"}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _send_json(send, 413, self._too_large(int(declared)))
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await _send_json(send, 413, self._too_large(None))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()  # later calls wait for the disconnect, as ASGI expects
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


# ----------------------------------------------------------------------------- request/response

def _example_image() -> str:
    """A real, tiny JPEG in base64: Swagger's 'Try it out' works without editing the body."""
    import base64

    from servelab.core.samples import jpeg_bytes, synthetic_food_image

    return base64.b64encode(jpeg_bytes(synthetic_food_image(1000, label=0).resize((96, 72)))).decode()


class PredictRequest(BaseModel):
    """The body of POST /predict."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"image": _example_image()}]})

    image: StrictStr = Field(description="base64 of an image file (JPEG, PNG, …); a data: URL is accepted")


class PredictResponse(BaseModel):
    prediction: str = Field(description="the most likely Food-11 class", examples=["Bread"])
    probability: float = Field(description="softmax probability of that class, 0..1", examples=[0.93])


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc if part != "body")


def describe_validation_errors(errors: list[dict[str, Any]]) -> str:
    """pydantic's error list → one sentence a person can act on."""
    parts = []
    for error in errors:
        field, kind = _field(tuple(error.get("loc", ()))), error.get("type", "")
        if kind == "missing" and not field:
            parts.append("the body is missing or not JSON (send Content-Type: application/json)")
        elif kind == "missing":
            parts.append(f"missing field '{field}'")
        elif kind == "extra_forbidden":
            parts.append(f"unexpected field '{field}' (only 'image' is accepted)")
        elif kind == "json_invalid":
            parts.append(f"the body is not valid JSON ({error.get('ctx', {}).get('error', 'parse error')})")
        elif kind == "string_type":
            parts.append(f"field '{field}' must be a string (base64 of an image file), "
                         f"not {type(error.get('input')).__name__}")
        elif kind in ("model_attributes_type", "dict_type"):
            parts.append("the body must be a JSON object")
        else:
            parts.append(f"{field or 'body'}: {error.get('msg', kind)}")
    return "invalid request: " + "; ".join(parts) + '. Expected JSON {"image": "<base64 of an image file>"}'


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in exc.errors()]
    detail = describe_validation_errors(list(exc.errors()))
    if "json" not in request.headers.get("content-type", ""):
        detail = "invalid request: the body was not parsed because Content-Type is not application/json"
    return JSONResponse({"detail": detail,
                         "errors": jsonable_encoder(errors)}, status_code=422)


async def _on_image_error(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=400)


async def _on_inference_error(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": f"the server failed to run the model: {exc}"}, status_code=500)


# ----------------------------------------------------------------------------- the app

def describe(backend: Backend, settings: Settings) -> dict[str, Any]:
    """What /health reports and the start-up log line says."""
    facts = {
        "backend": backend.name,
        "device": backend.device,
        "model_path": str(settings.model_path),
        "model_version": model_version(settings.model_path),
        **{k: v for k, v in asdict(settings).items() if k != "model_path"},
    }
    providers = getattr(backend, "providers", None)
    if providers:
        facts["providers"] = list(providers)
    return facts


def warm_up(backend: Backend, max_batch: int) -> None:
    """Passes before the first client, so it does not pay for allocation and set-up.

    On a GPU every batch size the batcher can form gets one pass: each new
    shape costs cuDNN/cuBLAS set-up on its first run; an engine that pads every
    batch to one shape needs that one pass only. On the CPU batch 1 and
    ``max_batch`` are enough.
    """
    if backend.device != "cuda":
        sizes: list[int] = sorted({1, max_batch})
    elif backend.pad_to:
        sizes = [backend.pad_to]
    else:
        sizes = list(range(1, max_batch + 1))
    for size in sizes:
        backend.infer(np.zeros((size, 3, 224, 224), dtype=np.float32))


def create_app(kind: str, settings: Settings, title: str) -> FastAPI:
    """The FastAPI app of one inference service (``kind`` "pt" or "onnx"): /predict, /health, /metrics, /docs.

    Exits at once, naming the build command, when the model file is missing;
    the model itself is loaded and warmed up on the inference worker thread.
    """
    require_file(settings.model_path)
    loaded: dict[int, Backend] = {}  # by worker index: they finish loading in any order

    # Several inference workers, each one intra-op thread under load: on this
    # 2-core CPU two single-threaded forward passes side by side do ~1.5x the
    # images/s of one pass spread over both cores (ONNX Runtime batch 1: 310 vs
    # 206 img/s; PyTorch: 83 vs 61), because intra-op parallelism pays for
    # synchronisation at every layer. A lone request still gets every core.
    shared_threads = 1 if settings.infer_workers > 1 else None

    def load(index: int) -> Callable[..., np.ndarray]:
        # Only worker 0 ever serves a lone request, so only it gets an all-core
        # engine; a second multi-threaded OpenMP team in the same process made
        # PyTorch's lone requests twice as slow (measured: 42 ms against 21 ms).
        threads, shared = (settings.infer_threads, shared_threads) if index == 0 else (1, None)
        backend = load_backend(kind, settings.model_path, threads, shared, settings.max_batch)
        warm_up(backend, settings.max_batch)
        loaded[index] = backend
        return backend.infer

    metrics = Metrics()
    batcher = MicroBatcher(load, settings.max_batch, settings.preprocess_workers,
                           settings.max_pixels, settings.max_body_bytes, metrics.observe_batch,
                           workers=settings.infer_workers)
    backend = loaded[0]
    facts = describe(backend, settings)
    LOG.info("%s: model %s (version %s) on %s via %s; MAX_BATCH=%d INFER_WORKERS=%d INFER_THREADS=%d "
             "PREPROCESS_WORKERS=%d", title, settings.model_path, facts["model_version"],
             backend.device.upper(), backend.name, settings.max_batch, settings.infer_workers,
             settings.infer_threads, settings.preprocess_workers)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        batcher.close()

    api = FastAPI(title=title, lifespan=lifespan,
                  description="Food-11 classifier. POST a base64 image to /predict.")
    api.add_exception_handler(RequestValidationError, _on_validation_error)
    api.add_exception_handler(ImageError, _on_image_error)
    api.add_exception_handler(InferenceError, _on_inference_error)
    error_responses: dict[int | str, dict[str, Any]] = {
        400: {"description": "not a usable image (bad base64, not an image, truncated, too many pixels)"},
        413: {"description": "request body over MAX_BODY_BYTES"},
        422: {"description": "the JSON body does not have the shape {\"image\": \"<base64>\"}"},
    }

    @api.post("/predict", response_model=PredictResponse, responses=error_responses)
    async def predict(request: PredictRequest) -> PredictResponse:
        """Classify one image: the label with the highest probability, and that probability."""
        label, probability = top1(await batcher.predict(request.image))
        return PredictResponse(prediction=label, probability=probability)

    @api.get("/health")
    async def health() -> dict[str, Any]:
        """Ready once the model is loaded (it is loaded before the server listens)."""
        return {"status": "ready", "model_loaded": True, **facts}

    @api.get("/metrics", include_in_schema=False)
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    api.add_middleware(BodyLimitMiddleware, limit=settings.max_body_bytes)
    api.add_middleware(MetricsMiddleware, metrics=metrics)  # added last = outermost: sees the 413s too
    api.state.batcher = batcher
    api.state.metrics = metrics
    return api
