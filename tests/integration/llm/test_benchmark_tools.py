"""The engine a new user starts: the README's command (``python -m servelab.llm.engine MODEL --batching
continuous``, nothing else: the engine's defaults) holds its memory to what a laptop can hold after a
request, and answers what the common LLM benchmark tools send (tests/data/llm_benchmark_bodies.json:
guidellm, vLLM's benchmark client, genai-perf, aiperf, as their sources build them) as they ask:
exactly ``max_tokens`` tokens with ``ignore_eos``, ``min_tokens``, usage in the stream as vLLM sends it.

The engine serves a copy of the lab's model whose generation config also ends an answer at " the", a
token the model says every few tokens: without ``ignore_eos`` its answers end early, so a field accepted
but not honoured fails here (the lab's own model never ends an answer by itself)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from servelab.core.paths import REPO_ROOT
from servelab.core.procs import ManagedProcess, free_port
from servelab.llm import model
from servelab.llm.server import engine_env, post_json
from tests.readme_commands import engine_command

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

BODIES = json.loads((REPO_ROOT / "tests" / "data" / "llm_benchmark_bodies.json").read_text())["bodies"]
CASES = [pytest.param(e["endpoint"], e["body"], id=f"{e['tool']} {e['endpoint']}") for e in BODIES] + [
    pytest.param(e["endpoint"], e["as_sent"]["body"], id=f"{e['tool']} {e['endpoint']} as sent")
    for e in BODIES if "as_sent" in e]
LAPTOP_BYTES = 10**9  # the bound for the lab's model: a laptop holds it beside a browser and a notebook
STOP_WORD = " the"


@pytest.fixture(scope="module")
def stopping_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A copy of the lab's model that also ends an answer at the token " the"; and that token's id."""
    if model.os.environ.get(model.LLM_VARIABLE):
        pytest.skip("measures the lab's own model (SERVELAB_LLM is set)")
    if not model.is_built():
        model.build(quiet=True)
    from tokenizers import Tokenizer

    copy = tmp_path_factory.mktemp("llm") / "stopping"
    shutil.copytree(model.LLM_DIR, copy)
    tokenizer = Tokenizer.from_file(str(copy / "tokenizer.json"))
    (stop,) = tokenizer.encode(STOP_WORD, add_special_tokens=False).ids
    config = json.loads((copy / "generation_config.json").read_text())
    config["eos_token_id"] = [config["eos_token_id"], stop]
    (copy / "generation_config.json").write_text(json.dumps(config))
    return copy, stop


class Started:
    def __init__(self, process: ManagedProcess, url: str, name: str, memory: dict[str, int]) -> None:
        self.process, self.url, self.name, self.memory = process, url, name, memory


