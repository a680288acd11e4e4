"""Open-loop load with a rate schedule (Poisson arrivals, e.g. low → high → low), recorded as a time
series: per interval the replicas, requests in flight, p50/p99 of the requests that finished, 503s
and CPU (and GPU, where there is one) utilisation. Every request has a timeout; a late answer is
recorded, never waited for forever.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Phase:
    """``seconds`` of Poisson arrivals at ``rate`` requests/s."""

    seconds: float
    rate: float

    def __post_init__(self) -> None:
        if not self.seconds > 0 or not self.rate > 0:
            raise ValueError(f"a load phase needs seconds > 0 and rate > 0, got {self.seconds}, {self.rate}")


@dataclass
class LoadRun:
    """What one schedule did: one row per request and one per interval (the time series)."""

    label: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    series: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    phases: list[Phase] = field(default_factory=list)

    @property
    def step_s(self) -> float:
        """When the second phase (a step load's high load) began, seconds into the run; 0 for one phase:
        the one time origin the notebook's times are given from."""
        return float(self.phases[0].seconds) if len(self.phases) > 1 else 0.0

    def summary(self, replica_seconds: float | None = None) -> dict[str, Any]:
        """Throughput of answered requests (goodput), p50/p99 of those, 503s, timeouts, errors."""
        ok = [r for r in self.requests if r["status"] == 200]
        lat = np.array([r["latency_ms"] for r in ok]) if ok else np.array([])
        shed = [r for r in self.requests if r["status"] == 503]
        # goodput: answers per second of the run's whole span, until its last answer came
        span = max([self.seconds, *(r["t_done"] for r in self.requests)])
        return {
            "label": self.label, "sent": len(self.requests), "ok": len(ok), "shed_503": len(shed),
            "timeouts": sum(r["status"] == "timeout" for r in self.requests),
            "errors": sum(r["status"] not in (200, 503, "timeout") for r in self.requests),
            "goodput_rps": round(len(ok) / span, 2) if span else None,
            "p50_ms": _pct(lat, 50), "p99_ms": _pct(lat, 99),
            "shed_p99_ms": _pct(np.array([r["latency_ms"] for r in shed]), 99),
            "mismatched": sum(bool(r.get("mismatch")) for r in ok),
            "replicas_max": max((s["replicas"] for s in self.series), default=None),
            "replica_seconds": replica_seconds if replica_seconds is not None else self.replica_seconds(),
            "seconds": round(self.seconds, 2),
        }

    def replica_seconds(self) -> float:
        """The cost: replicas summed over the run's intervals, times the interval."""
        return round(sum(s["replicas"] * s["interval_s"] for s in self.series), 1)


def _pct(values: np.ndarray, q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if len(values) else None


def arrivals(phases: Sequence[Phase], seed: int = 0) -> list[tuple[float, int]]:
    """Poisson arrival times (s from the start) with the index of the phase each falls in."""
    rng = random.Random(seed)
    out: list[tuple[float, int]] = []
    start = 0.0
    for i, phase in enumerate(phases):
        t = start + rng.expovariate(phase.rate)
        while t < start + phase.seconds:
            out.append((t, i))
            t += rng.expovariate(phase.rate)
        start += phase.seconds
    return out


def run_schedule(url: str, bodies: Sequence[tuple[bytes, str]], phases: Sequence[Phase], label: str,
                 replicas: Callable[[], int | tuple[int, int]], interval_s: float = 1.0,
                 timeout_s: float = 20.0, seed: int = 0,
                 during: Callable[[float], None] | None = None) -> LoadRun:
    """Send ``bodies`` (image bytes, expected label) round-robin at the phases' rates to ``url``.

    ``replicas()`` (running, or (running, starting)) and this machine's CPU and GPU utilisation (on
    a joined cluster, the head node's only) are sampled every ``interval_s`` on a thread beside the
    load; ``during(t)`` is called on that thread at each sample (e.g. to kill a replica).
    """
    import psutil

    from servelab.core.monitor import Gpus

    if not bodies:
        raise ValueError("run_schedule needs at least one request body")
    gpus = Gpus()  # none on a CPU host: gpu_util_pct is then empty
    run = LoadRun(label)
    samples: list[dict[str, Any]] = []
    stop = threading.Event()
    t0 = time.perf_counter()

    def sample() -> None:
        psutil.cpu_percent(interval=None)
        while not stop.wait(interval_s):
            t = time.perf_counter() - t0
            try:
                counts = replicas()
                n, starting = counts if isinstance(counts, tuple) else (counts, 0)
            except Exception:  # the controller busy or restarting: keep the last count
                n, starting = (samples[-1]["replicas"], samples[-1]["starting"]) if samples else (0, 0)
            util = [g["util_pct"] for g in gpus.sample()]
            samples.append({"t": round(t, 2), "replicas": n, "starting": starting,
                            "cpu_util_pct": psutil.cpu_percent(interval=None),
                            "gpu_util_pct": round(sum(util) / len(util), 1) if util else None})
            if during is not None:  # the time now, not the sample's: reading the counts takes a while
                during(time.perf_counter() - t0)

    pool = sender_pool()
    t0 = time.perf_counter()
    wall0 = time.time()
    sampler = threading.Thread(target=sample, name="scaling-sampler", daemon=True)
    sampler.start()
    future = pool.submit(send_all, url, list(bodies), arrivals(phases, seed), run.label, wall0, timeout_s)
    try:
        run.requests = future.result(timeout=sum(p.seconds for p in phases) + timeout_s + 60)
    finally:
        stop.set()
        sampler.join(timeout=interval_s + 30)
    run.seconds = sum(p.seconds for p in phases)
    run.phases = list(phases)
    run.series = _intervals(run.requests, samples, phases, interval_s, label)
    return run


_POOL: list[Any] = []


def sender_pool() -> Any:
    """The process the load is sent from, started once (``spawn``, about 1-2 s) and kept.

    In the Ray driver's process the sender shares the GIL with Ray's threads and falls behind its
    schedule (measured: docs/decisions/2026-11-23-ray-serve.md)."""
    import atexit
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    if not _POOL:
        pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"))
        pool.submit(int, 0).result(timeout=60)  # the child is up before any clock starts
        _POOL.append(pool)
        atexit.register(stop_sender)
    return _POOL[0]


def stop_sender() -> None:
    """Stop the sender process (if started); waits for it."""
    while _POOL:
        _POOL.pop().shutdown(wait=True, cancel_futures=True)


def send_all(url: str, bodies: Sequence[tuple[bytes, str]], times: list[tuple[float, int]], label: str,
             wall0: float, timeout_s: float) -> list[dict[str, Any]]:
    """Send one request at each of ``times`` (s after ``wall0``, a ``time.time()``); one record each."""
    run = LoadRun(label)
    t0 = time.perf_counter() - (time.time() - wall0)
    asyncio.run(_send_all(url, bodies, times, run, [0], t0, timeout_s))
    return run.requests


async def _send_all(url: str, bodies: Sequence[tuple[bytes, str]], times: list[tuple[float, int]],
                    run: LoadRun, in_flight: list[int], t0: float, timeout_s: float) -> None:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=timeout_s)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        async def one(i: int, at: float, phase: int) -> None:
            body, expected = bodies[i % len(bodies)]
            rid = f"{run.label}-{i}"
            in_flight[0] += 1
            sent = time.perf_counter()
            record: dict[str, Any] = {"id": rid, "phase": phase, "t_sent": round(sent - t0, 3)}
            try:
                async with session.post(url, data=body, headers={"X-Request-Id": rid}) as response:
                    text = await response.text()
                    record["status"] = response.status
                    if response.status == 200:
                        answer = await response.json(content_type=None)
                        record["replica"] = answer.get("replica")
                        record["mismatch"] = (answer.get("request_id") != rid
                                              or (expected is not None and answer.get("label") != expected))
                    else:
                        record["message"] = text[:200]
            except asyncio.TimeoutError:
                record["status"] = "timeout"
            except aiohttp.ClientError as exc:
                record["status"] = f"error: {exc.__class__.__name__}"
            finally:
                in_flight[0] -= 1
            done = time.perf_counter()
            record.update(t_done=round(done - t0, 3), latency_ms=round((done - sent) * 1000, 2))
            run.requests.append(record)

        tasks = []
        for i, (at, phase) in enumerate(times):
            delay = at - (time.perf_counter() - t0)
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, at, phase)))
        await asyncio.gather(*tasks)


