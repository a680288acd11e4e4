"""The LLM engine the lab runs: ``transformers serve``'s own OpenAI-compatible app, with a thin front.

``python -m servelab.llm.engine MODEL --batching continuous|static|off`` builds the same FastAPI app
``transformers serve MODEL [--continuous-batching]`` builds (its handlers, its generation managers)
and runs it under uvicorn, with these additions in front of it (:class:`Front`):

- **validation** (:func:`validate`): an empty prompt, a ``max_tokens`` outside 1..(context - prompt),
  a request larger than the KV cache, a non-integer ``max_tokens`` or another model's name get a 4xx
  with a message. ``transformers serve`` 5.23 itself answers a wrong model with 400, but an empty prompt
  or a request larger than the cache kills its continuous-batching worker (every later request is a
  503) and an absurd ``max_tokens`` is accepted;
- **the fields benchmark tools send** (servelab/llm/fields.py): ``ignore_eos``, ``min_tokens``,
  ``stop: null``, ``stream_options`` (usage in the stream as vLLM sends it), a prompt as a list of one,
  chat content as text parts; a field the engine cannot honour in its batching mode gets a 400 naming
  it (servelab/llm/min_tokens.py holds the end-of-sequence token back until a minimum length);
- **static batching** (``--batching static``): ``/v1/completions`` goes to the lab's batcher,
  servelab/llm/static_batcher.py (the engine has none);
- **statistics**: ``GET /lab/stats``: sequences running and waiting, and the KV cache's free share;
- **OpenAI clients' view**: ``GET /v1/models`` (and ``/v1/models/{id}``) list exactly the served
  model under the name clients send; errors, streams and model names as OpenAI's clients expect
  them: servelab/llm/openai_shape.py;
- **a prompt stop**: on SIGTERM/SIGINT the streams in flight end at once with an error event and
  ``[DONE]`` (a request not yet answered gets a 503), the generation threads stop, the process exits.

``--batching off`` is ``transformers serve`` without ``--continuous-batching``: one request at a time.
The continuous-batching cache is the lab's (``CB_*`` below) unless the ``--cb-*`` flags say otherwise.
Why a front in the same process and not a proxy: docs/decisions/2026-11-23-llm-serving.md; the
OpenAI clients and the stop: docs/decisions/2026-11-25-llm-engine-openai-clients.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import sys
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

import uvicorn

from servelab.llm.fields import take
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

BATCHING = ("continuous", "static", "off")
# The continuous-batching cache the engine starts with unless told otherwise: the README's command,
# notebook 09 (servelab.llm.server.EngineOptions, servelab.lab.params) and the compose stack all start
# these. Left to itself transformers sizes the cache from free memory (GBs on a CPU, and a first
# request that takes 20 s): docs/decisions/2026-11-26-llm-engine-defaults-and-benchmark-tools.md
CB_BLOCK_SIZE = 32  # tokens per KV cache block
CB_NUM_BLOCKS = 48  # blocks in the KV cache
CB_MAX_BATCH_TOKENS = 512  # tokens in one forward pass (a longer prompt is prefilled in chunks)
DEFAULT_MAX_TOKENS = 64  # when a request names none (OpenAI's legacy default is 16; transformers' 1024)
# uvicorn's wait for responses still running after a stop signal, and the wait for the generation
# thread: the front ends its streams at once, these bound anything else (the decision note of 2026-11-25)
GRACEFUL_SHUTDOWN_S = 3
GENERATION_STOP_S = 2.0
SHUTTING_DOWN = "the engine is shutting down; this answer was cut short (send the request again)"


@dataclass(frozen=True)
class Request:
    """A generation request as the front checked it: the body for transformers' app (or the static
    batcher), its prompt's tokens, the answer's minimum length before an end-of-sequence token may end
    it, and the usage its stream carries (servelab/llm/fields.py, servelab/llm/openai_shape.py)."""

    body: dict[str, Any]
    prompt_tokens: int
    min_tokens: int = 0
    usage: str | None = None


def validate(path: str, body: Any, served: str, context: int, count_tokens: Callable[[str], int], *,
             batching: str = "continuous", greedy: bool = True, cache_tokens: int | None = None,
             count_chat: Callable[[list[dict[str, Any]]], int] | None = None) -> Request:
    """The request ``body`` for ``path`` checked and completed (``model``, ``max_tokens``, one prompt as
    text, chat content as text), its sampling and streaming fields as the engine honours them
    (:func:`servelab.llm.fields.take`), or BadRequest. A prompt and answer must fit the model's
    ``context`` and, with continuous batching, the KV cache (``cache_tokens``): a request larger than
    the cache would stop transformers' batching worker."""
    if not isinstance(body, dict):
        raise BadRequest(400, "the request body must be a JSON object")
    model = body.get("model", served)
    if model != served:
        raise BadRequest(404, f"model {model!r} is not served here; this server serves {served!r}",
                         "model", "model_not_found")
    if path == "/v1/completions":
        field_name = "prompt"
        prompt = _one_prompt(body.get("prompt"))
        body = {**body, "prompt": prompt}
        prompt_tokens = count_tokens(prompt)
    else:
        field_name = "messages"
        messages = _text_messages(body.get("messages"))
        body = {**body, "messages": messages}
        prompt_tokens = (count_chat(messages) if count_chat is not None
                         else count_tokens("\n".join(m["content"] for m in messages)))
    holds, what = context, f"context {context}"
    if cache_tokens is not None and cache_tokens < context:
        holds, what = cache_tokens, f"KV cache {cache_tokens} (--cb-num-blocks x --cb-block-size)"
    room = holds - prompt_tokens
    if room < 1:
        said = (f"the model's context is {context}" if holds == context
                else f"the engine's KV cache holds {cache_tokens} (--cb-num-blocks x --cb-block-size)")
        raise BadRequest(400, f"the prompt has {prompt_tokens} tokens; {said}", field_name,
                         "context_length_exceeded")
    key = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    limit = body.get(key, min(DEFAULT_MAX_TOKENS, room))
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise BadRequest(400, f"{key} must be a whole number, got {limit!r}", key)
    if not 1 <= limit <= room:
        raise BadRequest(400, f"{key}={limit} is outside 1..{room} ({what} - prompt {prompt_tokens} tokens)",
                         key)
    taken = take({**body, "model": served, key: limit}, limit, batching, greedy)
    return Request(taken.body, prompt_tokens, taken.min_tokens, taken.usage)