def memory(pid: int) -> dict[str, int]:
    """The process's resident memory in bytes (Linux /proc): all of it, its own, its files'."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {key: int(fields[key].split()[0]) * 1024 for key in ("VmRSS", "RssAnon", "RssFile", "RssShmem")}


@pytest.fixture(scope="module")
def readme_engine(stopping_model: tuple[Path, int],
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[Started]:
    """The README's command on the stopping model, its memory read after its first request (a plain one)."""
    folder, _ = stopping_model
    argv = engine_command()
    port = free_port()
    command = [sys.executable, *argv[1:3], str(folder), *argv[4:], "--host", "127.0.0.1", "--port", str(port)]
    log = tmp_path_factory.mktemp("logs") / "readme-engine.log"
    process = ManagedProcess("llm engine (README)", command, log, env=engine_env(), cwd=REPO_ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        process.wait_http(f"{url}/health", 180)
        first = {"model": str(folder), "prompt": "the chef prepares the soup", "max_tokens": 32,
                 "stream": True}
        status, events = stream(url, "/v1/completions", first)
        assert status == 200, events
        yield Started(process, url, str(folder), memory(process.pid))
    finally:
        process.stop()


def stream(url: str, endpoint: str, body: dict[str, Any]) -> tuple[int, list[Any]]:
    """POST a streamed request; its status and events (JSON, and "[DONE]"), or its error answer."""
    with httpx.stream("POST", f"{url}{endpoint}", json=body, timeout=120) as response:
        if response.status_code != 200:
            return response.status_code, [json.loads(response.read())]
        lines = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    return 200, [line if line == "[DONE]" else json.loads(line) for line in lines]


def tokens(events: list[Any]) -> int:
    """Chunks that carry text: one per token for the lab's ASCII tokenizer."""
    return sum(1 for e in events if isinstance(e, dict) and any(
        c.get("text") or (c.get("delta") or {}).get("content") for c in e.get("choices") or []))


def test_the_readme_command_serves_in_well_under_a_gib(readme_engine: Started) -> None:
    """Before: transformers sized the cache from free memory (11.4 GB on a 24 GB machine, 8.8 GB of it the
    engine's own, and a first request of 20 s). The bound is on the memory the engine holds itself
    (anonymous pages: weights, KV cache, buffers, heap); the library files it maps (torch's CUDA build:
    about 0.55 GB here) are page cache shared with every process and dropped first under pressure."""
    m = readme_engine.memory
    own = m["RssAnon"] + m["RssShmem"]
    print(f"README engine after one request: {m['VmRSS'] / 1e9:.2f} GB resident, {own / 1e9:.2f} GB its own, "
          f"{m['RssFile'] / 1e9:.2f} GB mapped library files")
    assert own < LAPTOP_BYTES, f"the engine holds {own / 1e9:.2f} GB itself after one request: {m}"


@pytest.mark.parametrize(("endpoint", "body"), CASES)
def test_each_tools_request_is_answered_as_it_asks(readme_engine: Started, endpoint: str,
                                                   body: dict[str, Any]) -> None:
    status, events = stream(readme_engine.url, endpoint, {**body, "model": readme_engine.name})
    assert status == 200, events
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    asked = body.get("max_completion_tokens") or body["max_tokens"]
    assert tokens(chunks) == asked, "ignore_eos: exactly max_tokens tokens"
    options = body.get("stream_options") or {}
    with_usage = [e for e in chunks if e.get("usage")]
    if not options.get("include_usage"):
        assert with_usage == []  # OpenAI and vLLM send usage only when asked
        return
    # vLLM's benchmark client reads usage from a chunk without choices; it comes last, after the end
    last, ended = chunks[-1], chunks[-2]
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == asked
    assert last["usage"]["prompt_tokens"] > 0
    assert ended["choices"][0]["finish_reason"] == "length"
    if options.get("continuous_usage_stats"):  # guidellm's: every chunk, the usage so far
        assert with_usage == chunks
        so_far = [e["usage"]["completion_tokens"] for e in chunks]
        assert so_far == sorted(so_far) and so_far[-1] == asked
    else:
        assert with_usage == [last]


def test_without_ignore_eos_the_answer_ends_early(readme_engine: Started) -> None:
    """What makes the test above able to fail: this model ends its answers within a few tokens."""
    body = {"model": readme_engine.name, "prompt": "the chef prepares the soup", "max_tokens": 32}
    status, answer = post_json(f"{readme_engine.url}/v1/completions", body, 60)
    assert status == 200 and answer["choices"][0]["finish_reason"] == "stop"
    assert answer["usage"]["completion_tokens"] < 10, answer


def test_min_tokens_holds_the_end_back(readme_engine: Started) -> None:
    body = {"model": readme_engine.name, "prompt": "the chef prepares the soup", "max_tokens": 32,
            "min_tokens": 12}
    status, answer = post_json(f"{readme_engine.url}/v1/completions", body, 60)
    assert status == 200 and answer["choices"][0]["finish_reason"] == "stop"
    assert 12 <= answer["usage"]["completion_tokens"] < 32, answer
    status, answer = post_json(f"{readme_engine.url}/v1/chat/completions",
                               {"model": readme_engine.name, "max_tokens": 32, "min_tokens": 32,
                                "messages": [{"role": "user", "content": "the chef"}]}, 60)
    assert status == 200 and answer["usage"]["completion_tokens"] == 32, answer


@pytest.mark.parametrize(("extra", "status", "param"), [
    ({"temperature": 0.8}, 400, "temperature"),
    ({"n": 2}, 400, "n"),
    ({"stop": ["."]}, 400, "stop"),
    ({"stream": False, "stream_options": {"include_usage": True}}, 400, "stream_options"),
    ({"top_k": 5}, 422, None),  # vLLM's, unknown to transformers: its 422 names it in the message
])
def test_a_field_the_engine_cannot_honour_is_refused_by_name(readme_engine: Started, extra: dict[str, Any],
                                                            status: int, param: str | None) -> None:
    body = {"model": readme_engine.name, "prompt": "the chef", "max_tokens": 4, **extra}
    got, answer = post_json(f"{readme_engine.url}/v1/completions", body, 30)
    error = answer["error"]
    assert got == status and error["param"] == param and next(iter(extra)) in error["message"], answer
    plain = {key: value for key, value in body.items() if key not in extra}
    ok, _ = post_json(f"{readme_engine.url}/v1/completions", plain, 30)
    assert ok == 200  # and the engine keeps serving


def test_the_static_batch_ends_each_row_as_it_asks(stopping_model: tuple[Path, int]) -> None:
    """``--batching static``: in one padded batch, a row with ignore_eos (a minimum of max_tokens), one
    with none and one with min_tokens each end where they asked."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from servelab.llm.static_batcher import StaticBatcher

    folder, stop = stopping_model
    batcher = StaticBatcher(AutoModelForCausalLM.from_pretrained(folder),
                            AutoTokenizer.from_pretrained(folder), max_batch=3, gather_s=0.5)

    async def run() -> list[tuple[list[int], bool]]:
        ids = batcher.tokenizer("the chef prepares the soup")["input_ids"]
        jobs = [batcher.submit(ids, 20, least) for least in (20, 0, 9)]
        out = []
        for job in jobs:
            got = []
            while (token := await job.out.get()) is not None:
                got.append(token)
            out.append((got, job.stopped))
        return out
    try:
        (full, full_stopped), (plain, plain_stopped), (least, least_stopped) = asyncio.run(run())
    finally:
        batcher.close(5)
    assert batcher.batches == {3: 1}
    assert len(full) == 20 and not full_stopped and stop not in full
    assert plain_stopped and plain[-1] == stop and len(plain) < 9
    assert least_stopped and least[-1] == stop and 9 <= len(least) < 20 and stop not in least[:-1]
