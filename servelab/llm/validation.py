"""The engine's request checks and its defaults, kept free of heavy imports (the chameleon controller and
the notebook parameters read the defaults without uvicorn or torch): the lab's KV cache (``CB_*``), what
:func:`validate` makes of a generation request, and what a cache costs in memory (``describe_cache``).
``servelab.llm.engine`` puts them in front of ``transformers serve``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from servelab.llm.fields import take
from servelab.llm.openai_shape import BadRequest

BATCHING = ("continuous", "static", "off")
# The continuous-batching cache the engine starts with unless told otherwise: the command
# docs/guides/by-hand.md gives,
# notebook 09 (servelab.llm.server.EngineOptions, servelab.lab.params) and the compose stack all start
# these. Left to itself transformers sizes the cache from free memory (GBs on a CPU, and a first
# request that takes 20 s): docs/decisions/2026-11-26-llm-engine-defaults-and-benchmark-tools.md
CB_BLOCK_SIZE = 32  # tokens per KV cache block
CB_NUM_BLOCKS = 48  # blocks in the KV cache
CB_MAX_BATCH_TOKENS = 512  # tokens in one forward pass (a longer prompt is prefilled in chunks)
DEFAULT_MAX_TOKENS = 64  # when a request names none (OpenAI's legacy default is 16; transformers' 1024)


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
