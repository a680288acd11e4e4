"""The micro-batcher: prepares requests in a thread pool and runs forward passes on inference threads.

Contract: ``MicroBatcher(load, ...)`` starts ``workers`` inference threads,
calls ``load(index)`` once on each (the engine is built on the thread that
runs it) and returns when all have loaded, or raises what a load raised.
``await predict(prepare, watch)`` runs ``prepare()`` (decode + preprocess → one
[3,224,224] array) in the pool and returns that image's logits [11], or
raises what ``prepare`` raised (``ImageError``: the client's fault) or
``InferenceError`` (the server's). A worker takes its share of the
waiting requests as one batch (up to ``max_batch``) and never waits to fill
one; a lone request always runs on worker 0 with ``alone=True``. The request's
``Stopwatch`` (``stages.py``) is lapped as it goes: ``preprocess_wait`` when a pool
thread takes it, ``preprocess`` when ``prepare`` returns, ``batch_wait`` when its
batch's forward pass starts, ``inference`` when the pass ends. ``close()`` stops
the threads.
"""
# why: docs/decisions/2026-11-22-fastapi-micro-batcher.md

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from servelab.core.labels import NUM_CLASSES
from servelab.serving.stages import Stopwatch

LOG = logging.getLogger("uvicorn.error")  # uvicorn configures this logger before importing the app


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
    watch: Stopwatch


def _resolve(future: asyncio.Future[np.ndarray], result: np.ndarray | None,
             error: BaseException | None) -> None:
    """Runs on the event loop: settle a future unless its client already gave up."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        assert result is not None
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
                 preprocess_workers: int, on_batch: Callable[[int, float], None] | None = None,
                 load_timeout: float = 600.0, workers: int = 1) -> None:
        self._load = load
        self._load_error: BaseException | None = None
        self.max_batch = max_batch
        self.workers = workers
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

    async def predict(self, prepare: Callable[[], np.ndarray], watch: Stopwatch | None = None) -> np.ndarray:
        """Logits [11] for the image ``prepare()`` returns; raises what it raised, or ``InferenceError``."""
        watch = watch if watch is not None else Stopwatch()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[np.ndarray] = loop.create_future()
        with self._lock:
            self._pending += 1
            if self._pending > 1:
                self._backlog.notify_all()
        try:
            self._pool.submit(self._prepare, prepare, future, loop, watch)
            return await future
        finally:
            with self._lock:
                self._pending -= 1

    def _prepare(self, prepare: Callable[[], np.ndarray], future: asyncio.Future[np.ndarray],
                 loop: asyncio.AbstractEventLoop, watch: Stopwatch) -> None:
        """Pool thread: decode and preprocess, then queue for the worker (no hop via the loop)."""
        if future.done():  # the client disconnected while waiting for a pool thread
            return
        watch.lap("preprocess_wait")
        try:
            array = prepare()
        except Exception as exc:  # ImageError, or anything unexpected: answer this request only
            loop.call_soon_threadsafe(_resolve, future, None, exc)
            return
        watch.lap("preprocess")
        self._queue.put(_Job(array, future, loop, watch))

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
        # The model is loaded on the thread that runs its forward passes.
        # why: docs/decisions/2026-11-22-fastapi-cpu-threads-and-workers.md
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
        for job in jobs:
            job.watch.lap("batch_wait", started)
            job.watch.batch = len(jobs)
        try:
            logits = np.asarray(infer(batch, alone=self._alone(len(jobs))))
            if logits.shape != (len(jobs), NUM_CLASSES):
                raise InferenceError(
                    f"model returned shape {logits.shape}, expected ({len(jobs)}, {NUM_CLASSES})")
        except Exception as exc:
            self._lap_inference(jobs)
            LOG.exception("inference failed on a batch of %d", len(jobs))
            error = exc if isinstance(exc, InferenceError) else InferenceError(
                f"inference failed: {exc.__class__.__name__}: {exc}")
            for job in jobs:
                job.loop.call_soon_threadsafe(_resolve, job.future, None, error)
            return
        self._lap_inference(jobs)
        if self._on_batch is not None:
            self._on_batch(len(jobs), time.perf_counter() - started)
        for job, row in zip(jobs, logits, strict=True):
            job.loop.call_soon_threadsafe(_resolve, job.future, row, None)

    @staticmethod
    def _lap_inference(jobs: list[_Job]) -> None:
        done = time.perf_counter()
        for job in jobs:
            job.watch.lap("inference", done)

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

