"""The HTTP layer: ASGI middlewares, the request/response schemas and how errors map to status codes.

- ``ProxyPrefixMiddleware``: behind the node's Jupyter server (jupyter-server-proxy) the app's pages
  know their prefix (``servelab.core.browser``), so /docs finds its openapi.json there;
- ``MetricsMiddleware`` (outermost) counts and times every request, the
  rejected ones included, and reports each /predict request's stages
  (``Server-Timing`` header, ``predict_stage_seconds``); ``BodyLimitMiddleware`` answers 413 for a body over
  ``MAX_BODY_BYTES`` before anything parses it.
- ``PredictRequest`` / ``PredictResponse``: the body of POST /predict and its answer.
- ``add_error_handlers``: a body of the wrong shape → 422 with one readable
  sentence, an unusable image (``ImageError``) → 400, a failed forward pass
  (``InferenceError``) → 500. Every error body is ``{"detail": "<message>"}``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from servelab.core.browser import proxied_scope
from servelab.core.preprocess import DecodeBusy, ImageError
from servelab.serving import stages
from servelab.serving.batcher import InferenceError
from servelab.serving.metrics import Metrics

MONITORED_PATHS = frozenset({"/predict", "/health", "/metrics", "/docs", "/openapi.json"})

ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[dict[str, Any]]],
                    Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[None]]


class MetricsMiddleware:
    """Outermost ASGI layer: counts and times every HTTP request, including rejected ones.

    For POST /predict it also starts the request's ``Stopwatch`` (``stages.py``), adds the
    ``Server-Timing`` header to the answer, and records a served request's stages.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"] if scope["path"] in MONITORED_PATHS else "other"
        status = 500
        started = time.perf_counter()
        watch, token = stages.start(started) if path == "/predict" else (None, None)

        async def send_and_record(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if watch is not None:
                    watch.lap("response" if watch.seconds else "parse")  # a 413/422 never reached the handler
                    timing = (b"server-timing", stages.server_timing(watch).encode())
                    message = {**message, "headers": [*message.get("headers", []), timing]}
                    if status == 200:
                        self.metrics.observe_stages(watch)
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_and_record)
        finally:
            if token is not None:
                stages.finish(token)
            self.metrics.in_flight.dec()
            self.metrics.latency.labels(path).observe(time.perf_counter() - started)
            self.metrics.requests.labels(path, str(status)).inc()
            if status >= 400:
                self.metrics.errors.labels(path, str(status)).inc()


class ProxyPrefixMiddleware:
    """The proxy's prefix as the request's ``root_path`` (``servelab.core.browser.proxied_scope``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.app(dict(proxied_scope(scope)) if scope["type"] == "http" else scope, receive, send)


async def _send_json(send: Any, status: int, body: dict[str, Any]) -> None:
    """A JSON error straight from middleware; ``connection: close`` because the body was not read."""
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(payload)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": payload})


class BodyLimitMiddleware:
    """413 for a body over ``limit`` bytes (or ``limit()``, asked per request), checked before any parsing.

    The declared Content-Length is checked first (nothing is read); the body
    is then read while counting, because a chunked upload declares no length
    and a client can lie. The app gets the body replayed from memory.
    """

    def __init__(self, app: ASGIApp, limit: int | Callable[[], int]) -> None:
        self.app = app
        self.limit = limit

    @staticmethod
    def _too_large(size: int | None, limit: int) -> dict[str, str]:
        told = f"is {size} bytes, " if size is not None else ""
        return {"detail": f"request body {told}over the limit of {limit} bytes (MAX_BODY_BYTES)"}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        limit = self.limit() if callable(self.limit) else self.limit
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _send_json(send, 413, self._too_large(int(declared), limit))
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _send_json(send, 413, self._too_large(None, limit))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()  # later calls wait for the disconnect, as ASGI expects
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


# ----------------------------------------------------------------------------- request/response

def _example_image() -> str:
    """A real, tiny JPEG in base64: Swagger's 'Try it out' works without editing the body."""
    import base64

    from servelab.core.samples import jpeg_bytes, synthetic_food_image

    return base64.b64encode(jpeg_bytes(synthetic_food_image(1000, label=0).resize((96, 72)))).decode()


class PredictRequest(BaseModel):
    """The body of POST /predict."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"image": _example_image()}]})

    image: StrictStr = Field(description="base64 of an image file (JPEG, PNG, …); a data: URL is accepted")


class PredictResponse(BaseModel):
    prediction: str = Field(description="the most likely Food-11 class", examples=["Bread"])
    probability: float = Field(description="softmax probability of that class, 0..1", examples=[0.93])


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc if part != "body")


def describe_validation_errors(errors: list[dict[str, Any]]) -> str:
    """pydantic's error list → one sentence a person can act on."""
    parts = []
    for error in errors:
        field, kind = _field(tuple(error.get("loc", ()))), error.get("type", "")
        if kind == "missing" and not field:
            parts.append("the body is missing or not JSON (send Content-Type: application/json)")
        elif kind == "missing":
            parts.append(f"missing field '{field}'")
        elif kind == "extra_forbidden":
            parts.append(f"unexpected field '{field}' (only 'image' is accepted)")
        elif kind == "json_invalid":
            parts.append(f"the body is not valid JSON ({error.get('ctx', {}).get('error', 'parse error')})")
        elif kind == "string_type":
            parts.append(f"field '{field}' must be a string (base64 of an image file), "
                         f"not {type(error.get('input')).__name__}")
        elif kind in ("model_attributes_type", "dict_type"):
            parts.append("the body must be a JSON object")
        else:
            parts.append(f"{field or 'body'}: {error.get('msg', kind)}")
    return "invalid request: " + "; ".join(parts) + '. Expected JSON {"image": "<base64 of an image file>"}'


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in exc.errors()]
    detail = describe_validation_errors(list(exc.errors()))
    if "json" not in request.headers.get("content-type", ""):
        detail = "invalid request: the body was not parsed because Content-Type is not application/json"
    return JSONResponse({"detail": detail,
                         "errors": jsonable_encoder(errors)}, status_code=422)


async def _on_image_error(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=400)


async def _on_decode_busy(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "1"})


async def _on_inference_error(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": f"the server failed to run the model: {exc}"}, status_code=500)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {  # what /docs lists for POST /predict
    400: {"description": "not a usable image (bad base64, not an image, truncated, too many pixels)"},
    413: {"description": "request body over MAX_BODY_BYTES"},
    422: {"description": "the JSON body does not have the shape {\"image\": \"<base64>\"}"},
}


def add_error_handlers(api: FastAPI) -> None:
    """Map a malformed body to 422, an unusable image to 400 and a failed forward pass to 500."""
    api.add_exception_handler(RequestValidationError, _on_validation_error)
    api.add_exception_handler(ImageError, _on_image_error)
    api.add_exception_handler(DecodeBusy, _on_decode_busy)  # its own: the image is fine, the server busy
    api.add_exception_handler(InferenceError, _on_inference_error)
