"""OpenAI's API as its clients see it, for the engine's front (servelab/llm/engine.py).

- errors: ``{"error": {message, type, param, code}}`` (:func:`error_object`, :func:`error_body`), and
  any other error answer put into that shape (:func:`as_openai_error`);
- ``GET /v1/models``'s entry for the served model (:func:`model_object`);
- a streamed ``text_completion`` event (:func:`completion_chunk`);
- :class:`BadRequest`: a refusal with its status, the field at fault and OpenAI's error code;
- :class:`OpenAIShape`: an ASGI ``send`` that rewrites what transformers' app answers into those
  shapes: error answers and error events, ``data: [DONE]`` at a stream's end, the model named as the
  client sent it, usage in the stream only as ``stream_options`` asks for it (as OpenAI and vLLM send
  it), and a response cut short by the stop ended cleanly.

Only JSON and the ASGI messages here: no model, no transformers. Why the clients need each of these:
docs/decisions/2026-11-25-llm-engine-openai-clients.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

GENERATION_PATHS = ("/v1/completions", "/v1/chat/completions")
MODELS_PATH = "/v1/models"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

USAGE = (None, "final", "continuous")  # stream_options: none; include_usage; and continuous_usage_stats


class BadRequest(ValueError):
    """A request the engine refuses: HTTP ``status``, a message that says what to change, and as in
    OpenAI's errors the request field at fault (``param``) and a machine-readable ``code``."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.param, self.code = status, param, code


def error_object(status: int, message: str, param: str | None = None,
                 code: str | None = None) -> dict[str, Any]:
    """OpenAI's error object: ``{"error": {message, type, param, code}}`` (type from the status)."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_body(status: int, message: str, param: str | None = None, code: str | None = None) -> bytes:
    """:func:`error_object` as JSON bytes."""
    return json.dumps(error_object(status, message, param, code)).encode()


def as_openai_error(status: int, answer: Any) -> dict[str, Any]:
    """Any error answer (FastAPI's ``{"detail": ...}``, transformers' ``{"error": "..."}``, plain text)
    in OpenAI's shape; one already in that shape is kept."""
    if isinstance(answer, dict) and isinstance(answer.get("error"), dict) and "message" in answer["error"]:
        return {"error": {"type": error_object(status, "")["error"]["type"], "param": None, "code": None,
                          **answer["error"]}}
    detail = answer.get("detail", answer.get("error", answer)) if isinstance(answer, dict) else answer
    if isinstance(detail, list):  # FastAPI's validation errors: one line each
        detail = "; ".join(f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg', d)}"
                           if isinstance(d, dict) else str(d) for d in detail)
    message = detail if isinstance(detail, str) else json.dumps(detail)
    return error_object(status, message or f"HTTP {status}")


def model_object(served: str, created: int) -> dict[str, Any]:
    """The served model as an entry of OpenAI's ``GET /v1/models``."""
    return {"id": served, "object": "model", "created": created, "owned_by": "servelab"}


