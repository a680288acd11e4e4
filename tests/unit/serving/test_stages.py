"""Where a request's time goes: the stages add up to the request's total, and the Server-Timing header
follows the W3C grammar. The app is the real one (middleware, endpoint, micro-batcher, preprocessing)
under a real uvicorn on 127.0.0.1; only the engine is a stand-in that takes a fixed time per pass."""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import uvicorn
from prometheus_client.parser import text_string_to_metric_families

from servelab.bench.client import Connection, request_bodies
from servelab.core.labels import NUM_CLASSES
from servelab.core.procs import free_port, wait_until
from servelab.core.samples import sample_paths
from servelab.serving import app as service_app
from servelab.serving.settings import Settings
from servelab.serving.stages import (
    STAGES,
    TOTAL,
    Stopwatch,
    parse_server_timing,
    server_timing,
    stage_means,
)

PASS_S = 0.1  # the stand-in's forward pass: long beside the client's and the HTTP server's own work


class StandIn:
    """An engine that sleeps ``PASS_S`` per forward pass (any batch size) and returns zeros."""

    name = "stand-in"
    device = "cpu"
    pad_to = None

    def infer(self, batch: np.ndarray, alone: bool = True) -> np.ndarray:
        time.sleep(PASS_S)
        return np.zeros((len(batch), NUM_CLASSES), dtype=np.float32)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real app under a real uvicorn on 127.0.0.1, in this process (so the engine can be a stand-in)."""
    model = tmp_path_factory.mktemp("model") / "stand-in.model"
    model.write_bytes(b"not a real model")
    settings = Settings(model_path=model, max_batch=4, infer_threads=1, preprocess_workers=1, infer_workers=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(service_app, "load_backend", lambda *args, **kwargs: StandIn())
        api = service_app.create_app("onnx", "stand-in", lambda: settings)
        server = uvicorn.Server(uvicorn.Config(api, host="127.0.0.1", port=free_port(), log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        wait_until(lambda: server.started, "the stand-in service to start", 60)
    yield f"http://127.0.0.1:{server.config.port}"
    server.should_exit = True
    thread.join(30)


def _timed(url: str, index: int = 0) -> tuple[float, dict[str, float], str]:
    """POST one sample photo on a new connection: the client's ms, the stages, the header."""
    body = request_bodies([sample_paths()[index]])[0]
    with Connection(f"{url}/predict") as client:
        started = time.perf_counter()
        client.conn.request("POST", "/predict", body=body, headers={"Content-Type": "application/json"})
        response = client.conn.getresponse()
        response.read()
        elapsed_ms = (time.perf_counter() - started) * 1000
    assert response.status == 200
    header = response.getheader("server-timing") or ""
    return elapsed_ms, parse_server_timing(header), header


def _adds_up(timing: dict[str, float]) -> float:
    """Every stage of a served request is there, with no gap or overlap (their sum is the header's total);
    the sum."""
    stages = sum(timing.get(stage, 0.0) for stage in STAGES)
    assert set(timing) - {TOTAL, "batch"} == set(STAGES), timing
    assert stages == pytest.approx(timing[TOTAL], abs=0.01), timing
    assert timing["inference"] >= PASS_S * 1000 * 0.95, timing  # the pass is charged to inference
    return stages


def _metric(url: str, name: str, **labels: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(s.value for family in text_string_to_metric_families(text)
               for s in family.samples if s.name == name and labels.items() <= s.labels.items())


def test_one_request_s_stages_add_up_to_its_total(url: str) -> None:
    """One client: the stages add up to the time the client waited for the answer, within 10 %."""
    for index in range(3):
        elapsed_ms, timing, _ = _timed(url, index)
        assert _adds_up(timing) == pytest.approx(elapsed_ms, rel=0.10), (elapsed_ms, timing)
        assert timing["batch"] == 1


def test_concurrent_requests_stages_add_up_and_the_waits_show(url: str) -> None:
    """Eight clients at once: the stages add up to the requests' time in the app as uvicorn's side of the
    app timed it (``http_request_duration_seconds``), within 10 %. The clients' own times also hold the
    wait to be read off the socket, outside the app: here the client threads share this process."""
    before = _metric(url, "http_request_duration_seconds_sum", path="/predict")
    count = _metric(url, "http_request_duration_seconds_count", path="/predict")
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: _timed(url, i % 11), range(16)))
    served = _metric(url, "http_request_duration_seconds_count", path="/predict") - count
    in_app_ms = (_metric(url, "http_request_duration_seconds_sum", path="/predict") - before) * 1000
    stages = [_adds_up(timing) for _, timing, _ in answers]
    assert all(s <= elapsed for s, (elapsed, _, _) in zip(stages, answers, strict=True))
    assert served == 16 and sum(stages) == pytest.approx(in_app_ms, rel=0.10), (sum(stages), in_app_ms)
    # eight at once behind one worker that takes up to 4 per pass: requests wait for it
    assert max(timing["batch_wait"] for _, timing, _ in answers) >= PASS_S * 1000 * 0.5
    assert max(timing["batch"] for _, timing, _ in answers) > 1


