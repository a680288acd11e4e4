"""Monitoring's parser and per-interval arithmetic on metrics text captured from the real services
(FastAPI ONNX service and Triton 2.51, trimmed), and its scraper against a stand-in HTTP server."""

from __future__ import annotations

import contextlib
import http.server
import math
import threading
import time
from collections.abc import Iterator
from typing import ClassVar

import pytest

from servelab.lab import monitoring
from servelab.lab.monitoring import Scrape, derive, parse

FASTAPI = """\
# HELP http_requests_total HTTP requests by path and status code
# TYPE http_requests_total counter
http_requests_total{{path="/health",status="200"}} 1.0
http_requests_total{{path="/metrics",status="200"}} 1.0
http_requests_total{{path="/predict",status="200"}} {ok}
http_requests_total{{path="/predict",status="400"}} {bad}
# HELP http_requests_created HTTP requests by path and status code
# TYPE http_requests_created gauge
http_requests_created{{path="/predict",status="200"}} 1.7954373247467847e+09
# HELP http_errors_total HTTP responses with status >= 400
# TYPE http_errors_total counter
http_errors_total{{path="/predict",status="400"}} {bad}
# HELP http_request_duration_seconds Time from request to response
# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_bucket{{le="0.1",path="/health"}} 1.0
http_request_duration_seconds_bucket{{le="+Inf",path="/health"}} 1.0
http_request_duration_seconds_count{{path="/health"}} 1.0
http_request_duration_seconds_sum{{path="/health"}} 0.019164221999744768
http_request_duration_seconds_bucket{{le="0.1",path="/predict"}} {n}
http_request_duration_seconds_bucket{{le="+Inf",path="/predict"}} {n}
http_request_duration_seconds_count{{path="/predict"}} {n}
http_request_duration_seconds_sum{{path="/predict"}} {seconds}
# HELP http_requests_in_flight Requests being handled now
# TYPE http_requests_in_flight gauge
http_requests_in_flight {in_flight}
# HELP inference_batch_size Images per forward pass
# TYPE inference_batch_size histogram
inference_batch_size_bucket{{le="1.0"}} 0.0
inference_batch_size_bucket{{le="+Inf"}} {passes}
inference_batch_size_count {passes}
inference_batch_size_sum {images}
# HELP inference_seconds Time of one forward pass
# TYPE inference_seconds histogram
inference_seconds_bucket{{le="+Inf"}} {passes}
inference_seconds_count {passes}
inference_seconds_sum {pass_seconds}
"""

TRITON = """\
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{{model="food_classifier_onnx",version="1"}} {done}
nv_inference_request_success{{model="food_classifier",version="1"}} 0
# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{{model="food_classifier_onnx",reason="BACKEND",version="1"}} 0
nv_inference_request_failure{{model="food_classifier_onnx",reason="REJECTED",version="1"}} {rejected}
# HELP nv_inference_count Number of inferences performed (does not include cached requests)
# TYPE nv_inference_count counter
nv_inference_count{{model="food_classifier_onnx",version="1"}} {done}
nv_inference_count{{model="food_classifier",version="1"}} 0
# HELP nv_inference_exec_count Number of model executions performed (does not include cached requests)
# TYPE nv_inference_exec_count counter
nv_inference_exec_count{{model="food_classifier_onnx",version="1"}} {execs}
nv_inference_exec_count{{model="food_classifier",version="1"}} 0
# HELP nv_inference_request_duration_us Cumulative inference request duration in microseconds
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{{model="food_classifier_onnx",version="1"}} {request_us}
nv_inference_request_duration_us{{model="food_classifier",version="1"}} 0
# HELP nv_inference_queue_duration_us Cumulative inference queuing duration in microseconds
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{{model="food_classifier_onnx",version="1"}} {queue_us}
nv_inference_queue_duration_us{{model="food_classifier",version="1"}} 0
# HELP nv_inference_compute_infer_duration_us Cumulative compute inference duration in microseconds
# TYPE nv_inference_compute_infer_duration_us counter
nv_inference_compute_infer_duration_us{{model="food_classifier_onnx",version="1"}} {infer_us}
nv_inference_compute_infer_duration_us{{model="food_classifier",version="1"}} 0
# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution.
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{{model="food_classifier_onnx",version="1"}} {pending}
nv_inference_pending_request_count{{model="food_classifier",version="1"}} 0
# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]
# TYPE nv_cpu_utilization gauge
nv_cpu_utilization 0.845771144278607
"""


