"""The request fields the engine takes besides the prompt and the length, and how it honours each.

What the common LLM benchmark tools send (guidellm, vLLM's benchmark client, genai-perf, aiperf) and
OpenAI's own fields, checked against what the engine's batching mode can do (:func:`take`):

- ``ignore_eos`` (vLLM's): the answer has exactly ``max_tokens`` tokens: the end-of-sequence token is
  held back until then (as ``min_tokens = max_tokens``);
- ``min_tokens`` (vLLM's): the end-of-sequence token is held back until the answer has that many tokens;
- ``stream_options``: ``include_usage`` (OpenAI's) and ``continuous_usage_stats`` (vLLM's), with
  ``stream: true`` only; the usage goes into the stream as servelab/llm/openai_shape.py says;
- ``stop``: ``null`` or empty asks for nothing; stop sequences only with ``--batching off``;
- sampling (``temperature``, ``top_p``, ``seed``, ``frequency_penalty``, ``logit_bias``,
  ``generation_config``) per request only with ``--batching off``, and sampling itself only for a model
  whose generation config samples (transformers serve never switches sampling on): transformers'
  continuous batching takes its sampling settings once, from its first request, and the static batcher
  decodes greedily. A value that asks for what the engine does anyway (``temperature: 0`` on a greedy
  engine) is accepted; in continuous and static batching the field is then dropped, so the first
  request cannot change the others;
- fields transformers' app accepts and ignores (``n``, ``best_of``, ``echo``, ``logprobs``,
  ``presence_penalty``, ...) and vLLM's ``repetition_penalty``: accepted at the value that asks for
  nothing (``n: 1``, ``repetition_penalty: 1``, ``logprobs: null``), refused otherwise.

A field the engine cannot honour gets a 400 that names it (:class:`BadRequest`); a field nobody here
knows still gets transformers' 422 that names it. Only JSON here: no model, no transformers. Which tool
sends which body: tests/data/llm_benchmark_bodies.json; why:
docs/decisions/2026-11-26-llm-engine-defaults-and-benchmark-tools.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servelab.llm.openai_shape import BadRequest

# accepted when absent, null or one of these values (they ask for nothing); refused otherwise
NEUTRAL: dict[str, tuple[Any, ...]] = {
    "n": (1,), "best_of": (1,), "echo": (False,), "logprobs": (False,), "top_logprobs": (0,),
    "presence_penalty": (0,), "repetition_penalty": (1,), "response_format": ({"type": "text"},),
    "modalities": (["text"],), "parallel_tool_calls": (), "audio": (), "prediction": (), "function_call": (),
    "functions": (), "reasoning_effort": (), "web_search_options": (), "store": (False,),
}
# honoured per request only by `--batching off` (transformers' model.generate, one request at a time)
SAMPLING = ("temperature", "top_p", "seed", "frequency_penalty", "logit_bias", "stop", "generation_config")
STREAM_OPTIONS = ("include_usage", "continuous_usage_stats")


@dataclass(frozen=True)
class Taken:
    """What :func:`take` made of a request: the body for transformers' app (or the static batcher),
    the answer's minimum length before an end-of-sequence token may end it, and the stream's usage
    (``None``, ``"final"`` or ``"continuous"``: servelab/llm/openai_shape.py)."""

    body: dict[str, Any]
    min_tokens: int
    usage: str | None


def take(body: dict[str, Any], max_tokens: int, batching: str, greedy: bool) -> Taken:
    """``body``'s fields checked against what the engine does with ``batching``, whose decoding is
    ``greedy`` (the static batcher always; otherwise as the model's generation config says), or
    :class:`BadRequest` naming the first field it cannot honour."""
    out = dict(body)
    for name, values in NEUTRAL.items():
        value = out.pop(name, None)  # accepted or refused: transformers' app need not see it
        if value is not None and not any(_same(value, v) for v in values):
            instead = f"send {values[0]!r} or leave it out" if values else "leave it out"
            raise BadRequest(400, f"{name}={value!r} is not supported by this engine ({instead})", name)
    ignore_eos = out.pop("ignore_eos", None)
    if ignore_eos is not None and not isinstance(ignore_eos, bool):
        raise BadRequest(400, f"ignore_eos must be true or false, got {ignore_eos!r}", "ignore_eos")
    least = out.pop("min_tokens", None)
    whole = isinstance(least, int) and not isinstance(least, bool)
    if least is not None and not (whole and 0 <= least <= max_tokens):
        raise BadRequest(400, f"min_tokens={least!r} must be a whole number in 0..max_tokens ({max_tokens})",
                         "min_tokens")
    usage = _usage(out.pop("stream_options", None), bool(out.get("stream")))
    _sampling_as_the_engine_does(out, batching, greedy)
    return Taken(out, max_tokens if ignore_eos else (least or 0), usage)


def _usage(options: Any, stream: bool) -> str | None:
    if options is None:
        return None
    if not stream:
        raise BadRequest(400, "stream_options is only for streamed answers (stream: true)", "stream_options")
    if not isinstance(options, dict):
        raise BadRequest(400, f"stream_options must be an object, got {options!r}", "stream_options")
    for key, value in options.items():
        if key not in STREAM_OPTIONS:
            raise BadRequest(400, f"stream_options.{key} is not supported by this engine "
                                  f"(it takes {', '.join(STREAM_OPTIONS)})", f"stream_options.{key}")
        if value is not None and not isinstance(value, bool):
            raise BadRequest(400, f"stream_options.{key} must be true or false, got {value!r}",
                             f"stream_options.{key}")
    if not options.get("include_usage"):
        return None  # vLLM: continuous_usage_stats counts only with include_usage
    return "continuous" if options.get("continuous_usage_stats") else "final"


def _sampling_as_the_engine_does(body: dict[str, Any], batching: str, greedy: bool) -> None:
    """Accept a sampling field only where the engine honours it: per request with ``--batching off``
    (sampling itself only where the model samples: transformers serve never switches sampling on), and
    otherwise only where it asks for what the engine does anyway; then drop it in continuous and static
    batching (transformers' continuous batching would take the first request's for every request)."""
    per_request = batching == "off"
    if per_request:
        why = ("the model's generation config decodes greedily and transformers serve does not sample per "
               "request")
    elif batching == "continuous":
        why = ("transformers' continuous batching takes its sampling settings from its first request, not "
               "per request")
    else:
        why = "the static batcher decodes greedily"
    zero = _number(body.get("temperature")) == 0
    asks = {
        "temperature": body.get("temperature") is not None and not (greedy and zero),
        "top_p": body.get("top_p") is not None and _number(body["top_p"]) != 1 and not (greedy and zero),
        "seed": body.get("seed") is not None and not greedy,
    }
    if per_request and not greedy:
        return  # transformers' model.generate takes every one of them per request
    if not per_request:
        asks |= {"frequency_penalty": body.get("frequency_penalty") not in (None, 0),
                 "logit_bias": body.get("logit_bias") not in (None, {}),
                 "stop": body.get("stop") not in (None, "", []),
                 "generation_config": body.get("generation_config") is not None}
    for name in SAMPLING:
        if asks.get(name):
            decodes = "greedily" if greedy else "with the model's own sampling settings"
            instead = "" if per_request else " (--batching off takes it per request)"
            raise BadRequest(400, f"{name}={body[name]!r} cannot be honoured with --batching {batching}: "
                                  f"{why}; this engine decodes {decodes}{instead}", name)
        if not per_request:
            body.pop(name, None)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _same(value: Any, neutral: Any) -> bool:
    if isinstance(neutral, bool) or isinstance(value, bool):
        return value is neutral
    return bool(value == neutral)


__all__ = ["NEUTRAL", "SAMPLING", "STREAM_OPTIONS", "Taken", "take"]
