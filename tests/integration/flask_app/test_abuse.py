"""GourmetGram under abuse (flask_app/guard.py, servelab/core/preprocess.py): it is the node's one public
web app. Past the rate a client gets 429, past the uploads at once 503 before its body is read, a body
that stalls is dropped with 408 under gunicorn while the page still answers, and decodes share the
process's pixel budget. The host itself is spared the first two (the lab's own measurements upload from
it)."""

from __future__ import annotations

import io
import socket
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from flask.testing import FlaskClient

from flask_app.guard import UploadGuard, trusted
from servelab.core.preprocess import DecodeBusy, PixelBudget
from servelab.targets.services import start_flask

PUBLIC = {"REMOTE_ADDR": "203.0.113.7"}  # a documentation address: an outside client, as the app sees it


def upload(client: FlaskClient, data: bytes) -> tuple[int, dict[str, str], str]:
    response = client.post("/api/predict", data={"file": (io.BytesIO(data), "dish.jpg")},
                           environ_base=PUBLIC)
    return response.status_code, dict(response.headers), response.get_data(as_text=True)


def test_past_its_rate_an_outside_client_gets_429_with_when_to_retry(make_client: Callable[..., FlaskClient],
                                                                     samples: list[Path]) -> None:
    client = make_client(backend="fastapi", fastapi_url="http://127.0.0.1:9", uploads_per_minute=30)
    statuses = [upload(client, samples[0].read_bytes()) for _ in range(7)]
    assert [s for s, _, _ in statuses[:5]] == [503] * 5  # the burst (5) reaches the app (no backend here)
    status, headers, body = statuses[5]
    assert status == 429 and int(headers["Retry-After"]) >= 1 and "at most 30 a minute" in body


def test_past_the_uploads_at_once_one_is_turned_away_before_its_body_is_read(
        make_client: Callable[..., FlaskClient], samples: list[Path]) -> None:
    client = make_client(backend="fastapi", fastapi_url="http://127.0.0.1:9", uploads_at_once=1)
    guard: UploadGuard = client.application.extensions["gourmetgram_guard"]
    guard.running = 1  # one upload still being read
    status, headers, body = upload(client, samples[0].read_bytes())
    assert status == 503 and headers["Retry-After"] == "2" and "busy with other uploads" in body
    assert client.get("/", environ_base=PUBLIC).status_code == 200  # the page still answers


def test_the_host_and_its_containers_are_spared_the_rate_and_the_cap() -> None:
    for address in ("127.0.0.1", "::1", "172.18.0.1", "192.168.16.1"):
        assert trusted(address), address
    for address in ("203.0.113.7", "10.52.0.12", "129.114.108.7", "unknown"):
        assert not trusted(address), address
    clock = [0.0]
    guard = UploadGuard(per_minute=6, at_once=1, read_timeout_s=1, clock=lambda: clock[0])
    with guard.admit("127.0.0.1", {}), guard.admit("127.0.0.1", {}):  # past the cap: still admitted
        assert guard.running == 2
    taken = 0
    for _ in range(10):
        try:
            with guard.admit("203.0.113.7", {}):
                taken += 1
        except Exception:
            break
    assert taken == 5  # the burst; a token comes back every 10 s at 6 a minute
    clock[0] += 10
    with guard.admit("203.0.113.7", {}):
        pass


def test_decodes_wait_for_their_share_of_the_pixel_budget() -> None:
    budget = PixelBudget(100)
    with budget.share(80), pytest.raises(DecodeBusy, match="budget is 100"), budget.share(40, wait_s=0.2):
        pass
    with budget.share(150):  # larger than the budget: it takes the whole budget, alone
        assert budget.used == 100
    assert budget.used == 0


def test_a_stalled_upload_is_dropped_and_the_page_still_answers(log_dir: Path) -> None:
    flask = start_flask({"PREDICT_BACKEND": "fastapi", "FASTAPI_SERVER_URL": "http://127.0.0.1:9",
                         "UPLOAD_READ_TIMEOUT": "1", "INSTANCE_PATH": str(log_dir / "instance")},
                        log_dir=log_dir)
    try:
        port = int(flask.url.rsplit(":", 1)[1])
        stalled = []
        for _ in range(4):  # as many as the worker's threads: each sends its headers, a little, then stalls
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(b"POST /api/predict HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; "
                         b"boundary=b\r\nContent-Length: 100000\r\n\r\n--b\r\n"
                         b'Content-Disposition: form-data; name="file"; filename="a.jpg"\r\n\r\n\xff\xd8')
            stalled.append(sock)
        started = time.monotonic()
        answers = [sock.recv(200) for sock in stalled]
        assert all(b" 408 " in answer for answer in answers), answers
        assert time.monotonic() - started < 8
        assert httpx.get(f"{flask.url}/", timeout=10).status_code == 200
        for sock in stalled:
            sock.close()
    finally:
        flask.stop()
