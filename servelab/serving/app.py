"""One inference service's FastAPI app: POST /predict (``endpoint.py``), /health, /metrics, /docs.

Contract: ``create_app(kind, title, read_settings)`` builds the app and loads
nothing, so importing a service module starts no thread and imports no engine.
The app's lifespan reads the settings, checks the model file and builds the
micro-batcher, which loads and warms up the model on each inference thread;
only then does uvicorn accept connections. /health answers 503 until the model
is loaded and 200 ``{"status": "ready", ...}`` after (its ``pid``: which worker
process answered, of ``processes``). A bad setting
(``SettingsError``) or a missing model file (``FileNotFoundError``) fails the
start-up with one log line naming it, and uvicorn exits non-zero; any other
start-up error keeps its traceback. Shutdown stops the batcher.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from servelab.core.model import model_version, require_file
from servelab.serving.batcher import MicroBatcher
from servelab.serving.endpoint import add_predict
from servelab.serving.engines import Backend, load_backend, warm_up
from servelab.serving.http import (
    ASGIApp,
    BodyLimitMiddleware,
    MetricsMiddleware,
    ProxyPrefixMiddleware,
    add_error_handlers,
)
from servelab.serving.metrics import Metrics
from servelab.serving.settings import DEFAULT_MAX_BODY_BYTES, Settings, SettingsError

LOG = logging.getLogger("uvicorn.error")  # uvicorn configures this logger before importing the app
# why: docs/decisions/2026-11-22-fastapi-model-loads-in-lifespan.md
EXPLAINED_STARTUP_ERRORS = (SettingsError, FileNotFoundError)  # their message says what to do


def describe(backend: Backend, settings: Settings) -> dict[str, Any]:
    """What /health reports and the start-up log line says."""
    facts = {
        "backend": backend.name,
        "device": backend.device,
        "model_path": str(settings.model_path),
        "model_version": model_version(settings.model_path),
        "pid": os.getpid(),
        **{k: v for k, v in asdict(settings).items() if k != "model_path"},
    }
    providers = getattr(backend, "providers", None)
    if providers:
        facts["providers"] = list(providers)
    return facts


@dataclass
class Loaded:
    """A started service: its batcher and what /health says about it."""

    batcher: MicroBatcher
    settings: Settings
    facts: dict[str, Any]


def start(kind: str, settings: Settings, metrics: Metrics) -> Loaded:
    """Build the micro-batcher: each inference worker loads and warms up its own engine."""
    loaded: dict[int, Backend] = {}  # by worker index: they finish loading in any order
    # why: docs/decisions/2026-11-22-fastapi-cpu-threads-and-workers.md
    shared_threads = 1 if settings.infer_workers > 1 else None

    def load(index: int) -> Callable[..., np.ndarray]:
        # only worker 0 serves a lone request, so only it gets an all-core engine
        threads, shared = (settings.infer_threads, shared_threads) if index == 0 else (1, None)
        backend = load_backend(kind, settings.model_path, threads, shared, settings.max_batch)
        warm_up(backend, settings.max_batch)
        loaded[index] = backend
        return backend.infer

    batcher = MicroBatcher(load, settings.max_batch, settings.preprocess_workers, metrics.observe_batch,
                           workers=settings.infer_workers)
    return Loaded(batcher, settings, describe(loaded[0], settings))


class StartupErrorMiddleware:
    """On the lifespan scope: a start-up failure the app explained reaches the server as one line.

    Starlette sends a failed start-up to the server with the whole traceback;
    for ``EXPLAINED_STARTUP_ERRORS`` this sends ``"<title> cannot start: <message>"``
    instead. Other errors pass as they are.
    """

    def __init__(self, app: ASGIApp, title: str) -> None:
        self.app = app
        self.title = title

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        failed: dict[str, Any] | None = None

        async def hold_failure(message: dict[str, Any]) -> None:
            nonlocal failed
            if message["type"] == "lifespan.startup.failed":
                failed = message  # sent below, once the exception is known
            else:
                await send(message)

        try:
            await self.app(scope, receive, hold_failure)
        except EXPLAINED_STARTUP_ERRORS as exc:
            if failed is not None:
                failed = {**failed, "message": f"{self.title} cannot start: {exc}"}
            raise
        finally:
            if failed is not None:
                await send(failed)


def create_app(kind: str, title: str, read_settings: Callable[[], Settings]) -> FastAPI:
    """The app of one inference service (``kind`` "pt" or "onnx"); ``read_settings`` runs at start-up."""
    metrics = Metrics()
    running: Loaded | None = None

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        nonlocal running
        settings = read_settings()
        require_file(settings.model_path)
        running = start(kind, settings, metrics)
        metrics.model_loaded()
        facts = running.facts
        LOG.info("%s: model %s (version %s) on %s via %s in worker process %d (of WORKERS=%d); "
                 "MAX_BATCH=%d INFER_WORKERS=%d INFER_THREADS=%d PREPROCESS_WORKERS=%d", title,
                 settings.model_path, facts["model_version"], facts["device"].upper(), facts["backend"],
                 os.getpid(), settings.processes, settings.max_batch, settings.infer_workers,
                 settings.infer_threads, settings.preprocess_workers)
        try:
            yield
        finally:
            batcher, running = running.batcher, None
            metrics.model_unloaded()
            batcher.close()

    api = FastAPI(title=title, lifespan=lifespan,
                  description="Food-11 classifier. POST a base64 image to /predict.")
    add_error_handlers(api)

    def ready() -> Loaded:
        if running is None:
            raise HTTPException(503, "the model is not loaded yet (the server is starting or stopping)")
        return running

    add_predict(api, ready)

    @api.get("/health")
    async def health() -> Any:
        """200 and the service's facts once the model is loaded; 503 before (and while stopping)."""
        if running is None:
            return JSONResponse({"status": "loading", "model_loaded": False}, status_code=503)
        return {"status": "ready", "model_loaded": True, **running.facts}

    @api.get("/metrics", include_in_schema=False)
    async def prometheus() -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    def body_limit() -> int:
        return running.settings.max_body_bytes if running is not None else DEFAULT_MAX_BODY_BYTES

    api.add_middleware(ProxyPrefixMiddleware)
    api.add_middleware(BodyLimitMiddleware, limit=body_limit)
    api.add_middleware(MetricsMiddleware, metrics=metrics)  # added late = outer: sees the 413s too
    api.add_middleware(StartupErrorMiddleware, title=title)
    api.state.metrics = metrics
    return api
