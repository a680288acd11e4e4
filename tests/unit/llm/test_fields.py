"""The fields benchmark tools send reach the engine as it can honour them (servelab/llm/fields.py): the
bodies of guidellm, vLLM's benchmark client, genai-perf and aiperf, pinned as their sources build them
(tests/data/llm_benchmark_bodies.json, with where each came from), are taken; what the engine cannot
honour is refused with a 400 naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servelab.llm.fields import NEUTRAL, take
from servelab.llm.openai_shape import BadRequest
from servelab.llm.validation import validate

BODIES = json.loads((Path(__file__).parents[2] / "data" / "llm_benchmark_bodies.json").read_text())["bodies"]
SERVED = "artifacts/llm"
CASES = [pytest.param(entry["endpoint"], entry["body"], id=f"{entry['tool']} {entry['endpoint']}")
         for entry in BODIES] + [
    pytest.param(entry["endpoint"], entry["as_sent"]["body"],
                 id=f"{entry['tool']} {entry['endpoint']} as sent")
    for entry in BODIES if "as_sent" in entry]


def words(text: str) -> int:
    return len(text.split())


def transformers_keys(endpoint: str) -> set[str]:
    """The fields transformers serve's handler takes without its 422 "Unexpected fields"."""
    if endpoint == "/v1/completions":
        from transformers.cli.serving.completion import CompletionHandler as Handler
    else:
        from transformers.cli.serving.chat_completion import ChatCompletionHandler as Handler  # type: ignore[assignment]
    return set(Handler._valid_params_class.__mutable_keys__)


def test_every_pinned_body_says_where_it_came_from() -> None:
    tools = {entry["tool"].split()[0] for entry in BODIES}
    assert {"guidellm", "vLLM", "genai-perf", "aiperf"} <= tools
    for entry in BODIES:
        source = entry["source"]  # a commit of the tool's repository, or its released wheel
        assert source["repository"].count("/") == 1 and source["path"], entry
        assert len(source["commit"] or "") == 40 or "sha256" in source["released"], entry
        assert entry["command"] and entry["endpoint"] in ("/v1/completions", "/v1/chat/completions")


@pytest.mark.parametrize("batching", ["continuous", "static", "off"])
@pytest.mark.parametrize(("endpoint", "body"), CASES)
def test_each_tools_body_is_taken_for_exactly_max_tokens(endpoint: str, body: dict[str, Any],
                                                         batching: str) -> None:
    request = validate(endpoint, body, SERVED, 1024, words, batching=batching, greedy=True, cache_tokens=1536)
    asked = body.get("max_completion_tokens", body.get("max_tokens"))
    assert body.get("ignore_eos") is True and request.min_tokens == asked == 32  # no EOS before 32 tokens
    options = body.get("stream_options") or {}
    expected = ("continuous" if options.get("continuous_usage_stats") else "final") if options else None
    assert request.usage == expected
    # what goes on to transformers' app is what its handler takes (it refused ignore_eos with a 422)
    assert set(request.body) <= transformers_keys(endpoint), set(request.body) - transformers_keys(endpoint)
    text = request.body.get("prompt") or request.body["messages"][0]["content"]
    assert isinstance(text, str) and text.startswith("the chef prepares")


@pytest.mark.parametrize(("body", "param", "words_said"), [
    ({"n": 2}, "n", "n=2 is not supported by this engine (send 1 or leave it out)"),
    ({"best_of": 3}, "best_of", "best_of=3"),
    ({"echo": True}, "echo", "echo=True"),
    ({"logprobs": 5}, "logprobs", "logprobs=5"),
    ({"presence_penalty": 0.5}, "presence_penalty", "presence_penalty=0.5"),
    ({"repetition_penalty": 1.2}, "repetition_penalty", "repetition_penalty=1.2"),
    ({"ignore_eos": "yes"}, "ignore_eos", "ignore_eos must be true or false"),
    ({"min_tokens": 40}, "min_tokens", "min_tokens=40 must be a whole number in 0..max_tokens (32)"),
    ({"min_tokens": -1}, "min_tokens", "min_tokens=-1"),
    ({"min_tokens": True}, "min_tokens", "min_tokens=True"),
    ({"stream_options": {"include_usage": True}}, "stream_options", "only for streamed answers"),
    ({"stream": True, "stream_options": {"include_obfuscation": True}}, "stream_options.include_obfuscation",
     "stream_options.include_obfuscation is not supported"),
    ({"stream": True, "stream_options": {"include_usage": "yes"}}, "stream_options.include_usage",
     "must be true or false"),
])
def test_a_field_the_engine_cannot_honour_is_refused_by_name(body: dict[str, Any], param: str,
                                                            words_said: str) -> None:
    with pytest.raises(BadRequest) as info:
        take({"prompt": "hi", "max_tokens": 32, **body}, 32, "continuous", greedy=True)
    assert (info.value.status, info.value.param) == (400, param) and words_said in str(info.value)


