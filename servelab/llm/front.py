"""The lab's front of the LLM engine (:class:`Front`): ASGI middleware in the engine's process, in front of
``transformers serve``'s app (``servelab.llm.engine`` assembles the two). It validates generation requests
(``servelab.llm.validation``), answers ``/lab/stats`` and ``/v1/models``, hands static batching to the
lab's batcher, puts the app's answers into OpenAI's shapes and ends the streams in flight at a stop.

Only the lab's own routes reach transformers' app (:data:`APP_ROUTES` and the generation paths): its
others (``/reset`` unloads the model, ``/load_model`` loads any folder or Hub model, ``/v1/responses``
has no token limit and can stop the batching worker, ``/v1/audio/transcriptions``, ``/v1/systemone``)
answer 404. A body over ``max_body`` bytes is refused with 413 before it is read whole, and past
``max_in_flight`` generation requests a new one gets 429. Why: docs/decisions/2026-12-01-exposure.md"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

from servelab.core.browser import proxied_scope
from servelab.llm.openai_shape import (
    GENERATION_PATHS,
    MODELS_PATH,
    BadRequest,
    Message,
    OpenAIShape,
    Receive,
    Scope,
    Send,
    error_body,
    model_object,
    respond,
)
from servelab.llm.static_batcher import StaticBatcher, static_completion
from servelab.llm.validation import MAX_BODY_BYTES, MAX_IN_FLIGHT, Request, validate

SHUTTING_DOWN = "the engine is shutting down; this answer was cut short (send the request again)"
# what transformers' app answers besides generation: its health and its Swagger pages (GET or HEAD)
APP_ROUTES = ("/health", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc")
LAB_STATS = "/lab/stats"
SERVED_ROUTES = (f"this engine answers POST {' and '.join(GENERATION_PATHS)}, GET {MODELS_PATH}, "
                 f"{LAB_STATS}, {', '.join(APP_ROUTES)}")


class BodyTooLarge(Exception):
    """A request body past the front's limit (answered 413 before the rest is read)."""


