"""The real LLM engine on 127.0.0.1: transformers serve's app behind the lab's front, started as the
notebook starts it. It streams tokens, refuses bad requests with a 4xx (and keeps serving), reports
its statistics, batches statically or continuously, and answers the official OpenAI Python client
(pinned in constraints.txt) as OpenAI's API would: its model list, streams, errors."""

from __future__ import annotations

import asyncio
import json
import statistics
from collections.abc import Iterator

import httpx
import openai
import pytest

from servelab.llm import model
from servelab.llm.client import make_prompt, run_load, stream_sync
from servelab.llm.server import Engine, EngineOptions, post_json, start_engine

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module", autouse=True)
def built_model() -> None:
    if not model.is_built() and not model.os.environ.get(model.LLM_VARIABLE):
        model.build(quiet=True)


@pytest.fixture(scope="module")
def continuous(built_model: None) -> Iterator[Engine]:
    with start_engine(EngineOptions("continuous", cb_num_blocks=16)) as engine:
        yield engine


@pytest.fixture(scope="module")
def static(built_model: None) -> Iterator[Engine]:
    with start_engine(EngineOptions("static", max_batch=4)) as engine:
        yield engine


def completion(engine: Engine, **body: object) -> tuple[int, dict]:
    return post_json(f"{engine.url}/v1/completions", {"model": engine.model, **body}, 60)


def test_streams_one_token_per_event(continuous: Engine) -> None:
    events = []
    body = {"model": continuous.model, "prompt": "the chef prepares", "max_tokens": 9, "stream": True}
    with httpx.stream("POST", f"{continuous.url}/v1/completions", json=body, timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
        events = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
        assert lines[-1] == "data: [DONE]", lines[-3:]  # how an OpenAI stream ends
    texts = [e["choices"][0]["text"] for e in events if e["choices"][0].get("text")]
    assert len(texts) == 9
    last = events[-1]
    assert last["choices"][0]["finish_reason"] == "length"
    assert not any("usage" in e for e in events)  # as OpenAI's API: usage in a stream only when asked


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"prompt": ""}, 400, "prompt must be a non-empty string"),
    ({"prompt": "the chef", "max_tokens": 10**9}, 400, "is outside 1.."),
    ({"prompt": "the chef", "max_tokens": -1}, 400, "is outside 1.."),
    ({"prompt": "the chef", "model": "gpt-4"}, 404, "is not served here"),
])
def test_bad_requests_get_a_4xx_and_the_engine_keeps_serving(continuous: Engine, body: dict, status: int,
                                                             words: str) -> None:
    got, answer = post_json(f"{continuous.url}/v1/completions", {"model": continuous.model, **body}, 30)
    assert got == status and words in answer["error"]["message"]
    # an empty prompt used to kill transformers' batching worker: the next request must still work
    ok, answer = completion(continuous, prompt="the chef", max_tokens=3)
    assert ok == 200 and answer["usage"]["completion_tokens"] == 3
    assert httpx.get(f"{continuous.url}/health", timeout=10).status_code == 200


def test_only_the_labs_routes_answer_and_a_huge_body_is_refused_unread(continuous: Engine) -> None:
    """transformers' own /reset (unloads the model), /load_model (any folder or Hub model) and
    /v1/responses (no token limit) are not the lab's: 404. A 50 MB body: 413, before it is read whole.
    Generation goes on as before."""
    for path in ("/reset", "/load_model", "/v1/responses"):
        got, answer = post_json(f"{continuous.url}{path}", {"model": continuous.model, "input": "hi"}, 30)
        assert got == 404 and answer["error"]["code"] == "not_found", (path, answer)
    huge = b'{"prompt": "' + b"a" * (50 * 10**6) + b'"}'
    refused = httpx.post(f"{continuous.url}/v1/completions", content=huge, timeout=60,
                         headers={"content-type": "application/json"})
    assert refused.status_code == 413 and refused.json()["error"]["code"] == "request_too_large"
    ok, answer = completion(continuous, prompt="the chef", max_tokens=3)
    assert ok == 200 and answer["usage"]["completion_tokens"] == 3
    assert httpx.get(f"{continuous.url}/health", timeout=10).status_code == 200


def test_chat_and_bad_chat(continuous: Engine) -> None:
    url = f"{continuous.url}/v1/chat/completions"
    ok, answer = post_json(url, {"model": continuous.model, "max_tokens": 4,
                                 "messages": [{"role": "user", "content": "the chef"}]}, 60)
    assert ok == 200 and answer["choices"][0]["message"]["content"]
    bad, answer = post_json(url, {"model": continuous.model, "messages": []}, 30)
    assert bad == 400 and "messages must be" in answer["error"]["message"]


def test_timed_request_and_stats(continuous: Engine) -> None:
    record = stream_sync(continuous.url, continuous.model, "the chef prepares the soup", 12)
    assert not record.error and len(record.tokens) == 12 and record.prompt_tokens > 0
    assert 0 < record.ttft < 30
    assert httpx.get(f"{continuous.url}/docs", timeout=10).status_code == 200  # the engine's Swagger page
    stats = continuous.stats()
    assert stats["batching"] == "continuous" and stats["kv_blocks"] == 16 and stats["running"] == 0