def test_values_that_ask_for_nothing_are_taken_and_dropped() -> None:
    asked = {"n": 1, "best_of": 1, "echo": False, "logprobs": None, "presence_penalty": 0.0,
             "repetition_penalty": 1.0, "stop": None, "user": "u1"}
    taken = take({"prompt": "hi", "max_tokens": 8, **asked}, 8, "continuous", greedy=True)
    assert taken.body == {"prompt": "hi", "max_tokens": 8, "user": "u1"}
    assert taken.min_tokens == 0 and taken.usage is None
    assert set(NEUTRAL) >= {"n", "best_of", "echo", "logprobs", "presence_penalty", "repetition_penalty"}


@pytest.mark.parametrize(("options", "usage"), [
    ({"include_usage": True}, "final"),
    ({"include_usage": True, "continuous_usage_stats": True}, "continuous"),
    ({"continuous_usage_stats": True}, None), ({"include_usage": False}, None), ({}, None)])
def test_stream_options_say_which_usage_the_stream_carries(options: dict[str, bool],
                                                           usage: str | None) -> None:
    body = {"prompt": "hi", "max_tokens": 8, "stream": True, "stream_options": options}
    taken = take(body, 8, "continuous", True)
    assert taken.usage == usage and "stream_options" not in taken.body


def test_min_tokens_and_ignore_eos() -> None:
    assert take({"min_tokens": 5}, 8, "continuous", True).min_tokens == 5
    assert take({"min_tokens": 5, "ignore_eos": True}, 8, "continuous", True).min_tokens == 8
    assert take({"ignore_eos": False}, 8, "static", True).min_tokens == 0


@pytest.mark.parametrize("batching", ["continuous", "static"])
@pytest.mark.parametrize(("body", "param"), [
    ({"temperature": 0.7}, "temperature"), ({"top_p": 0.5}, "top_p"),
    ({"frequency_penalty": 0.3}, "frequency_penalty"),
    ({"logit_bias": {"5": 1}}, "logit_bias"), ({"stop": ["."]}, "stop"), ({"stop": "."}, "stop"),
    ({"generation_config": "{}"}, "generation_config")])
def test_sampling_per_request_is_refused_where_the_engine_cannot_take_it(batching: str, body: dict[str, Any],
                                                                        param: str) -> None:
    with pytest.raises(BadRequest, match=f"cannot be honoured with --batching {batching}") as info:
        take({"prompt": "hi", **body}, 8, batching, greedy=True)
    assert info.value.param == param


def test_sampling_that_asks_for_what_the_engine_does_is_taken() -> None:
    greedy = {"temperature": 0.0, "top_p": 0.9, "seed": 7, "frequency_penalty": 0, "logit_bias": {},
              "stop": []}
    assert take({"prompt": "hi", **greedy}, 8, "continuous", greedy=True).body == {"prompt": "hi"}  # dropped
    with pytest.raises(BadRequest, match="with the model's own sampling settings") as info:
        take({"prompt": "hi", "temperature": 0.0}, 8, "continuous", greedy=False)  # a sampling model
    assert info.value.param == "temperature"
    with pytest.raises(BadRequest) as info:
        take({"prompt": "hi", "seed": 7}, 8, "continuous", greedy=False)
    assert info.value.param == "seed"


def test_with_batching_off_transformers_takes_sampling_per_request() -> None:
    asked = {"prompt": "hi", "temperature": 0.7, "top_p": 0.9, "seed": 1, "stop": ["."],
             "frequency_penalty": 0.2}
    assert take(asked, 8, "off", greedy=False).body == asked  # a sampling model: all of it, per request
    kept = {"prompt": "hi", "stop": ["."], "frequency_penalty": 0.2, "temperature": 0}
    assert take(kept, 8, "off", greedy=True).body == kept
    with pytest.raises(BadRequest, match="does not sample per request") as info:
        take({"prompt": "hi", "temperature": 0.7}, 8, "off", greedy=True)  # transformers would ignore it
    assert info.value.param == "temperature"