class Front:
    """ASGI middleware in front of transformers' app: validates generation requests (4xx with a
    message), answers ``/lab/stats`` and ``/v1/models``, in static mode serves /v1/completions from the
    batcher, puts what the app answers on ``/v1/`` into OpenAI's shapes (:class:`OpenAIShape`), and
    on :meth:`close` (the stop signal) ends the responses in flight at once and then ``on_stop``
    (the generation threads)."""

    def __init__(self, app: Any, served: str, tokenizer: Any, context: int,
                 stats: Callable[[], dict[str, Any]], batcher: StaticBatcher | None = None,
                 on_stop: Callable[[], None] | None = None, *, batching: str = "continuous",
                 greedy: bool = True, cache_tokens: int | None = None,
                 generation_defaults: dict[str, Any] | None = None, max_body: int = MAX_BODY_BYTES,
                 max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self.app, self.served, self.tokenizer, self.context = app, served, tokenizer, context
        self.max_body, self.max_in_flight = max_body, max_in_flight
        self.in_flight = 0  # generation requests being answered now (one event loop: no lock)
        self.stats, self.batcher, self.on_stop = stats, batcher, on_stop
        self.batching, self.cache_tokens = batching, cache_tokens
        self.greedy = greedy  # the model's own decoding (its generation config): greedy or sampling
        self.generation_defaults = generation_defaults or {}  # the model's generation config, as JSON
        self.created = int(time.time())
        self.closing = False
        self._closed: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text)["input_ids"])

    def count_chat(self, messages: list[dict[str, Any]]) -> int:
        """The prompt's tokens as transformers' chat handler makes them (the chat template), or the
        messages' text where the model has no template (transformers then refuses the request)."""
        try:
            plain = [{"role": m["role"], "content": m["content"]} for m in messages]
            ids = self.tokenizer.apply_chat_template(plain, add_generation_prompt=True, tokenize=True,
                                                     return_dict=True)
            return len(ids["input_ids"])
        except Exception:  # no chat template: transformers' handler answers that
            return self.count_tokens("\n".join(m["content"] for m in messages))

    def close(self) -> None:
        """The engine is stopping: responses in flight end now, new ones get a 503. Safe to call from a
        signal handler (it only schedules the wake-up on the event loop)."""
        self.closing = True
        if self._loop is not None and self._closed is not None:
            with contextlib.suppress(RuntimeError):  # the loop is already closed: nothing in flight
                self._loop.call_soon_threadsafe(self._closed.set)

    def _closed_event(self) -> asyncio.Event:
        if self._closed is None:
            self._loop, self._closed = asyncio.get_running_loop(), asyncio.Event()
            if self.closing:
                self._closed.set()
        return self._closed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, self._lifespan(receive), send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = scope.get("path", ""), scope["method"]
        if path == LAB_STATS and method in ("GET", "HEAD"):
            await respond(send, 200, json.dumps(self.stats()).encode())
        elif method in ("GET", "OPTIONS") and (path == MODELS_PATH or path.startswith(MODELS_PATH + "/")):
            await self._models(path, send)
        elif method == "POST" and path in GENERATION_PATHS:
            await self._generate(scope, receive, send)
        elif method in ("GET", "HEAD") and path in APP_ROUTES:
            await self.app(proxied_scope(scope), receive, send)  # /docs behind the node's Jupyter
        else:
            await respond(send, 404, error_body(404, f"{method} {path} is not served here: {SERVED_ROUTES}",
                                                code="not_found"))

    async def _models(self, path: str, send: Send) -> None:
        """``/v1/models``: the one model served; ``/v1/models/{id}``: it, or OpenAI's 404."""
        if path in (MODELS_PATH, MODELS_PATH + "/"):
            listing = {"object": "list", "data": [model_object(self.served, self.created)]}
            await respond(send, 200, json.dumps(listing).encode())
            return
        wanted = urllib.parse.unquote(path[len(MODELS_PATH) + 1:])
        if wanted == self.served:
            await respond(send, 200, json.dumps(model_object(self.served, self.created)).encode())
        else:
            await respond(send, 404, error_body(404, f"model {wanted!r} is not served here; this server "
                                                      f"serves {self.served!r}", "model", "model_not_found"))

    async def _generate(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.in_flight >= self.max_in_flight:
            await respond(send, 429, error_body(
                429, f"the engine is answering {self.in_flight} requests, its limit (--max-in-flight "
                     f"{self.max_in_flight}): send this one again later", code="rate_limit_exceeded"))
            return
        try:
            raw = await _read_body(receive, self.max_body, _declared_length(scope))
        except BodyTooLarge:
            await respond(send, 413, error_body(
                413, f"the request body is larger than the engine takes ({self.max_body} bytes, "
                     "--max-body-bytes)", code="request_too_large"))
            return
        self.in_flight += 1
        try:
            await self._answer(scope, receive, send, raw)
        finally:
            self.in_flight -= 1

    async def _answer(self, scope: Scope, receive: Receive, send: Send, raw: bytes) -> None:
        path = scope["path"]
        batched = self.batcher is not None and path == "/v1/completions"
        # static mode answers chat like --batching off: transformers' app, one request at a time
        mode = "off" if self.batching == "static" and not batched else self.batching
        try:
            if self.closing:
                raise BadRequest(503, SHUTTING_DOWN, code="server_shutting_down")
            try:
                parsed = json.loads(raw or b"null")
            except ValueError as exc:
                raise BadRequest(400, f"the request body is not JSON: {exc}") from None
            request = validate(path, parsed, self.served, self.context, self.count_tokens, batching=mode,
                               greedy=batched or self.greedy, cache_tokens=self.cache_tokens,
                               count_chat=self.count_chat)
            body = request.body if batched else self._app_body(request)
        except BadRequest as bad:
            await respond(send, bad.status, error_body(bad.status, str(bad), bad.param, bad.code))
            return
        out = OpenAIShape(send, self.served, done_marker=True, usage=request.usage,
                          prompt_tokens=request.prompt_tokens)
        if batched and self.batcher is not None:
            work = static_completion(self.batcher, body, out, request.min_tokens)
        else:
            work = self.app(scope, _replay(json.dumps(body).encode(), receive), out)
        await self._until_closed(work, out)

    def _app_body(self, request: Request) -> dict[str, Any]:
        """The body transformers' app gets: with a minimum length, a generation config that says it (the
        model's own, and the request's where ``--batching off`` took one), which its handlers read."""
        if not request.min_tokens:
            return request.body
        try:
            asked = json.loads(request.body.get("generation_config") or "{}")
        except (TypeError, ValueError) as exc:
            raise BadRequest(400, f"generation_config is not a JSON object: {exc}",
                             "generation_config") from None
        config = {**self.generation_defaults, **asked, "min_new_tokens": request.min_tokens}
        return {**request.body, "generation_config": json.dumps(config)}

    async def _until_closed(self, work: Awaitable[None], out: OpenAIShape) -> None:
        """Run one response; if the engine starts stopping first, cancel it (transformers' stream then
        cancels its request in the batch) and end the response with OpenAI's error shape."""
        task = asyncio.ensure_future(work)
        closed = asyncio.ensure_future(self._closed_event().wait())
        try:
            await asyncio.wait({task, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if task.cancelled():
            await out.cut_short(SHUTTING_DOWN)
        else:
            task.result()  # an exception of the app's is raised here, as without the front

    def _lifespan(self, receive: Receive) -> Receive:
        """The app's lifespan messages; before the shutdown one reaches it, stop the generation threads
        (transformers' own shutdown only unloads the model and would leave its batching thread running,
        which keeps the process alive where it is PID 1 in a container)."""
        async def wrapped() -> Message:
            message = await receive()
            if message.get("type") == "lifespan.shutdown":
                self.close()
                if self.on_stop is not None:
                    self.on_stop()
            return message
        return wrapped


def _declared_length(scope: Scope) -> int | None:
    """The request's Content-Length, when it sends one (a chunked body does not)."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _read_body(receive: Receive, limit: int, declared: int | None = None) -> bytes:
    """The whole body, or BodyTooLarge as soon as its declared length or what arrived passes ``limit``."""
    if declared is not None and declared > limit:
        raise BodyTooLarge
    chunks, size = [], 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replay