def fastapi(ok: int = 0, bad: int = 0, seconds: float = 0.0, in_flight: int = 1, passes: int = 0,
            images: int = 0, pass_seconds: float = 0.0) -> str:
    return FASTAPI.format(ok=ok, bad=bad, n=ok + bad, seconds=seconds, in_flight=in_flight, passes=passes,
                          images=images, pass_seconds=pass_seconds)


def triton(done: int = 0, execs: int = 0, request_us: int = 0, queue_us: int = 0, infer_us: int = 0,
           pending: int = 0, rejected: int = 0) -> str:
    return TRITON.format(done=done, execs=execs, request_us=request_us, queue_us=queue_us, infer_us=infer_us,
                         pending=pending, rejected=rejected)


def test_counters_read_the_same_from_both_exporters() -> None:
    api, tri = parse(fastapi(ok=36, seconds=2.5)), parse(triton(done=20))
    assert api[("http_requests", (("path", "/predict"), ("status", "200")))] == 36  # exposed with _total
    assert tri[("nv_inference_request_success", (("model", "food_classifier_onnx"), ("version", "1")))] == 20
    assert api[("http_request_duration_seconds_sum", (("path", "/predict"),))] == 2.5
    assert api[("http_requests_in_flight", ())] == 1
    assert tri[("nv_cpu_utilization", ())] == pytest.approx(0.845771144278607)
    with pytest.raises(ValueError):
        parse('http_requests_total{path="/predict" 3\n')


def test_fastapi_interval_is_delta_sum_over_delta_count() -> None:
    frame = derive([
        Scrape(0.0, "api", parse(fastapi(ok=16, seconds=0.8, passes=16, images=16, pass_seconds=0.4))),
        Scrape(0.5, "api", parse(fastapi(ok=36, bad=4, seconds=0.8 + 6.0, in_flight=17, passes=26, images=36,
                                         pass_seconds=0.4 + 0.5))),
    ])
    [row] = frame.to_dict("records")
    assert row["t_s"] == 0.5 and row["interval_s"] == 0.5 and row["error"] == "" and row["model"] == ""
    assert row["requests_per_s"] == pytest.approx(24 / 0.5)  # 20 ok + 4 rejected on /predict
    assert row["latency_ms"] == pytest.approx(6.0 / 24 * 1000)  # Δsum / Δcount, not sum / count
    assert row["errors_per_s"] == pytest.approx(4 / 0.5)
    assert row["compute_ms"] == pytest.approx(0.5 / 10 * 1000) and row["batch_size"] == pytest.approx(2.0)
    assert row["in_flight"] == 16  # the scrape's own request is not a client's
    assert math.isnan(row["queue_ms"]) and math.isnan(row["pending"])


def test_triton_interval_per_model() -> None:
    frame = derive([Scrape(1.0, "triton", parse(triton(done=20, execs=20, request_us=550_000))),
                    Scrape(3.0, "triton", parse(triton(done=60, execs=30, request_us=550_000 + 2_000_000,
                                                       queue_us=1_200_000, infer_us=600_000, pending=3,
                                                       rejected=2)))])
    rows = {r["model"]: r for r in frame.to_dict("records")}
    assert set(rows) == {"food_classifier", "food_classifier_onnx"}
    onnx, idle = rows["food_classifier_onnx"], rows["food_classifier"]
    assert onnx["requests_per_s"] == pytest.approx(40 / 2) and onnx["latency_ms"] == pytest.approx(50.0)
    assert onnx["queue_ms"] == pytest.approx(30.0) and onnx["compute_ms"] == pytest.approx(15.0)
    assert onnx["batch_size"] == pytest.approx(40 / 10) and onnx["pending"] == 3
    assert onnx["errors_per_s"] == pytest.approx(1.0) and math.isnan(onnx["in_flight"])
    assert idle["requests_per_s"] == 0 and math.isnan(idle["latency_ms"]) and idle["pending"] == 0


