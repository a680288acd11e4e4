"""What transformers' app answers reaches OpenAI clients in OpenAI's shapes: errors as
``{"error": {message, type, param, code}}``, streams ending with ``data: [DONE]``, the model named as
the client named it, usage in the stream as ``stream_options`` asks (as vLLM sends it); a response cut
short by the stop ends cleanly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from typing import Any

import pytest

from servelab.llm.front import Front
from servelab.llm.openai_shape import OpenAIShape, as_openai_error

SERVED = "artifacts/llm"


Sent = list[MutableMapping[str, Any]]


def run(messages: list[dict[str, Any]], done_marker: bool = True) -> tuple[Sent, bytes]:
    sent: Sent = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    async def main() -> None:
        shape = OpenAIShape(send, SERVED, done_marker)
        for message in messages:
            await shape(message)
    asyncio.run(main())
    return sent, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def start(status: int, kind: bytes) -> dict[str, Any]:
    return {"type": "http.response.start", "status": status,
            "headers": [(b"content-type", kind), (b"content-length", b"999"), (b"x-request-id", b"r1")]}


def body(data: bytes, more: bool = False) -> dict[str, Any]:
    return {"type": "http.response.body", "body": data, "more_body": more}


def test_a_stream_gets_done_and_the_clients_model_name() -> None:
    event = b'data: {"id": "1", "model": "artifacts/llm@main", "choices": [{"text": "hi"}]}\n\n'
    sent, data = run([start(200, b"text/event-stream"), body(event[:20], True), body(event[20:], True),
                      body(b"")])
    assert sent[0]["status"] == 200
    events = [e for e in data.split(b"\n\n") if e]
    assert json.loads(events[0][6:])["model"] == SERVED
    assert events[-1] == b"data: [DONE]" and len(events) == 2


def test_transformers_unescaped_error_event_becomes_openais() -> None:
    _, data = run([start(200, b"text/event-stream"),
                      body(b'data: {"error": "CB worker said "no""}\n\n', True), body(b"")])
    error = json.loads(data.split(b"\n\n")[0][6:])["error"]
    assert error == {"message": 'CB worker said "no"', "type": "server_error", "param": None, "code": None}


def test_an_error_answer_in_fastapis_shape_becomes_openais() -> None:
    detail = b'{"detail": "Unexpected fields in the request: {\'colour\'}"}'
    sent, data = run([start(422, b"application/json"), body(detail)])
    answer = json.loads(data)
    assert answer == {"error": {"message": "Unexpected fields in the request: {'colour'}",
                                "type": "invalid_request_error", "param": None, "code": None}}
    headers = dict(sent[0]["headers"])
    assert headers[b"content-length"] == str(len(data)).encode() and headers[b"x-request-id"] == b"r1"


def test_validation_lists_and_plain_text_errors() -> None:
    listed = as_openai_error(422, {"detail": [{"loc": ["body", "prompt"], "msg": "Field required"}]})
    assert listed["error"]["message"] == "body.prompt: Field required"
    assert as_openai_error(500, "Internal Server Error")["error"]["type"] == "server_error"
    kept = {"error": {"message": "m", "type": "invalid_request_error", "param": "prompt", "code": None}}
    assert as_openai_error(400, kept) == kept


def test_a_response_cut_short_ends_cleanly() -> None:
    sent: Sent = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    async def main() -> None:
        streaming = OpenAIShape(send, SERVED, done_marker=True)
        await streaming(start(200, b"text/event-stream"))
        await streaming(body(b'data: {"choices": [{"text": "a"}]}\n\n', True))
        await streaming.cut_short("stopping")
        await streaming.cut_short("stopping")  # once is enough
        waiting = OpenAIShape(send, SERVED, done_marker=True)  # nothing sent yet: a 503
        await waiting.cut_short("stopping")
    asyncio.run(main())
    tail = sent[2]
    assert tail["more_body"] is False and tail["body"].endswith(b"data: [DONE]\n\n")
    assert json.loads(tail["body"].split(b"\n\n")[0][6:])["error"]["code"] == "server_shutting_down"
    assert sent[3]["status"] == 503 and len(sent) == 5


def test_the_model_list_is_the_served_model_only() -> None:
    """The front answers ``/v1/models`` itself: transformers' listing scans the Hub cache."""
    async def no_app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the app must not see /v1/models")

    front = Front(no_app, SERVED, tokenizer=None, context=1024, stats=dict)

    def get(path: str, method: str = "GET") -> tuple[int, Any]:
        sent: Sent = []

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}
        asyncio.run(front({"type": "http", "method": method, "path": path}, receive, send))
        return sent[0]["status"], json.loads(sent[1]["body"])

    status, listing = get("/v1/models")
    assert status == 200 and [m["id"] for m in listing["data"]] == [SERVED]
    assert listing["data"][0]["object"] == "model" and isinstance(listing["data"][0]["created"], int)
    assert get("/v1/models", "OPTIONS")[1] == listing
    assert get("/v1/models/artifacts/llm")[1] == listing["data"][0]  # uvicorn decodes %2F
    status, error = get("/v1/models/gpt-4")
    assert status == 404 and (error["error"]["code"], error["error"]["param"]) == ("model_not_found", "model")