def _intervals(requests: list[dict[str, Any]], samples: list[dict[str, Any]], phases: Sequence[Phase],
               interval_s: float, label: str) -> list[dict[str, Any]]:
    """One row per sample: the requests that finished since the previous sample, and the sample."""
    bounds = np.cumsum([p.seconds for p in phases])
    rows = []
    previous = 0.0
    for s in samples:
        done = [r for r in requests if previous <= r["t_done"] < s["t"]]
        ok = np.array([r["latency_ms"] for r in done if r["status"] == 200])
        replicas = s["replicas"]
        s["in_flight"] = sum(r["t_sent"] <= s["t"] < r["t_done"] for r in requests)
        phase = int(np.searchsorted(bounds, s["t"], side="left"))
        rows.append({
            "run": label, "t": s["t"], "interval_s": round(s["t"] - previous, 2), "phase": phase,
            "rate": phases[phase].rate if phase < len(phases) else 0.0,
            "replicas": replicas, "starting": s.get("starting", 0), "in_flight": s["in_flight"],
            "ongoing_per_replica": round(s["in_flight"] / replicas, 2) if replicas else None,
            "done": len(done), "ok": len(ok), "shed_503": sum(r["status"] == 503 for r in done),
            "p50_ms": _pct(ok, 50), "p99_ms": _pct(ok, 99), "cpu_util_pct": s["cpu_util_pct"],
            "gpu_util_pct": s.get("gpu_util_pct"),
        })
        previous = s["t"]
    return rows


def closed_loop(url: str, bodies: Sequence[tuple[bytes, str]], concurrency: int, seconds: float,
                timeout_s: float = 20.0) -> dict[str, Any]:
    """``concurrency`` senders back to back for ``seconds``: answers/s (the capacity) and p50."""
    import urllib.request

    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    def sender(k: int) -> None:
        i = k
        while time.perf_counter() < deadline:
            body = bodies[i % len(bodies)][0]
            t = time.perf_counter()
            with urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST"),
                                        timeout=timeout_s) as response:
                response.read()
            latencies.append((time.perf_counter() - t) * 1000)
            i += concurrency

    start = time.perf_counter()
    threads = [threading.Thread(target=sender, args=(k,), daemon=True) for k in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + timeout_s + 5)
    elapsed = time.perf_counter() - start
    return {"concurrency": concurrency, "seconds": round(elapsed, 2), "requests": len(latencies),
            "throughput_rps": round(len(latencies) / elapsed, 2),
            "p50_ms": _pct(np.array(latencies), 50), "p99_ms": _pct(np.array(latencies), 99)}


def scale_events(series: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The moments the replica count changed: time, from, to."""
    events = []
    for a, b in itertools.pairwise(series):
        if b["replicas"] != a["replicas"]:
            events.append({"run": b["run"], "t": b["t"], "from": a["replicas"], "to": b["replicas"]})
    return events