def test_a_restarted_server_counts_from_zero() -> None:
    frame = derive([Scrape(0.0, "api", parse(fastapi(ok=500, seconds=50.0))),
                    Scrape(1.0, "api", parse(fastapi(ok=10, seconds=0.3)))])  # counters went down: reset
    [row] = frame.to_dict("records")
    assert row["requests_per_s"] == pytest.approx(10) and row["latency_ms"] == pytest.approx(30.0)


def test_failed_scrape_is_a_row_and_the_next_interval_spans_it() -> None:
    frame = derive([Scrape(0.0, "api", parse(fastapi(ok=0))),
                    Scrape(0.5, "api", None, "TimeoutError: timed out"),
                    Scrape(1.0, "api", parse(fastapi(ok=30, seconds=3.0))),
                    *(Scrape(t, "other", parse("# TYPE up gauge\nup 1\n")) for t in (0.2, 1.5))])
    assert list(frame["error"]) == ["TimeoutError: timed out", "", "neither FastAPI's nor Triton's metrics"]
    spanned = frame.iloc[1]
    assert spanned["interval_s"] == 1.0 and spanned["requests_per_s"] == pytest.approx(30)
    assert monitoring.read_monitoring(frame).endswith("; 2 scrapes without data (see the error column)")
    assert len(monitoring.fig_monitoring(frame).axes) == 3


class _Pages(http.server.BaseHTTPRequestHandler):
    texts: ClassVar[list[str]] = []  # served in turn; "" is a 500, "slow" sleeps past the scrape timeout

    def do_GET(self) -> None:
        text = self.texts.pop(0) if len(self.texts) > 1 else self.texts[0]
        if text == "slow":
            time.sleep(0.6)
        self.send_response(500 if text in ("", "slow") else 200)
        self.end_headers()
        with contextlib.suppress(OSError):  # the slow one's client is gone
            self.wfile.write(text.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/metrics"
    httpd.shutdown()
    httpd.server_close()


def test_watch_records_failures_and_stops(server: str) -> None:
    _Pages.texts = [fastapi(), "", "slow", "not metrics {", fastapi(ok=8, seconds=0.4)]
    started = time.monotonic()
    with monitoring.watch({"api": server, "gone": "http://127.0.0.1:9/metrics"}, interval_s=0.05,
                          timeout_s=0.3) as w:
        time.sleep(1.0)
    assert time.monotonic() - started < 3.0 and not w._thread.is_alive()
    errors = [s.error for s in w.scrapes if s.source == "api" and s.samples is None]
    assert any("500" in e for e in errors) and any("timed out" in e for e in errors), errors
    assert any(e.startswith("ValueError") for e in errors), errors
    assert all(s.samples is None and s.error for s in w.scrapes if s.source == "gone")
    frame = w.frame()
    ok = frame[frame["error"] == ""]
    assert (ok["requests_per_s"] * ok["interval_s"]).sum() == pytest.approx(8)  # one interval spans the gaps


def test_show_metrics_prints_what_curl_would(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    _Pages.texts = [fastapi(ok=36, seconds=2.3)]
    lines = monitoring.show_metrics(server, ["http_request"], contains="/predict")
    assert lines == ["# HELP http_requests_total HTTP requests by path and status code",
                     "# TYPE http_requests_total counter",
                     'http_requests_total{path="/predict",status="200"} 36',
                     'http_requests_total{path="/predict",status="400"} 0',
                     "# HELP http_request_duration_seconds Time from request to response",
                     "# TYPE http_request_duration_seconds histogram",
                     'http_request_duration_seconds_count{path="/predict"} 36',
                     'http_request_duration_seconds_sum{path="/predict"} 2.3']
    assert f"$ curl {server}" in capsys.readouterr().out
