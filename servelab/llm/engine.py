"""The LLM engine the lab runs: ``transformers serve``'s own OpenAI-compatible app, with a thin front.

``python -m servelab.llm.engine MODEL --batching continuous|static|off`` builds the same FastAPI app
``transformers serve MODEL [--continuous-batching]`` builds (its handlers, its generation managers)
and runs it under uvicorn, with these additions in front of it (:class:`Front`):

- **validation** (``servelab.llm.validation``): an empty prompt, a ``max_tokens`` outside
  1..(context - prompt), a request larger than the KV cache, a non-integer ``max_tokens`` or another
  model's name get a 4xx with a message. ``transformers serve`` 5.23 itself answers a wrong model with
  400, but an empty prompt or a request larger than the cache kills its continuous-batching worker
  (every later request is a 503) and an absurd ``max_tokens`` is accepted;
- **the fields benchmark tools send** (servelab/llm/fields.py): ``ignore_eos``, ``min_tokens``,
  ``stop: null``, ``stream_options`` (usage in the stream as vLLM sends it), a prompt as a list of one,
  chat content as text parts; a field the engine cannot honour in its batching mode gets a 400 naming
  it (servelab/llm/min_tokens.py holds the end-of-sequence token back until a minimum length);
- **static batching** (``--batching static``): ``/v1/completions`` goes to the lab's batcher,
  servelab/llm/static_batcher.py (the engine has none);
- **only its own routes** (servelab/llm/front.py): generation, the model list, health, the lab's
  statistics and the Swagger pages; transformers' others (``/reset``, ``/load_model``,
  ``/v1/responses``, ...) answer 404; a body over ``--max-body-bytes`` gets 413 before it is read, a
  prompt longer than the context could hold a 400 before it is tokenized, and requests past
  ``--max-in-flight`` a 429;
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
import gc
import os
import socket
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn

from servelab.core.procs import PortError, bind_port, taken_port_line
from servelab.llm.front import Front
from servelab.llm.static_batcher import StaticBatcher
from servelab.llm.validation import (
    BATCHING,
    CB_BLOCK_SIZE,
    CB_MAX_BATCH_TOKENS,
    CB_NUM_BLOCKS,
    MAX_BODY_BYTES,
    MAX_IN_FLIGHT,
    describe_cache,
)

# uvicorn's wait for responses still running after a stop signal, and the wait for the generation
# thread: the front ends its streams at once, these bound anything else (the decision note of 2026-11-25)
GRACEFUL_SHUTDOWN_S = 3
GENERATION_STOP_S = 2.0
# the engine's port when none is given: beside FastAPI's and Triton's 8000, and the port its compose stack
# publishes on a GPU host (servelab/llm/server.py's COMPOSE_PORT).
# Why: docs/decisions/2026-11-28-servers-side-by-side.md
DEFAULT_PORT = 8010


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
              cb_max_batch_tokens: int = CB_MAX_BATCH_TOKENS, max_body: int = MAX_BODY_BYTES,
              max_in_flight: int = MAX_IN_FLIGHT) -> Front:
    """transformers serve's app for ``model`` (path or Hub id) behind the lab's front; with continuous
    batching, a KV cache of ``cb_num_blocks`` blocks of ``cb_block_size`` tokens and forward passes of
    up to ``cb_max_batch_tokens`` tokens; bodies of at most ``max_body`` bytes, at most ``max_in_flight``
    generation requests at once."""
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
                 generation_defaults=defaults, max_body=max_body, max_in_flight=max_in_flight)


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
    flight to finish before it stops, with no limit unless ``timeout_graceful_shutdown`` is set), and
    printing ``ready`` once it listens."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None], ready: str = "") -> None:
        super().__init__(config)
        self.on_exit = on_exit
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.ready:
            print(self.ready, flush=True)

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
    parser.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES,
                        help="a larger request body gets 413 before it is read (default %(default)s)")
    parser.add_argument("--max-in-flight", type=int, default=MAX_IN_FLIGHT,
                        help="generation requests answered at once; more get 429 (default %(default)s)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help="(default %(default)s: FastAPI and Triton take 8000)")
    args = parser.parse_args(argv)
    # the port first: one line and no model load when another program holds it
    try:
        listening = bind_port(args.host, args.port)
    except PortError as exc:
        raise SystemExit(f"LLM engine: {exc} (--port, --host)") from None
    if listening is None:
        raise SystemExit(taken_port_line("LLM engine", args.host, args.port, "--port {port}"))
    import torch

    if not torch.cuda.is_available():
        torch.set_num_threads(args.threads)
    app = build_app(args.model, args.batching, args.max_batch, args.cb_block_size, args.cb_num_blocks,
                    args.cb_max_batch_tokens, args.max_body_bytes, args.max_in_flight)
    # what the imports and the model load made lives until the end: out of the collector's sight, the
    # full collections the stop runs (transformers calls gc.collect three times) take no time
    gc.freeze()
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning",
                            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
    host = f"[{args.host}]" if ":" in args.host else args.host
    ready = (f"LLM engine ({args.batching} batching) serving {args.model} on http://{host}:{args.port} "
             "(OpenAI API under /v1, Swagger at /docs; Ctrl-C stops it)")
    _Server(config, app.close, ready).run(sockets=[listening])


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


__all__ = ["BATCHING", "Front", "build_app", "main"]
