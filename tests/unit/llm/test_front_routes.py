"""The engine's front lets only the lab's own routes reach transformers' app, with a stand-in app behind
the real ``Front``: its other routes (``/reset``, ``/load_model``, ``/v1/responses``, ...) answer 404 and
never reach the app, a body past the limit is a 413 before it is read whole, a prompt longer than the
context could hold is a 400 before the tokenizer sees it, and past the in-flight limit a request gets 429.
(The real engine: tests/integration/llm/test_engine.py.)"""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from typing import Any

import pytest

from servelab.llm.front import Front

SERVED = "artifacts/llm"
Sent = list[MutableMapping[str, Any]]


class Tokenizer:
    """Counts what it was asked to tokenize (a character a token)."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def __call__(self, text: str) -> dict[str, list[int]]:
        self.seen.append(len(text))
        return {"input_ids": list(range(len(text)))}


class App:
    """transformers' app: records each path it is handed, answers 200 (a completion for generation)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.hold: asyncio.Event | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.paths.append(scope["path"])
        if self.hold is not None:
            await self.hold.wait()
        body = json.dumps({"object": "text_completion", "model": SERVED, "choices": [
            {"index": 0, "text": " ok", "finish_reason": "length"}]}).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


def front(app: App, tokenizer: Tokenizer | None = None, **limits: int) -> Front:
    return Front(app, SERVED, tokenizer or Tokenizer(), context=1024, stats=lambda: {"running": 0}, **limits)


async def call(server: Front, method: str, path: str, chunks: list[bytes] | None = None,
               length: int | None = None) -> tuple[int, dict[str, Any], int]:
    """One request; (status, JSON answer, how many body chunks the front read)."""
    sent: Sent = []
    pending = list(chunks or [b""])
    read = 0

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        chunk = pending.pop(0) if pending else b""
        return {"type": "http.request", "body": chunk, "more_body": bool(pending)}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    headers = [(b"content-length", str(length).encode())] if length is not None else []
    await server({"type": "http", "method": method, "path": path, "headers": headers}, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body or b"{}"), read


def completion(prompt: str) -> bytes:
    return json.dumps({"model": SERVED, "prompt": prompt, "max_tokens": 4}).encode()


@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/reset"), ("POST", "/load_model"), ("POST", "/v1/responses"), ("POST", "/v1/systemone"),
    ("POST", "/v1/audio/transcriptions"), ("GET", "/v1/responses"), ("DELETE", "/health"),
    ("POST", "/lab/stats"), ("GET", "/"), ("GET", "/v1/../reset"),
])
def test_transformers_other_routes_answer_404_and_never_reach_its_app(method: str, path: str) -> None:
    app = App()
    status, answer, _ = asyncio.run(call(front(app), method, path, [b'{"model": "gpt2"}']))
    assert status == 404, answer
    assert answer["error"]["code"] == "not_found" and "is not served here" in answer["error"]["message"]
    assert app.paths == []


def test_the_labs_routes_still_reach_the_app_or_the_front() -> None:
    app = App()
    server = front(app)
    for method, path in (("GET", "/health"), ("GET", "/docs"), ("GET", "/openapi.json"), ("HEAD", "/health")):
        assert asyncio.run(call(server, method, path))[0] == 200
    assert asyncio.run(call(server, "GET", "/lab/stats"))[:2] == (200, {"running": 0})
    assert asyncio.run(call(server, "GET", "/v1/models"))[0] == 200
    status, answer, _ = asyncio.run(call(server, "POST", "/v1/completions", [completion("the chef")]))
    assert status == 200 and answer["choices"][0]["text"] == " ok"
    assert app.paths == ["/health", "/docs", "/openapi.json", "/health", "/v1/completions"]


def test_a_body_past_the_limit_is_413_before_it_is_read_whole() -> None:
    app, tokenizer = App(), Tokenizer()
    server = front(app, tokenizer)
    fifty_mb = 50 * 2**20
    # declared: refused before a byte of it is read
    status, answer, read = asyncio.run(call(server, "POST", "/v1/completions", [b"x" * 1024] * 4,
                                            length=fifty_mb))
    assert (status, read) == (413, 0) and answer["error"]["code"] == "request_too_large"
    # chunked (no length): refused at the chunk that passes the limit, not at the body's end
    chunks = [b"x" * 2**16] * 800  # 50 MiB in 64 KiB chunks
    status, _, read = asyncio.run(call(server, "POST", "/v1/chat/completions", chunks))
    assert status == 413 and read == 17  # 16 chunks are exactly 1 MiB: the 17th passes it
    assert app.paths == [] and tokenizer.seen == []


def test_a_prompt_longer_than_the_context_could_hold_never_reaches_the_tokenizer() -> None:
    app, tokenizer = App(), Tokenizer()
    server = front(app, tokenizer, max_body=4 << 20)
    status, answer, _ = asyncio.run(call(server, "POST", "/v1/completions", [completion("a" * 1024 * 33)]))
    assert status == 400 and answer["error"]["code"] == "context_length_exceeded"
    assert "shorten it" in answer["error"]["message"]
    assert tokenizer.seen == [] and app.paths == []


def test_past_the_in_flight_limit_a_request_gets_429_and_the_first_ones_finish() -> None:
    app = App()
    server = front(app, max_in_flight=2)

    async def main() -> list[int]:
        app.hold = asyncio.Event()
        first = [asyncio.ensure_future(call(server, "POST", "/v1/completions", [completion("the chef")]))
                 for _ in range(2)]
        while server.in_flight < 2:
            await asyncio.sleep(0)
        third = await call(server, "POST", "/v1/completions", [completion("the chef")])
        app.hold.set()
        done = [status for status, _, _ in await asyncio.gather(*first)]
        again = await call(server, "POST", "/v1/completions", [completion("the chef")])
        return [third[0], *done, again[0]]

    assert asyncio.run(main()) == [429, 200, 200, 200]
    assert server.in_flight == 0