def _one_prompt(prompt: Any) -> str:
    """The completion's prompt as text: a string, or a list of one string (genai-perf and aiperf send
    their prompt so); several prompts or token ids are refused."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    elif isinstance(prompt, list) and len(prompt) > 1:
        raise BadRequest(400, "prompt must be one prompt per request (a string), got a list of "
                              f"{len(prompt)}", "prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise BadRequest(400, "prompt must be a non-empty string", "prompt")
    return prompt


def _text_messages(messages: Any) -> list[dict[str, Any]]:
    """Chat messages with their content as text: a string, or text parts (``{"type": "text", "text":
    ...}``: guidellm and vLLM's benchmark client send them) joined with a space as transformers joins
    them for a language model; any other part is refused (the model reads text only)."""
    bad = BadRequest(400, "messages must be a non-empty list of {role, content} with non-empty content",
                     "messages")
    if not isinstance(messages, list) or not messages:
        raise bad
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise bad
        content = message.get("content")
        if isinstance(content, list):
            if not all(isinstance(part, dict) and part.get("type") == "text"
                       and isinstance(part.get("text"), str) for part in content):
                raise BadRequest(400, f"messages[{i}].content: only text parts ({{'type': 'text', 'text': "
                                      "...}) are taken; the model reads text only", "messages")
            content = " ".join(part["text"] for part in content)
        if not isinstance(content, str) or not content.strip():
            raise bad
        out.append({**message, "content": content})
    return out


# ----------------------------------------------------------------------------- the front

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
                 generation_defaults: dict[str, Any] | None = None) -> None:
        self.app, self.served, self.tokenizer, self.context = app, served, tokenizer, context
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
        if path == "/lab/stats":
            await respond(send, 200, json.dumps(self.stats()).encode())
        elif method in ("GET", "OPTIONS") and (path == MODELS_PATH or path.startswith(MODELS_PATH + "/")):
            await self._models(path, send)
        elif method == "POST" and path in GENERATION_PATHS:
            await self._generate(scope, receive, send)
        elif path.startswith("/v1/"):
            await self.app(scope, receive, OpenAIShape(send, self.served, done_marker=False))
        else:
            await self.app(scope, receive, send)

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
        path = scope["path"]
        raw = await _read_body(receive)
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


def build_app(model: str, batching: str = "continuous", max_batch: int = 8,
              cb_block_size: int = CB_BLOCK_SIZE, cb_num_blocks: int = CB_NUM_BLOCKS,
              cb_max_batch_tokens: int = CB_MAX_BATCH_TOKENS) -> Front:
    """transformers serve's app for ``model`` (path or Hub id) behind the lab's front; with continuous
    batching, a KV cache of ``cb_num_blocks`` blocks of ``cb_block_size`` tokens and forward passes of
    up to ``cb_max_batch_tokens`` tokens."""
    from transformers import ContinuousBatchingConfig
    from transformers.cli.serving.chat_completion import ChatCompletionHandler
    from transformers.cli.serving.completion import CompletionHandler
    from transformers.cli.serving.model_manager import ModelManager
    from transformers.cli.serving.response import ResponseHandler
    from transformers.cli.serving.server import build_server
    from transformers.cli.serving.systemone import SystemOneHandler
    from transformers.cli.serving.transcription import TranscriptionHandler

    from servelab.llm.min_tokens import GenerationState

    if batching not in BATCHING:
        raise ValueError(f"batching={batching!r}: choose one of {', '.join(BATCHING)}")
    continuous = batching == "continuous"
    manager = ModelManager(device="cpu" if not _has_cuda() else "auto", dtype="auto",
                           trust_remote_code=False, attn_implementation=None, continuous_batching=continuous,
                           quantization=None, model_timeout=-1, force_model=model)
    cb_config = ContinuousBatchingConfig(page_size=cb_block_size, num_blocks=cb_num_blocks,
                                         max_batch_tokens=cb_max_batch_tokens)
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
    defaults = {key: value for key, value in loaded.generation_config.to_diff_dict().items()
                if key != "transformers_version"}
    if continuous:
        print(describe_cache(loaded.config, loaded.dtype, cb_block_size, cb_num_blocks, cb_max_batch_tokens),
              flush=True)

    device = "cuda" if _has_cuda() else "cpu"  # where the model computes (the stats say it, rows record it)

    def stats() -> dict[str, Any]:
        if batcher is not None:
            return {"batching": batching, "device": device, "running": batcher.running,
                    "waiting": batcher.jobs.qsize(), "kv_free": None, "kv_blocks": None,
                    "batches": dict(batcher.batches)}
        return {"batching": batching, "device": device, **_cb_stats(state)}

    return Front(app, model, tokenizer, context, stats, batcher,
                 on_stop=lambda: _stop_generation(state, batcher), batching=batching,
                 greedy=not loaded.generation_config.do_sample,
                 cache_tokens=cb_num_blocks * cb_block_size if continuous else None,
                 generation_defaults=defaults)


def kv_bytes_per_token(config: Any, dtype: Any) -> int:
    """What one token costs in the KV cache: keys and values, for every layer and KV head."""
    import torch

    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return 2 * config.num_hidden_layers * heads * head_dim * torch.empty((), dtype=dtype).element_size()


def describe_cache(config: Any, dtype: Any, block_size: int, num_blocks: int, max_batch_tokens: int) -> str:
    """One line for the engine's log: the KV cache's tokens and memory, and the forward pass's size."""
    per_token = kv_bytes_per_token(config, dtype)
    tokens = block_size * num_blocks
    return (f"KV cache: {num_blocks} blocks x {block_size} tokens = {tokens:,} tokens x "
            f"{per_token / 1024:g} KiB = {tokens * per_token / 2**20:.1f} MiB (--cb-num-blocks, "
            f"--cb-block-size); up to {max_batch_tokens} tokens per forward pass (--cb-max-batch-tokens)")


def _stop_generation(state: Any, batcher: StaticBatcher | None) -> None:
    """Stop the generation threads at their next step (the front has ended the streams by then).
    transformers' batching thread is not a daemon: left running, it keeps the process alive."""
    if batcher is not None:
        batcher.close(GENERATION_STOP_S)
    manager = getattr(state, "_cb_manager", None)
    cb = getattr(manager, "_cb", None)
    if cb is not None and cb.is_running():
        cb.stop(block=True, timeout=GENERATION_STOP_S, hard_stop=True)
    state._cb_manager = None  # stopped: GenerationState.shutdown would stop it again and warn


class _Server(uvicorn.Server):
    """uvicorn's server, telling the front at the stop signal (uvicorn alone waits for every stream in
    flight to finish before it stops, with no limit unless ``timeout_graceful_shutdown`` is set)."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self.on_exit()


def _has_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m servelab.llm.engine",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("model", help="model folder or Hub id (the name clients send as 'model')")
    parser.add_argument("--batching", choices=BATCHING, default="continuous")
    parser.add_argument("--max-batch", type=int, default=8, help="static: requests per batch")
    parser.add_argument("--cb-num-blocks", type=int, default=CB_NUM_BLOCKS,
                        help="continuous: KV cache blocks (default %(default)s). Memory: blocks x block "
                             "size x the model's KV bytes per token (2 x layers x KV heads x head size x "
                             "bytes per value), printed at start: 12 MiB for the lab's model. A request's "
                             "prompt and answer must fit in the cache: raise it for a longer context")
    parser.add_argument("--cb-block-size", type=int, default=CB_BLOCK_SIZE,
                        help="continuous: tokens per KV cache block (default %(default)s). Memory: the cache "
                             "holds blocks x block size tokens, so a larger block costs that much more for "
                             "the same number of blocks (transformers' own default, 256, costs 8x)")
    parser.add_argument("--cb-max-batch-tokens", type=int, default=CB_MAX_BATCH_TOKENS,
                        help="continuous: tokens in one forward pass (default %(default)s); a longer prompt "
                             "is prefilled in chunks. Memory: the forward pass's buffers grow with it "
                             "(transformers' own choice from free memory cost about 0.3 GB more here)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads on a CPU (1: two threads oversubscribe a shared 2-core "
                             "machine and a decode step gets up to 30x slower; see the decision note)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        torch.set_num_threads(args.threads)
    app = build_app(args.model, args.batching, args.max_batch, args.cb_block_size, args.cb_num_blocks,
                    args.cb_max_batch_tokens)
    # what the imports and the model load made lives until the end: out of the collector's sight, the
    # full collections the stop runs (transformers calls gc.collect three times) take no time
    gc.freeze()
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning",
                            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
    _Server(config, app.close).run()


def _exit_now() -> None:
    """End the process without the interpreter's teardown. uvicorn re-raises the stop signal on its
    way out, which ends the process; where it is PID 1 (a container without an init) the kernel
    ignores that, and tearing down torch's and transformers' objects then takes seconds. By now the
    generation threads are stopped and every answer is sent."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
    _exit_now()


__all__ = ["BATCHING", "BadRequest", "Front", "build_app", "validate"]