# ----------------------------------------------------------------------------- usage in the stream

def app_stream(chat: bool = False) -> list[dict[str, Any]]:
    """A stream as transformers' app sends it: two tokens, then a chunk that ends the answer with usage."""
    kind = "chat.completion.chunk" if chat else "text_completion"

    def chunk(piece: str | None, finish: str | None = None, usage: bool = False) -> bytes:
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if chat:
            choice["delta"] = {"content": piece} if piece is not None else {"role": "assistant"}
        else:
            choice["text"] = piece or ""
        event: dict[str, Any] = {"id": "c1", "object": kind, "created": 1, "model": "artifacts/llm@main",
                                 "choices": [choice]}
        if usage:
            event["usage"] = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        return b"data: " + json.dumps(event).encode() + b"\n\n"
    first = [body(chunk(None), True)] if chat else []
    return [start(200, b"text/event-stream"), *first, body(chunk("a"), True), body(chunk("b"), True),
            body(chunk("", "length", usage=True), True), body(b"")]


def events(usage: str | None, chat: bool = False) -> list[Any]:
    sent: Sent = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    async def main() -> None:
        shape = OpenAIShape(send, SERVED, done_marker=True, usage=usage, prompt_tokens=3)
        for message in app_stream(chat):
            await shape(message)
    asyncio.run(main())
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return [e[6:].decode() if e == b"data: [DONE]" else json.loads(e[6:]) for e in data.split(b"\n\n") if e]


def test_no_stream_options_no_usage_in_the_stream() -> None:
    """As OpenAI and vLLM: usage only when asked for (transformers puts it in its last chunk anyway)."""
    got = events(None)
    assert [e if isinstance(e, str) else "usage" in e for e in got] == [False, False, False, "[DONE]"]
    assert got[2]["choices"][0]["finish_reason"] == "length"


def test_include_usage_adds_a_usage_chunk_with_no_choices_before_done() -> None:
    """vLLM's benchmark client reads the usage only from a chunk whose choices are empty."""
    got = events("final")
    assert "usage" not in got[2] and got[2]["choices"][0]["finish_reason"] == "length"
    assert got[3] == {"id": "c1", "object": "text_completion", "created": 1, "model": SERVED, "choices": [],
                      "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
    assert got[4] == "[DONE]" and len(got) == 5


@pytest.mark.parametrize("chat", [False, True])
def test_continuous_usage_stats_put_the_usage_so_far_in_every_chunk(chat: bool) -> None:
    """guidellm asks for it: each chunk carries the prompt's tokens and the tokens streamed so far."""
    got = events("continuous", chat)
    so_far = [e["usage"]["completion_tokens"] for e in got if not isinstance(e, str)]
    assert so_far == ([0] if chat else []) + [1, 2, 2, 2]  # the end and the usage chunk: the engine's count
    assert all(e["usage"]["prompt_tokens"] == 3 for e in got if not isinstance(e, str))
    assert got[-2]["choices"] == [] and got[-1] == "[DONE]"
