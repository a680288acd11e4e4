"""The LLM engine the lab runs: ``transformers serve``'s own OpenAI-compatible app, with a thin front.

``python -m servelab.llm.engine MODEL --batching continuous|static|off`` builds the same FastAPI app
``transformers serve MODEL [--continuous-batching]`` builds (its handlers, its generation managers)
and runs it under uvicorn, with three additions in front of it:

- **validation**: an empty prompt, a ``max_tokens`` outside 1..(context - prompt), a non-integer
  one or another model's name get a 4xx with a message. ``transformers serve`` 5.23 itself answers a
  wrong model with 400, but an empty prompt kills its continuous-batching worker (every later
  request is a 503) and an absurd ``max_tokens`` is accepted;
- **static batching** (``--batching static``): the lab's batcher over ``model.generate``: up to
  ``--max-batch`` waiting requests run together until the longest is done (the engine has none);
- **statistics**: ``GET /lab/stats``: sequences running and waiting, and the KV cache's free share.

``--batching off`` is ``transformers serve`` without ``--continuous-batching``: one request at a time.
Why a front in the same process and not a proxy: docs/decisions/2026-11-23-llm-serving.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import queue
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

BATCHING = ("continuous", "static", "off")
DEFAULT_MAX_TOKENS = 64  # when a request names none (OpenAI's legacy default is 16; transformers' 1024)
GENERATION_PATHS = ("/v1/completions", "/v1/chat/completions")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BadRequest(ValueError):
    """A request the engine refuses: HTTP ``status`` and a message that says what to change."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def validate(path: str, body: Any, served: str, context: int,
             count_tokens: Callable[[str], int]) -> dict[str, Any]:
    """The request ``body`` for ``path`` checked and completed (``model``, ``max_tokens``), or BadRequest."""
    if not isinstance(body, dict):
        raise BadRequest(400, "the request body must be a JSON object")
    model = body.get("model", served)
    if model != served:
        raise BadRequest(404, f"model {model!r} is not served here; this server serves {served!r}")
    if path == "/v1/completions":
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise BadRequest(400, "prompt must be a non-empty string")
        text = prompt
    else:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("content"), str) and m["content"].strip()
                for m in messages):
            raise BadRequest(400, "messages must be a non-empty list of {role, content} "
                                  "with non-empty content")
        text = "\n".join(m["content"] for m in messages)
    prompt_tokens = count_tokens(text)
    room = context - prompt_tokens
    if room < 1:
        raise BadRequest(400, f"the prompt has {prompt_tokens} tokens; the model's context is {context}")
    key = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    limit = body.get(key, min(DEFAULT_MAX_TOKENS, room))
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise BadRequest(400, f"{key} must be a whole number, got {limit!r}")
    if not 1 <= limit <= room:
        raise BadRequest(400, f"{key}={limit} is outside 1..{room} "
                              f"(context {context} - prompt {prompt_tokens} tokens)")
    return {**body, "model": served, key: limit}


def error_body(status: int, message: str) -> bytes:
    """An OpenAI-style error object."""
    kind = "model_not_found" if status == 404 else "invalid_request_error"
    return json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode()


# ----------------------------------------------------------------------------- static batching

@dataclass
class _Job:
    prompt_ids: list[int]
    max_tokens: int
    loop: asyncio.AbstractEventLoop
    out: asyncio.Queue[int | None] = field(default_factory=asyncio.Queue)
    sent: int = 0

    def push(self, token: int | None) -> None:
        self.loop.call_soon_threadsafe(self.out.put_nowait, token)


