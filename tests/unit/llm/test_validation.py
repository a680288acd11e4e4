"""The engine's front refuses bad requests with a 4xx and a message, and fills in what it may: one prompt
as text, chat content as text, the model, a bounded ``max_tokens``; a request must fit the model's
context and the KV cache."""

from __future__ import annotations

import pytest

from servelab.llm.openai_shape import BadRequest
from servelab.llm.validation import DEFAULT_MAX_TOKENS, validate


def count(text: str) -> int:
    return len(text.split())


def ok(body: object, path: str = "/v1/completions", **options: object) -> dict:
    return validate(path, body, "artifacts/llm", 100, count, **options).body  # type: ignore[arg-type]


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"prompt": ""}, 400, "prompt must be a non-empty string"),
    ({"prompt": "   "}, 400, "prompt must be a non-empty string"),
    ({"prompt": ["a", "b"]}, 400, "prompt must be one prompt per request (a string), got a list of 2"),
    ({"prompt": [17, 42]}, 400, "one prompt per request"),  # token ids
    ({"prompt": [[17, 42]]}, 400, "prompt must be a non-empty string"),
    ({"prompt": [""]}, 400, "prompt must be a non-empty string"),
    ({}, 400, "prompt must be a non-empty string"),
    ({"prompt": "hi", "max_tokens": 10**9}, 400, "max_tokens=1000000000 is outside 1..99"),
    ({"prompt": "hi", "max_tokens": 0}, 400, "outside 1..99"),
    ({"prompt": "hi", "max_tokens": "5"}, 400, "max_tokens must be a whole number"),
    ({"prompt": "hi", "max_tokens": True}, 400, "max_tokens must be a whole number"),
    ({"prompt": "hi", "model": "gpt-4"}, 404, "model 'gpt-4' is not served here"),
    ({"prompt": "word " * 100}, 400, "the prompt has 100 tokens"),
    ([1, 2], 400, "must be a JSON object"),
])
def test_bad_completions(body: object, status: int, words: str) -> None:
    with pytest.raises(BadRequest) as info:
        ok(body)
    assert info.value.status == status and words in str(info.value)


def test_chat_needs_messages_with_content() -> None:
    for body in ({"messages": []}, {"messages": [{"role": "user", "content": ""}]}, {"messages": "hi"}):
        with pytest.raises(BadRequest, match="messages must be"):
            ok(body, "/v1/chat/completions")
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 5}
    good = ok(chat, "/v1/chat/completions")
    assert good["max_completion_tokens"] == 5


def test_one_prompt_in_a_list_is_the_prompt() -> None:
    """genai-perf and aiperf send their one prompt as a list of one string."""
    assert ok({"prompt": ["two words"], "max_tokens": 3})["prompt"] == "two words"


def test_chat_content_as_text_parts_is_text() -> None:
    """guidellm and vLLM's benchmark client send a user message's content as text parts."""
    parts = [{"type": "text", "text": "the chef"}, {"type": "text", "text": "prepares"}]
    messages = ok({"messages": [{"role": "user", "content": parts, "name": "text"}]}, "/v1/chat/completions")
    assert messages["messages"] == [{"role": "user", "content": "the chef prepares", "name": "text"}]
    image = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    with pytest.raises(BadRequest, match=r"messages\[0\]\.content: only text parts") as info:
        ok({"messages": [{"role": "user", "content": image}]}, "/v1/chat/completions")
    assert info.value.param == "messages"


def test_a_request_must_fit_the_kv_cache() -> None:
    """Larger than the cache, transformers' batching worker stops for good ("No requests can be
    scheduled"): the front refuses it first, and says which flag holds the cache."""
    assert ok({"prompt": "w " * 10, "max_tokens": 40}, cache_tokens=50)["max_tokens"] == 40
    said = r"max_tokens=41 is outside 1\.\.40 \(KV cache 50 .*--cb-num-blocks"
    with pytest.raises(BadRequest, match=said) as info:
        ok({"prompt": "w " * 10, "max_tokens": 41}, cache_tokens=50)
    assert info.value.param == "max_tokens"
    with pytest.raises(BadRequest, match="the engine's KV cache holds 50") as info:
        ok({"prompt": "w " * 60}, cache_tokens=50)
    assert info.value.code == "context_length_exceeded"
    assert ok({"prompt": "w " * 10, "max_tokens": 90}, cache_tokens=500)["max_tokens"] == 90  # context rules


def test_good_request_gets_the_model_and_a_bounded_default() -> None:
    assert ok({"prompt": "two words"}) == {"prompt": "two words", "model": "artifacts/llm",
                                           "max_tokens": DEFAULT_MAX_TOKENS}
    near_full = ok({"prompt": "w " * 90})
    assert near_full["max_tokens"] == 10  # never more than the context leaves
    assert ok({"prompt": "hi", "max_tokens": 99, "model": "artifacts/llm"})["max_tokens"] == 99


@pytest.mark.parametrize(("body", "param", "code"), [
    ({"prompt": ""}, "prompt", None),
    ({"prompt": "hi", "max_tokens": 0}, "max_tokens", None),
    ({"prompt": "hi", "model": "gpt-4"}, "model", "model_not_found"),
    ({"prompt": "word " * 100}, "prompt", "context_length_exceeded"),
])
def test_a_refusal_names_the_field_and_code_as_openai_does(body: dict, param: str, code: str | None) -> None:
    with pytest.raises(BadRequest) as info:
        ok(body)
    assert (info.value.param, info.value.code) == (param, code)