def usage_object(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """OpenAI's ``usage``: prompt, completion and total tokens."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def completion_chunk(request_id: str, model: str, text: str, finish: str | None = None,
                     usage: dict[str, int] | None = None) -> bytes:
    """One streamed ``text_completion`` event (``data: {...}``) carrying ``text``."""
    choice: dict[str, Any] = {"index": 0, "text": text}
    if finish:
        choice["finish_reason"] = finish
    body: dict[str, Any] = {"id": request_id, "object": "text_completion", "created": int(time.time()),
                            "model": model, "choices": [choice]}
    if usage:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n".encode()


class OpenAIShape:
    """An ASGI ``send`` that puts the app's answers into what OpenAI clients expect: an error answer
    (FastAPI's ``{"detail": ...}``, transformers' ``{"error": "..."}``) becomes OpenAI's error object;
    in a stream, an error event likewise, and the stream ends with ``data: [DONE]`` (``done_marker``);
    the model is named as clients sent it (transformers says ``name@main``).

    Usage in a generation stream (``usage``), as OpenAI and vLLM send it: ``None`` (no
    ``stream_options``): none; ``"final"`` (``include_usage``): the chunk that ends the answer carries
    none, and one more chunk with ``choices: []`` and the request's usage follows it;
    ``"continuous"`` (also ``continuous_usage_stats``, vLLM's): besides, every chunk carries the usage
    so far: ``prompt_tokens`` (the front's count) and the chunks with text so far as
    ``completion_tokens`` (the chunk that ends the answer carries the engine's exact count)."""

    def __init__(self, send: Send, served: str, done_marker: bool, usage: str | None = None,
                 prompt_tokens: int = 0) -> None:
        if usage not in USAGE:
            raise ValueError(f"usage={usage!r}: one of {USAGE}")
        self.send, self.served, self.done_marker = send, served, done_marker
        self.usage, self.prompt_tokens, self.streamed = usage, prompt_tokens, 0
        self.status, self.sse, self.started, self.ended, self.done_sent = 0, False, False, False, False
        self._start: Message | None = None  # a JSON answer's start, sent with its rewritten body
        self._body = bytearray()  # that answer's body so far, or an event not yet complete

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            self.sse = _header(message, b"content-type").startswith(b"text/event-stream")
            if self.sse:
                self.started = True
                await self.send(message)
            else:
                self._start = message
            return
        if message["type"] != "http.response.body":
            await self.send(message)
            return
        self._body += message.get("body", b"")
        more = bool(message.get("more_body"))
        if not self.sse:
            if not more:
                await self._send_whole()
            return
        events, _, rest = bytes(self._body).rpartition(b"\n\n")
        self._body = bytearray(rest)
        chunk = b"".join(self._event(e) for e in events.split(b"\n\n") if e) if events else b""
        if not more:
            if self._body:
                chunk += self._event(bytes(self._body))
                self._body.clear()
            if self.done_marker and not self.done_sent:
                chunk += b"data: [DONE]\n\n"
                self.done_sent = True
            self.ended = True
        if chunk or not more:
            await self.send({"type": "http.response.body", "body": chunk, "more_body": more})

    def _event(self, event: bytes) -> bytes:
        if not event.startswith(b"data: "):
            return event + b"\n\n"
        data = event[6:].strip()
        if data == b"[DONE]":
            self.done_sent = True
            return event + b"\n\n"
        try:
            parsed = json.loads(data)
        except ValueError:  # transformers writes its error event unescaped: {"error": "<text>"}
            if not data.startswith(b'{"error": "'):
                return event + b"\n\n"
            parsed = {"error": data[len(b'{"error": "'):].removesuffix(b'"}').decode(errors="replace")}
        if isinstance(parsed, dict) and "error" in parsed:
            parsed = as_openai_error(500, parsed)
        elif isinstance(parsed, dict):
            self._rename(parsed)
            if self.done_marker:
                return b"".join(b"data: " + json.dumps(one).encode() + b"\n\n"
                                for one in self._with_usage(parsed))
        return b"data: " + json.dumps(parsed).encode() + b"\n\n"

    def _with_usage(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        """One generation chunk with its usage as ``self.usage`` asks: the chunk, and after the one that
        carried the app's usage (the last) the usage chunk OpenAI's ``include_usage`` adds."""
        final = chunk.pop("usage", None)
        choices = chunk.get("choices") or []
        if any(isinstance(c, dict) and (c.get("text") or (c.get("delta") or {}).get("content"))
               for c in choices):
            self.streamed += 1
        if self.usage == "continuous":
            chunk["usage"] = final or usage_object(self.prompt_tokens, self.streamed)
        if not final or self.usage is None:
            return [chunk]
        tail: dict[str, Any] = {key: chunk[key] for key in ("id", "object", "created", "model")
                                if key in chunk}
        return [chunk, {**tail, "choices": [], "usage": final}]

    def _rename(self, answer: dict[str, Any]) -> None:
        if isinstance(answer.get("model"), str) and answer["model"].split("@")[0] == self.served:
            answer["model"] = self.served

    async def _send_whole(self) -> None:
        start = self._start or {"type": "http.response.start", "status": 500, "headers": []}
        body = bytes(self._body)
        self._start, self._body = None, bytearray()
        if _header(start, b"content-type").startswith(b"application/json") or self.status >= 400:
            try:
                answer = json.loads(body)
            except ValueError:
                answer = body.decode(errors="replace")
            if self.status >= 400:
                answer = as_openai_error(self.status, answer)
            elif isinstance(answer, dict):
                self._rename(answer)
            body = json.dumps(answer).encode()
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() not in
                       (b"content-length", b"content-type")]
            start = {**start, "headers": [*headers, (b"content-type", b"application/json"),
                                          (b"content-length", str(len(body)).encode())]}
        self.started = self.ended = True
        await self.send(start)
        await self.send({"type": "http.response.body", "body": body})

    async def cut_short(self, message: str) -> None:
        """End the response now: a 503 error if none was sent yet, else an error event and ``[DONE]``."""
        if self.ended:
            return
        self.ended = True
        error = error_body(503, message, code="server_shutting_down")
        if not self.started:
            await respond(self.send, 503, error)
        elif self.sse:
            await self.send({"type": "http.response.body", "more_body": False,
                             "body": b"data: " + error + b"\n\n" + b"data: [DONE]\n\n"})


def _header(message: Message, name: bytes) -> bytes:
    return next((v for k, v in message.get("headers", []) if k.lower() == name), b"").lower()


async def respond(send: Send, status: int, body: bytes) -> None:
    """Send a whole JSON answer: ``status`` and ``body``."""
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


__all__ = ["GENERATION_PATHS", "MODELS_PATH", "USAGE", "BadRequest", "Message", "OpenAIShape", "Receive",
           "Scope", "Send", "as_openai_error", "completion_chunk", "error_body", "error_object",
           "model_object", "respond", "usage_object"]