class StaticBatcher:
    """Static batching: take up to ``max_batch`` waiting requests, run them as one padded batch until
    the longest is done, then take the next. A request that finished early waits for its batch (its
    tokens are streamed as they come); a request that arrives meanwhile waits for the next batch."""

    def __init__(self, model: Any, tokenizer: Any, max_batch: int, gather_s: float = 0.005) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.max_batch, self.gather_s = max_batch, gather_s
        self.jobs: queue.Queue[_Job] = queue.Queue()
        self.running = 0
        self.batches: dict[int, int] = {}  # batch size -> batches run
        self._thread = threading.Thread(target=self._loop, name="static-batcher", daemon=True)
        self._thread.start()

    def submit(self, prompt_ids: list[int], max_tokens: int) -> _Job:
        job = _Job(prompt_ids, max_tokens, asyncio.get_running_loop())
        self.jobs.put(job)
        return job

    def _loop(self) -> None:
        while True:
            batch = [self.jobs.get()]
            deadline = time.monotonic() + self.gather_s
            while len(batch) < self.max_batch:
                try:
                    batch.append(self.jobs.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
            self.running = len(batch)
            self.batches[len(batch)] = self.batches.get(len(batch), 0) + 1
            try:
                self._run(batch)
            except Exception as exc:  # the requests end; the batcher keeps serving
                print(f"static batch of {len(batch)} failed: {exc!r}", flush=True)
            finally:
                for job in batch:
                    job.push(None)
                self.running = 0

    def _run(self, batch: list[_Job]) -> None:
        import torch

        width = max(len(j.prompt_ids) for j in batch)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.tensor([[pad] * (width - len(j.prompt_ids)) + j.prompt_ids for j in batch])
        mask = torch.tensor([[0] * (width - len(j.prompt_ids)) + [1] * len(j.prompt_ids) for j in batch])
        ids, mask = ids.to(self.model.device), mask.to(self.model.device)
        streamer = _RowStreamer(batch)
        with torch.inference_mode():
            self.model.generate(input_ids=ids, attention_mask=mask, do_sample=False, streamer=streamer,
                                max_new_tokens=max(j.max_tokens for j in batch),
                                min_new_tokens=max(j.max_tokens for j in batch), pad_token_id=pad)


class _RowStreamer:
    """``generate``'s streamer protocol: each step's tokens go to their own request until it has enough."""

    def __init__(self, batch: list[_Job]) -> None:
        self.batch, self.first = batch, True

    def put(self, value: Any) -> None:
        if self.first:  # the prompt
            self.first = False
            return
        for job, token in zip(self.batch, value.reshape(-1).tolist(), strict=True):
            if job.sent < job.max_tokens:
                job.sent += 1
                job.push(int(token))

    def end(self) -> None:
        pass


def _chunk(request_id: str, model: str, text: str, finish: str | None = None,
           usage: dict[str, int] | None = None) -> bytes:
    choice: dict[str, Any] = {"index": 0, "text": text}
    if finish:
        choice["finish_reason"] = finish
    body: dict[str, Any] = {"id": request_id, "object": "text_completion", "created": int(time.time()),
                            "model": model, "choices": [choice]}
    if usage:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n".encode()


async def _static_completion(batcher: StaticBatcher, body: dict[str, Any], send: Send) -> None:
    """Answer one /v1/completions request through the static batcher (streamed or whole)."""
    from tokenizers.decoders import DecodeStream

    tokenizer = batcher.tokenizer
    prompt_ids = tokenizer(body["prompt"])["input_ids"]
    job = batcher.submit(prompt_ids, body["max_tokens"])
    request_id, model = f"cmpl-{uuid.uuid4().hex[:12]}", body["model"]
    decoder = DecodeStream([], skip_special_tokens=True)
    stream = bool(body.get("stream"))
    headers = [(b"content-type", b"text/event-stream" if stream else b"application/json")]
    if stream:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
    pieces: list[str] = []
    while (token := await job.out.get()) is not None:
        text = decoder.step(tokenizer._tokenizer, token) or ""
        pieces.append(text)
        if stream:
            await send({"type": "http.response.body", "body": _chunk(request_id, model, text),
                        "more_body": True})
    usage = {"prompt_tokens": len(prompt_ids), "completion_tokens": job.sent,
             "total_tokens": len(prompt_ids) + job.sent}
    finish = "length" if job.sent >= job.max_tokens else "stop"
    if stream:
        tail = _chunk(request_id, model, "", finish, usage) + b"data: [DONE]\n\n"
        await send({"type": "http.response.body", "body": tail})
        return
    whole = {"id": request_id, "object": "text_completion", "created": int(time.time()), "model": model,
             "choices": [{"index": 0, "text": "".join(pieces), "finish_reason": finish}], "usage": usage}
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(whole).encode()})


# ----------------------------------------------------------------------------- the front

class Front:
    """ASGI middleware in front of transformers' app: validates generation requests (4xx with a
    message), answers ``/lab/stats``, and in static mode serves /v1/completions from the batcher."""

    def __init__(self, app: Any, served: str, tokenizer: Any, context: int,
                 stats: Callable[[], dict[str, Any]], batcher: StaticBatcher | None = None) -> None:
        self.app, self.served, self.tokenizer, self.context = app, served, tokenizer, context
        self.stats, self.batcher = stats, batcher

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text)["input_ids"])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path == "/lab/stats":
            await _respond(send, 200, json.dumps(self.stats()).encode())
            return
        if scope["type"] != "http" or scope["method"] != "POST" or path not in GENERATION_PATHS:
            await self.app(scope, receive, send)
            return
        raw = await _read_body(receive)
        try:
            try:
                parsed = json.loads(raw or b"null")
            except ValueError as exc:
                raise BadRequest(400, f"the request body is not JSON: {exc}") from None
            body = validate(path, parsed, self.served, self.context, self.count_tokens)
        except BadRequest as bad:
            await _respond(send, bad.status, error_body(bad.status, str(bad)))
            return
        if self.batcher is not None and path == "/v1/completions":
            await _static_completion(self.batcher, body, send)
            return
        await self.app(scope, _replay(json.dumps(body).encode(), receive), send)


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
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


