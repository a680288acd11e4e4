"""Static batching for the engine's ``--batching static`` (``transformers serve`` has none).

:class:`StaticBatcher` takes up to ``max_batch`` waiting requests and runs them as one padded batch
through ``model.generate`` until the longest is done, then takes the next; each request's tokens are
streamed to it as they come. A request ends at its ``max_tokens`` or at an end-of-sequence token, which
is held back until it has its minimum length (``min_tokens``; ``ignore_eos``: ``max_tokens``).
:func:`static_completion` answers one ``/v1/completions`` request from it in OpenAI's shape (streamed or
whole). :meth:`StaticBatcher.close` ends the running batch at its
next decode step. The engine (servelab/llm/engine.py) routes requests here.
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from servelab.llm.openai_shape import Send, completion_chunk, usage_object


@dataclass
class _Job:
    prompt_ids: list[int]
    max_tokens: int
    loop: asyncio.AbstractEventLoop
    min_tokens: int = 0  # no end-of-sequence token before this many tokens
    out: asyncio.Queue[int | None] = field(default_factory=asyncio.Queue)
    sent: int = 0
    stopped: bool = False  # ended by its end-of-sequence token (the last token sent)

    def push(self, token: int | None) -> None:
        self.loop.call_soon_threadsafe(self.out.put_nowait, token)


class StaticBatcher:
    """Static batching: take up to ``max_batch`` waiting requests, run them as one padded batch until
    the longest is done, then take the next. A request that finished early waits for its batch (its
    tokens are streamed as they come); a request that arrives meanwhile waits for the next batch."""

    def __init__(self, model: Any, tokenizer: Any, max_batch: int, gather_s: float = 0.005) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.max_batch, self.gather_s = max_batch, gather_s
        self.jobs: queue.Queue[_Job | None] = queue.Queue()  # None: wake up and stop
        self.running = 0
        self.batches: dict[int, int] = {}  # batch size -> batches run
        self.closing = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="static-batcher", daemon=True)
        self._thread.start()

    def submit(self, prompt_ids: list[int], max_tokens: int, min_tokens: int = 0) -> _Job:
        job = _Job(prompt_ids, max_tokens, asyncio.get_running_loop(), min_tokens)
        self.jobs.put(job)
        return job

    def close(self, timeout: float) -> bool:
        """Stop: the batch running ends at its next decode step and the thread ends; whether it did
        within ``timeout`` seconds."""
        self.closing.set()
        self.jobs.put(None)
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _loop(self) -> None:
        while not self.closing.is_set():
            first = self.jobs.get()
            if first is None:
                break
            batch = [first]
            deadline = time.monotonic() + self.gather_s
            while len(batch) < self.max_batch:
                try:
                    job = self.jobs.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if job is None:
                    break
                batch.append(job)
            self.running = len(batch)
            self.batches[len(batch)] = self.batches.get(len(batch), 0) + 1
            try:
                self._run(batch)
            except _Stopped:
                pass
            except Exception as exc:  # the requests end; the batcher keeps serving
                print(f"static batch of {len(batch)} failed: {exc!r}", flush=True)
            finally:
                for job in batch:
                    job.push(None)
                self.running = 0

    def _run(self, batch: list[_Job]) -> None:
        import torch
        from transformers import LogitsProcessorList

        from servelab.llm.min_tokens import RowMinTokens, eos_ids

        width = max(len(j.prompt_ids) for j in batch)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.tensor([[pad] * (width - len(j.prompt_ids)) + j.prompt_ids for j in batch])
        mask = torch.tensor([[0] * (width - len(j.prompt_ids)) + [1] * len(j.prompt_ids) for j in batch])
        ids, mask = ids.to(self.model.device), mask.to(self.model.device)
        eos = eos_ids(self.model.generation_config)
        streamer = _RowStreamer(batch, self.closing, eos)
        least = LogitsProcessorList([RowMinTokens([j.min_tokens for j in batch], width, eos)])
        with torch.inference_mode():
            self.model.generate(input_ids=ids, attention_mask=mask, do_sample=False, streamer=streamer,
                                max_new_tokens=max(j.max_tokens for j in batch), logits_processor=least,
                                pad_token_id=pad)


class _Stopped(Exception):
    """Raised inside ``generate`` (from its streamer) to end a batch when the engine stops."""


class _RowStreamer:
    """``generate``'s streamer protocol: each step's tokens go to their own request until it has enough
    or its end-of-sequence token (one of ``eos``) came; once ``closing`` is set the next step raises
    :class:`_Stopped`, which ends ``generate``."""

    def __init__(self, batch: list[_Job], closing: threading.Event, eos: list[int]) -> None:
        self.batch, self.first, self.closing, self.eos = batch, True, closing, set(eos)

    def put(self, value: Any) -> None:
        if self.closing.is_set():
            raise _Stopped
        if self.first:  # the prompt
            self.first = False
            return
        for job, token in zip(self.batch, value.reshape(-1).tolist(), strict=True):
            if job.stopped or job.sent >= job.max_tokens:
                continue
            job.sent += 1
            job.push(int(token))
            # held back until the request's minimum (RowMinTokens), so the answer may end here
            job.stopped = int(token) in self.eos

    def end(self) -> None:
        pass


async def static_completion(batcher: StaticBatcher, body: dict[str, Any], send: Send,
                            min_tokens: int = 0) -> None:
    """Answer one /v1/completions request through the static batcher (streamed or whole); no
    end-of-sequence token ends it before ``min_tokens`` tokens."""
    from tokenizers.decoders import DecodeStream

    tokenizer = batcher.tokenizer
    prompt_ids = tokenizer(body["prompt"])["input_ids"]
    job = batcher.submit(prompt_ids, body["max_tokens"], min_tokens)
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
            await send({"type": "http.response.body", "body": completion_chunk(request_id, model, text),
                        "more_body": True})
    usage = usage_object(len(prompt_ids), job.sent)
    finish = "stop" if job.stopped or job.sent < job.max_tokens else "length"
    if stream:
        tail = completion_chunk(request_id, model, "", finish, usage) + b"data: [DONE]\n\n"
        await send({"type": "http.response.body", "body": tail})
        return
    whole = {"id": request_id, "object": "text_completion", "created": int(time.time()), "model": model,
             "choices": [{"index": 0, "text": "".join(pieces), "finish_reason": finish}], "usage": usage}
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(whole).encode()})


__all__ = ["StaticBatcher", "static_completion"]
