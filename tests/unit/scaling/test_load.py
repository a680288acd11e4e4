"""The load generator against a small HTTP server on 127.0.0.1: every request recorded with its own
answer, and ``during(t)`` told the time of its call, not the sample's (reading the replica count can
take a while; notebook 10's kill run times the kill from it)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from servelab.scaling.load import Phase, run_schedule, stop_sender


class Echo(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"request_id": self.headers["X-Request-Id"], "replica": "r1"}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/predict"
    server.shutdown()
    stop_sender()


def test_during_gets_the_time_of_its_call(url: str) -> None:
    slow_read = 0.3
    asked: list[float] = []  # when each replica count was asked for (perf_counter)
    told: list[tuple[float, float]] = []  # (the t given to during, perf_counter at that call)

    def replicas() -> int:  # a busy controller: the count takes a while to come back
        asked.append(time.perf_counter())
        time.sleep(slow_read)
        return 1

    run = run_schedule(url, [(b"image", None)], [Phase(2.5, 20)], "echo", replicas, interval_s=0.5,
                       during=lambda t: told.append((t, time.perf_counter())))
    assert len(told) >= 2 and len(asked) >= len(told)
    # the first sample is asked for one interval after the start; its during() comes after the answer
    assert told[0][0] >= 0.5 + slow_read, told
    t0 = told[0][1] - told[0][0]  # the run's clock: the same for every call
    assert all(abs((now - t) - t0) < 0.01 for t, now in told), told
    assert all(t >= (a - t0) + slow_read for (t, _), a in zip(told, asked, strict=False)), (told, asked)
    assert len(run.requests) > 20 and all(r["status"] == 200 and not r["mismatch"] for r in run.requests)
    assert all(0 <= r["t_sent"] <= 2.6 for r in run.requests)