async def _respond(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def _cb_stats(generation_state: Any) -> dict[str, Any]:
    manager = getattr(generation_state, "_cb_manager", None)
    cb = getattr(manager, "_cb", None)
    processor = getattr(cb, "batch_processor", None)
    if processor is None:
        return {"running": 0, "waiting": 0, "kv_free": None, "kv_blocks": None}
    scheduler = processor.scheduler
    return {"running": len(scheduler.active_requests), "waiting": len(scheduler.waiting_requests),
            "kv_free": round(float(scheduler.cache.compute_free_capacity(relative=True)), 4),
            "kv_blocks": int(scheduler.cache.num_blocks)}


def build_app(model: str, batching: str = "continuous", max_batch: int = 8, cb_block_size: int | None = None,
              cb_num_blocks: int | None = None, cb_max_batch_tokens: int | None = None) -> Front:
    """transformers serve's app for ``model`` (path or Hub id) behind the lab's front."""
    from transformers import ContinuousBatchingConfig
    from transformers.cli.serving.chat_completion import ChatCompletionHandler
    from transformers.cli.serving.completion import CompletionHandler
    from transformers.cli.serving.model_manager import ModelManager
    from transformers.cli.serving.response import ResponseHandler
    from transformers.cli.serving.server import build_server
    from transformers.cli.serving.systemone import SystemOneHandler
    from transformers.cli.serving.transcription import TranscriptionHandler
    from transformers.cli.serving.utils import GenerationState

    if batching not in BATCHING:
        raise ValueError(f"batching={batching!r}: choose one of {', '.join(BATCHING)}")
    continuous = batching == "continuous"
    manager = ModelManager(device="cpu" if not _has_cuda() else "auto", dtype="auto",
                           trust_remote_code=False, attn_implementation=None, continuous_batching=continuous,
                           quantization=None, model_timeout=-1, force_model=model)
    cb_config = ContinuousBatchingConfig(page_size=cb_block_size or 256, num_blocks=cb_num_blocks,
                                         max_batch_tokens=cb_max_batch_tokens)  # page 256: its default
    state = GenerationState(continuous_batching=continuous, compile=False, cb_config=cb_config)
    app = build_server(manager, ChatCompletionHandler(model_manager=manager, generation_state=state),
                       completion_handler=CompletionHandler(model_manager=manager, generation_state=state),
                       response_handler=ResponseHandler(model_manager=manager, generation_state=state),
                       transcription_handler=TranscriptionHandler(manager, state),
                       systemone_handler=SystemOneHandler(model_manager=manager, generation_state=state),
                       generation_state=state)
    loaded, processor = manager.load_model_and_processor(manager.process_model_name(model))
    tokenizer = getattr(processor, "tokenizer", processor)
    context = int(getattr(loaded.config, "max_position_embeddings", 2048))
    batcher = StaticBatcher(loaded, tokenizer, max_batch) if batching == "static" else None

    def stats() -> dict[str, Any]:
        if batcher is not None:
            return {"batching": batching, "running": batcher.running, "waiting": batcher.jobs.qsize(),
                    "kv_free": None, "kv_blocks": None, "batches": dict(batcher.batches)}
        return {"batching": batching, **_cb_stats(state)}

    return Front(app, model, tokenizer, context, stats, batcher)


def _has_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m servelab.llm.engine",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("model", help="model folder or Hub id (the name clients send as 'model')")
    parser.add_argument("--batching", choices=BATCHING, default="continuous")
    parser.add_argument("--max-batch", type=int, default=8, help="static: requests per batch")
    parser.add_argument("--cb-block-size", type=int, help="continuous: KV cache block size (tokens)")
    parser.add_argument("--cb-num-blocks", type=int, help="continuous: KV cache blocks")
    parser.add_argument("--cb-max-batch-tokens", type=int, help="continuous: tokens per forward pass")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads on a CPU (1: two threads oversubscribe a shared 2-core "
                             "machine and a decode step gets up to 30x slower; see the decision note)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    import torch
    import uvicorn

    if not torch.cuda.is_available():
        torch.set_num_threads(args.threads)
    app = build_app(args.model, args.batching, args.max_batch, args.cb_block_size, args.cb_num_blocks,
                    args.cb_max_batch_tokens)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()


__all__ = ["BATCHING", "BadRequest", "Front", "StaticBatcher", "build_app", "validate"]
