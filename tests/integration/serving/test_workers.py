"""The ONNX service with two worker processes (``WORKERS=2``) under the real launcher and uvicorn's
supervisor: each worker loads the model once, /metrics counts every worker's requests, and a worker
killed while clients send is replaced without failing any request sent after the kill."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from servelab.bench import request_bodies
from servelab.core.procs import wait_until
from servelab.core.samples import sample_paths
from servelab.targets.services import Service, start_fastapi

LOADED = re.compile(r"in worker process (\d+) \(of WORKERS=2\)")


@pytest.fixture(scope="module")
def two_workers(artifact_dir: Path) -> Iterator[Service]:
    service = start_fastapi("onnx", workers=2, log_dir=artifact_dir / "workers-logs")
    yield service
    service.stop()


def _get(service: Service, path: str) -> str:
    """GET on a new connection (so the kernel may hand it to either worker)."""
    conn = http.client.HTTPConnection("127.0.0.1", int(service.url.rsplit(":", 1)[1]), timeout=30)
    try:
        conn.request("GET", path)
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def _post(service: Service, body: bytes) -> int:
    """POST /predict on a new connection: the status, or 0 when the connection failed."""
    conn = http.client.HTTPConnection("127.0.0.1", int(service.url.rsplit(":", 1)[1]), timeout=30)
    try:
        conn.request("POST", "/predict", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        return response.status
    except (http.client.HTTPException, OSError):
        return 0
    finally:
        conn.close()


def _metric(service: Service, name: str, **labels: str) -> float:
    return sum(s.value for family in text_string_to_metric_families(_get(service, "/metrics"))
               for s in family.samples if s.name == name and labels.items() <= s.labels.items())


def _loads(service: Service) -> list[str]:
    return LOADED.findall(service.process.log_path.read_text(errors="replace"))


def test_each_worker_loads_the_model_once_and_metrics_count_them_all(two_workers: Service) -> None:
    assert json.loads(_get(two_workers, "/health"))["processes"] == 2
    assert len(set(_loads(two_workers))) == 2 == len(_loads(two_workers))  # two workers, one load each
    assert "serving on http://127.0.0.1:" in two_workers.process.log_tail(40)  # the URL, said at start
    before = _metric(two_workers, "http_requests_total", path="/predict", status="200")
    body = request_bodies([sample_paths()[0]])[0]
    seen: set[int] = set()
    for _ in range(40):  # each on a new connection: the kernel hands them to either worker
        assert _post(two_workers, body) == 200
        seen.add(json.loads(_get(two_workers, "/health"))["pid"])
    assert seen == {int(pid) for pid in _loads(two_workers)}, "both workers answer"
    assert _metric(two_workers, "http_requests_total", path="/predict", status="200") - before == 40
    assert _metric(two_workers, "service_workers_ready") == 2
    assert _metric(two_workers, "model_loads_total") == 2
    assert _metric(two_workers, "predict_stage_seconds_count", stage="inference") >= 40


def test_a_killed_worker_is_replaced_and_no_request_sent_after_the_kill_fails(two_workers: Service) -> None:
    body = request_bodies([sample_paths()[1]])[0]
    results: list[tuple[float, float, int]] = []  # (sent, answered, status)
    lock, stop = threading.Lock(), threading.Event()

    def client() -> None:
        while not stop.is_set():
            sent = time.monotonic()
            status = _post(two_workers, body)
            with lock:
                results.append((sent, time.monotonic(), status))

    clients = [threading.Thread(target=client) for _ in range(4)]
    for thread in clients:
        thread.start()
    try:
        time.sleep(1.0)
        victim = int(_loads(two_workers)[0])
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)  # a worker process this test's service started
        wait_until(lambda: _metric(two_workers, "model_loads_total") == 3
                   and _metric(two_workers, "service_workers_ready") == 2,
                   "uvicorn's supervisor to replace the killed worker", 90)
        time.sleep(1.0)  # and serve beside it for a while
    finally:
        stop.set()
        for thread in clients:
            thread.join(60)
    failed = [(sent, status) for sent, _, status in results if status != 200]
    in_flight = [r for r in results if r[0] < killed_at < r[1]]
    assert not [f for f in failed if f[0] > killed_at], f"requests sent after the kill failed: {failed}"
    assert len(failed) <= len(in_flight), (failed, len(in_flight))  # at most those the dead worker held
    assert len(results) > 20 and victim not in set(map(int, _loads(two_workers)[2:]))
    assert json.loads(_get(two_workers, "/health"))["processes"] == 2