def test_prometheus_counts_each_stage_of_each_served_request(url: str) -> None:
    before = {stage: _metric(url, "predict_stage_seconds_count", stage=stage) for stage in STAGES}
    summed_before = sum(_metric(url, "predict_stage_seconds_sum", stage=stage) for stage in STAGES)
    totals = [_timed(url, i)[1][TOTAL] for i in range(4)]
    with Connection(f"{url}/predict") as client:
        assert client.post(b'{"image": "not base64!"}') == 400  # not a served request: not counted
    assert {_metric(url, "predict_stage_seconds_count", stage=s) - before[s] for s in STAGES} == {4.0}
    summed = sum(_metric(url, "predict_stage_seconds_sum", stage=stage) for stage in STAGES) - summed_before
    assert summed * 1000 == pytest.approx(sum(totals), rel=0.001)


# ----------------------------------------------------------------------------- the header's grammar
# W3C Server Timing, "The Server-Timing Header Field" (https://w3c.github.io/server-timing/):
#   Server-Timing             = #server-timing-metric
#   server-timing-metric      = metric-name *( OWS ";" OWS server-timing-param )
#   metric-name               = token
#   server-timing-param       = server-timing-param-name OWS "=" OWS server-timing-param-value
#   server-timing-param-name  = token
#   server-timing-param-value = token / quoted-string
# token, quoted-string, OWS and the "#" list: RFC 9110 sections 5.6.2, 5.6.4, 5.6.3 and 5.6.1.
TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
QUOTED = r'"(?:[\t !\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x21-\x7e\x80-\xff])*"'
OWS = r"[ \t]*"
PARAM = rf"{TOKEN}{OWS}={OWS}(?:{TOKEN}|{QUOTED})"
METRIC = rf"{TOKEN}(?:{OWS};{OWS}{PARAM})*"
HEADER = re.compile(rf"{METRIC}(?:{OWS},{OWS}{METRIC})*")


def test_the_header_follows_the_w3c_grammar(url: str) -> None:
    _, timing, header = _timed(url)
    assert HEADER.fullmatch(header), header
    for item in header.split(","):  # durations are numbers, in ms
        name, *params = (part.strip() for part in item.split(";"))
        durations = [p.split("=", 1)[1] for p in params if p.startswith("dur=")]
        assert len(durations) == 1 and re.fullmatch(r"\d+\.\d+", durations[0]), item
        assert name in (*STAGES, TOTAL)
    assert [k for k in timing if k in STAGES] == list(STAGES)  # in the order a request passes them


def test_the_grammar_check_rejects_what_the_spec_does_not_allow() -> None:
    bad_values = ("parse;dur=1.0,", "parse dur=1", "parse;dur=", 'a;desc="open', "a;;dur=1", "pa(rse);dur=1")
    for bad in bad_values:
        assert not HEADER.fullmatch(bad), bad
    for good in ('db;dur=53', 'cache;desc="Cache Read";dur=23.2', "miss, db;dur=53", "a ;dur = 1"):
        assert HEADER.fullmatch(good), good


def test_an_error_answer_carries_the_header_and_a_client_reads_it_back() -> None:
    watch = Stopwatch(started=0.0)
    watch.lap("parse", 0.002)
    watch.lap("response", 0.003)
    value = server_timing(watch)
    assert value == "parse;dur=2.000, response;dur=1.000, total;dur=3.000"
    assert parse_server_timing('x;desc="a, b";dur=5, parse;dur=2') == {"parse": 2.0}  # lenient, as asked
    means = stage_means([parse_server_timing(value)] * 2, client_mean_ms=4.0)
    assert means["parse_ms"] == 2.0 and means["inference_ms"] == 0.0 and means["outside_ms"] == 1.0


def test_an_unknown_stage_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown stage"):
        Stopwatch().lap("thinking")