def test_a_repeated_prompt_reuses_its_cached_prefix(continuous: Engine) -> None:
    """Why notebook 09 sends every timed request a new prompt: the engine keeps the KV blocks of a
    prompt it has seen (prefix caching), so the same long prompt again reaches its first token sooner."""
    def ttft(prompt: str) -> float:
        record = stream_sync(continuous.url, continuous.model, prompt, 4)
        assert not record.error and record.ttft is not None
        return record.ttft

    # pairs: a new prompt, then the same prompt at once (the other worker's load changes between pairs,
    # hardly within one); the prefill skipped is most of a 400-token prompt's first token here
    pairs = [(ttft(prompt), ttft(prompt)) for prompt in (make_prompt(400, seed) for seed in range(500, 505))]
    ratios = [again / new for new, again in pairs]
    assert statistics.median(ratios) < 0.85, f"(new, again) TTFTs in s: {pairs}"


def test_continuous_batching_runs_sequences_together(continuous: Engine) -> None:
    n = 6
    records, samples = asyncio.run(run_load(continuous.url, continuous.model, ["the chef prepares"] * n,
                                            [3] * n, [40] * n, [0.0] * n, stats_every=0.02))
    assert all(not r.error and len(r.tokens) == 40 for r in records)
    assert max(s["running"] for s in samples) > 1


def test_static_batches_form_and_each_request_gets_its_own_length(static: Engine) -> None:
    lengths = [40, 4, 40, 4]  # the first runs alone or with others; those behind it queue into one batch
    records, _ = asyncio.run(run_load(static.url, static.model, ["the chef"] * 4, [2] * 4, lengths,
                                      [0.0] * 4))
    assert [len(r.tokens) for r in records] == lengths
    batches = static.stats()["batches"]
    assert any(int(size) > 1 for size in batches), batches
    bad, _ = completion(static, prompt="")
    assert bad == 400


# ----------------------------------------------------------------------------- the official OpenAI client

@pytest.fixture(scope="module")
def sdk(continuous: Engine) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{continuous.url}/v1", api_key="not-checked", max_retries=0, timeout=60)


def test_models_list_names_exactly_the_served_model(sdk: openai.OpenAI, continuous: Engine) -> None:
    """``/v1/models`` answered 500 (transformers scans the Hub cache, which is missing offline) and
    would list the cache's models, not the one served."""
    assert [m.id for m in sdk.models.list()] == [continuous.model]
    assert sdk.models.retrieve(continuous.model).id == continuous.model  # sent as artifacts%2Fllm
    with pytest.raises(openai.NotFoundError, match="is not served here") as info:
        sdk.models.retrieve("gpt-4")
    assert info.value.code == "model_not_found"


def test_a_streamed_completion(sdk: openai.OpenAI, continuous: Engine) -> None:
    chunks = list(sdk.completions.create(model=continuous.model, prompt="the chef prepares", max_tokens=9,
                                         stream=True, stream_options={"include_usage": True}))
    assert len([c for c in chunks if c.choices and c.choices[0].text]) == 9
    ended, last = chunks[-2:]  # the usage comes in a chunk of its own, with no choices (include_usage)
    assert ended.choices[0].finish_reason == "length" and not ended.usage
    assert last.choices == [] and last.usage and last.usage.completion_tokens == 9
    assert {c.model for c in chunks} == {continuous.model}  # as the client named it (not name@main)
    whole = sdk.completions.create(model=continuous.model, prompt="the chef prepares", max_tokens=5)
    assert whole.choices[0].text and whole.usage and whole.usage.completion_tokens == 5
    assert whole.model == continuous.model


def test_a_streamed_chat_completion(sdk: openai.OpenAI, continuous: Engine) -> None:
    chunks = list(sdk.chat.completions.create(model=continuous.model, max_tokens=6, stream=True,
                                              stream_options={"include_usage": True},
                                              messages=[{"role": "user", "content": "the chef"}]))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    ended, last = chunks[-2:]
    assert ended.choices[0].finish_reason == "length"
    assert last.choices == [] and last.usage and last.usage.completion_tokens == 6
    whole = sdk.chat.completions.create(model=continuous.model, max_tokens=4,
                                        messages=[{"role": "user", "content": "the chef"}])
    assert whole.choices[0].message.content and whole.usage and whole.usage.completion_tokens == 4


def test_bad_requests_raise_the_sdks_errors_with_the_labs_message(sdk: openai.OpenAI,
                                                                  continuous: Engine) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        sdk.completions.create(model=continuous.model, prompt="", max_tokens=4)
    error = info.value
    assert error.status_code == 400 and "prompt must be a non-empty string" in error.message
    assert error.param == "prompt" and error.type == "invalid_request_error"
    assert isinstance(error.body, dict) and error.body["message"] == "prompt must be a non-empty string"
    with pytest.raises(openai.BadRequestError, match=r"max_tokens=100000 is outside 1\.\.") as info:
        sdk.completions.create(model=continuous.model, prompt="the chef", max_tokens=100_000, stream=True)
    assert info.value.param == "max_tokens"
    with pytest.raises(openai.BadRequestError, match="messages must be a non-empty list"):
        sdk.chat.completions.create(model=continuous.model, messages=[], stream=True)
    with pytest.raises(openai.NotFoundError, match="model 'gpt-4' is not served here"):
        sdk.completions.create(model="gpt-4", prompt="the chef", max_tokens=4)
    # refused by transformers' own app (a field it does not know): FastAPI's shape, put into OpenAI's
    with pytest.raises(openai.UnprocessableEntityError, match="Unexpected fields") as unknown:
        sdk.completions.create(model=continuous.model, prompt="the chef", max_tokens=4,
                               extra_body={"colour": "red"})
    assert isinstance(unknown.value.body, dict)
    assert set(unknown.value.body) == {"message", "type", "param", "code"}
