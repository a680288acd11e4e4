"""The lab's LLM load generator: streamed OpenAI completions under Poisson arrivals, timed per token.

``python -m servelab.llm.client --url URL --model NAME --rate R --requests N --output-lengths 8-256``
sends N streamed ``/v1/completions`` requests with exponential gaps (mean 1/R s, seeded), records when
each was sent and when each token arrived, samples the engine's statistics meanwhile (the lab
engine's ``/lab/stats``, or vLLM's ``/metrics`` with ``--stats-path /metrics``), and writes
the records and a summary as JSON. The metrics (:func:`summarise`) follow guidellm's and genai-perf's
definitions: TTFT = request sent → first token; ITL = gaps between later tokens of one request;
output tokens/s = all output tokens / (last token - first send). Why not guidellm itself:
docs/decisions/2026-11-23-llm-serving.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import random
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REQUEST_TIMEOUT_S = 300.0  # one request, start to last token
STATS_PATH = "/lab/stats"  # the lab engine's statistics (JSON); vLLM's are its Prometheus /metrics
VLLM_RUNNING, VLLM_WAITING = "vllm:num_requests_running", "vllm:num_requests_waiting"
# the KV cache's used share: the newer name first; releases that added it still publish the old one
VLLM_KV_USED = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")


@dataclass
class Record:
    """One request as the client saw it: times in seconds from the run's start."""

    prompt_tokens: int
    max_tokens: int
    sent: float
    tokens: list[float] = field(default_factory=list)  # arrival time of each output token
    status: int = 0
    error: str = ""

    @property
    def ttft(self) -> float | None:
        return self.tokens[0] - self.sent if self.tokens else None

    @property
    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.tokens, self.tokens[1:], strict=False)]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) by linear interpolation, or None for no values."""
    data = sorted(values)
    if not data:
        return None
    pos = (len(data) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return data[low] + (data[high] - data[low]) * (pos - low)


def summarise(records: Sequence[Record]) -> dict[str, Any]:
    """TTFT and ITL percentiles (ms), TPOT, output tokens/s and requests/s over the run's span; with
    the noise of TTFT p99 and tokens/s: the relative gap between the run's two interleaved halves
    (requests 1, 3, 5, … and 2, 4, 6, …), each summarised alone (:func:`split_half_spread`)."""
    summary = _summarise(records)
    halves = [_summarise(records[0::2]), _summarise(records[1::2])]
    for column in ("ttft_p99_ms", "output_tokens_s"):
        summary[f"{column.removesuffix('_ms')}_spread"] = split_half_spread(*(h[column] for h in halves))
    return summary


def split_half_spread(a: float | None, b: float | None) -> float | None:
    """(max − min) / mean of two halves' figures; None when either is missing."""
    if a is None or b is None or not a + b:
        return None
    return round(abs(a - b) / ((a + b) / 2), 4)


def _summarise(records: Sequence[Record]) -> dict[str, Any]:
    ok = [r for r in records if r.tokens and not r.error]
    ttfts = [r.ttft * 1000 for r in ok if r.ttft is not None]
    gaps = [g * 1000 for r in ok for g in r.gaps]
    tpots = [(r.tokens[-1] - r.tokens[0]) / (len(r.tokens) - 1) * 1000 for r in ok if len(r.tokens) > 1]
    e2e = [(r.tokens[-1] - r.sent) * 1000 for r in ok]
    span = (max(r.tokens[-1] for r in ok) - min(r.sent for r in ok)) if ok else 0.0
    tokens = sum(len(r.tokens) for r in ok)

    def ms(values: list[float], q: float) -> float | None:
        value = percentile(values, q)
        return None if value is None else round(value, 2)
    return {
        "requests": len(records), "completed": len(ok), "errors": len(records) - len(ok),
        "output_tokens": tokens, "seconds": round(span, 3),
        "ttft_p50_ms": ms(ttfts, 50), "ttft_p99_ms": ms(ttfts, 99),
        "itl_p50_ms": ms(gaps, 50), "itl_p99_ms": ms(gaps, 99),
        "tpot_mean_ms": round(sum(tpots) / len(tpots), 2) if tpots else None,
        "e2e_p50_ms": ms(e2e, 50), "e2e_p99_ms": ms(e2e, 99),
        "output_tokens_s": round(tokens / span, 1) if span > 0 else None,
        "requests_s": round(len(ok) / span, 3) if span > 0 else None,
    }


def parse_stats(path: str, text: str) -> dict[str, Any]:
    """An engine's statistics as ``running``, ``waiting`` (sequences) and ``kv_free`` (share of the KV
    cache): the lab engine's JSON as it is, or vLLM's Prometheus gauges (summed over its engines)."""
    if not path.endswith("/metrics"):
        return dict(json.loads(text))
    found: dict[str, float] = {}  # each gauge summed over its label sets (one per engine)
    wanted = (VLLM_RUNNING, VLLM_WAITING, *VLLM_KV_USED)
    for line in text.splitlines():
        if not line.startswith(wanted):  # histograms and process metrics: most of the page
            continue
        m = re.match(r"([A-Za-z_:][\w:]*)(?:\{[^}]*\})?\s+(\S+)", line)
        if m and m.group(1) in wanted:
            found[m.group(1)] = found.get(m.group(1), 0.0) + float(m.group(2))
    stats: dict[str, Any] = {key: int(found[name]) for key, name in
                             (("running", VLLM_RUNNING), ("waiting", VLLM_WAITING)) if name in found}
    used = next((found[name] for name in VLLM_KV_USED if name in found), None)
    if used is not None:
        stats["kv_free"] = round(1.0 - used, 4)
    return stats


def arrival_times(count: int, rate: float, seed: int) -> list[float]:
    """Poisson arrivals: ``count`` send times (s) with exponential gaps of mean 1/``rate``; the first at 0."""
    rng = random.Random(seed)
    times, now = [], 0.0
    for _ in range(count):
        times.append(now)
        now += rng.expovariate(rate)
    return times


def output_lengths(count: int, low: int, high: int, seed: int) -> list[int]:
    """``count`` output lengths drawn uniformly from ``low``..``high`` (equal when low == high)."""
    rng = random.Random(seed + 1)
    return [rng.randint(low, high) for _ in range(count)]


def request_body(model: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    """One streamed completion asking for exactly ``max_tokens`` tokens (``ignore_eos``, as guidellm and
    vLLM's benchmark client ask), decoded as the model's generation config says (no sampling field: the
    engine refuses one it cannot honour, e.g. ``temperature: 0`` for a sampling model in continuous
    batching), with the usage (the engine's prompt count) at its end."""
    return {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
            "ignore_eos": True, "stream_options": {"include_usage": True}}


async def stream_one(client: Any, url: str, body: dict[str, Any], record: Record, start: float) -> None:
    """POST one streamed completion; note each token's arrival (a chunk with text) in ``record``."""
    try:
        async with client.stream("POST", f"{url}/v1/completions", json=body) as response:
            record.status = response.status_code
            if response.status_code != 200:
                record.error = (await response.aread()).decode(errors="replace")[:300]
                return
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    record.error = str(chunk["error"])[:300]
                    return
                choices = chunk.get("choices") or [{}]
                if choices[0].get("text"):
                    record.tokens.append(time.perf_counter() - start)
                if chunk.get("usage"):  # the engine's own count of the prompt
                    record.prompt_tokens = int(chunk["usage"]["prompt_tokens"])
    except Exception as exc:  # a failed request is a row with its error, not a crashed run
        record.error = f"{type(exc).__name__}: {exc}"


async def _sample_stats(client: Any, url: str, start: float, samples: list[dict[str, Any]],
                        done: asyncio.Event, every: float, path: str) -> None:
    while not done.is_set():
        try:
            response = await client.get(f"{url}{path}", timeout=5)
            if response.status_code == 200:
                stats = parse_stats(path, response.text)
                samples.append({"t": round(time.perf_counter() - start, 3), **stats})
        except Exception:  # a missed sample is only a gap in the plot
            pass
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), every)


async def run_load(url: str, model: str, prompts: Sequence[str], prompt_tokens: Sequence[int],
                   lengths: Sequence[int], send_at: Sequence[float],
                   stats_every: float = 0.1, stats_path: str = STATS_PATH,
                   headers: dict[str, str] | None = None) -> tuple[list[Record], list[dict[str, Any]]]:
    """Send ``prompts[i]`` asking ``lengths[i]`` tokens at ``send_at[i]`` s; every request streamed (with
    ``headers``: vLLM's key); the engine's statistics (``stats_path``) sampled every ``stats_every`` s
    meanwhile."""
    import httpx

    limits = httpx.Limits(max_connections=len(prompts) + 2, max_keepalive_connections=len(prompts) + 2)
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_TIMEOUT_S), limits=limits,
                                 headers=headers) as client:
        start = time.perf_counter()
        samples: list[dict[str, Any]] = []
        done = asyncio.Event()
        sampler = asyncio.create_task(_sample_stats(client, url, start, samples, done, stats_every,
                                                     stats_path))
        records = [Record(n, m, at) for n, m, at in zip(prompt_tokens, lengths, send_at, strict=True)]

        async def one(i: int) -> None:
            await asyncio.sleep(max(0.0, start + send_at[i] - time.perf_counter()))
            records[i].sent = time.perf_counter() - start
            await stream_one(client, url, request_body(model, prompts[i], lengths[i]), records[i], start)

        await asyncio.gather(*(one(i) for i in range(len(prompts))))
        done.set()
        await sampler
    return records, samples


def stream_sync(url: str, model: str, prompt: str, max_tokens: int, prompt_tokens: int = 0,
                headers: dict[str, str] | None = None) -> Record:
    """One streamed completion, timed like :func:`run_load` (blocking: for a notebook cell)."""
    import httpx

    record = Record(prompt_tokens, max_tokens, 0.0)
    body = request_body(model, prompt, max_tokens)
    start = time.perf_counter()
    with httpx.Client(timeout=httpx.Timeout(REQUEST_TIMEOUT_S), headers=headers) as client, \
            client.stream("POST", f"{url}/v1/completions", json=body) as response:
        record.status = response.status_code
        if response.status_code != 200:
            record.error = response.read().decode(errors="replace")[:300]
            return record
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                choices = chunk.get("choices") or [{}]
                if choices[0].get("text"):
                    record.tokens.append(time.perf_counter() - start)
                if chunk.get("usage"):
                    record.prompt_tokens = int(chunk["usage"]["prompt_tokens"])
    return record


def make_prompt(tokens: int, seed: int = 0) -> str:
    """A prompt from the lab's generated text, about ``tokens`` tokens of the lab's model long."""
    from servelab.llm.model import corpus

    words = " ".join(corpus(400, seed + 100)).split()
    return " ".join(words[: max(1, int(tokens * 0.8))])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servelab.llm.client",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the engine's base URL (http://127.0.0.1:PORT)")
    parser.add_argument("--model", required=True, help="the model name the engine serves")
    parser.add_argument("--rate", type=float, required=True, help="mean arrival rate (requests/s, Poisson)")
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--output-lengths", default="8-256",
                        help="LOW-HIGH tokens asked per request (uniform)")
    parser.add_argument("--prompt-tokens", type=int, default=16, help="approximate prompt length")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stats-path", default=STATS_PATH,
                        help="the engine's statistics: the lab engine's /lab/stats, or vLLM's /metrics")
    parser.add_argument("--out", type=Path, help="write records, stats samples and summary here (JSON)")
    parser.add_argument("--api-key-file", type=Path,
                        help="a file holding the engine's API key, sent as a bearer token (vLLM's)")
    args = parser.parse_args(argv)
    headers = ({"Authorization": f"Bearer {args.api_key_file.read_text().strip()}"}
               if args.api_key_file else None)
    low, _, high = args.output_lengths.partition("-")
    lengths = output_lengths(args.requests, int(low), int(high or low), args.seed)
    prompts = [make_prompt(args.prompt_tokens, args.seed + i) for i in range(args.requests)]
    sizes = [args.prompt_tokens] * args.requests
    records, samples = asyncio.run(run_load(args.url, args.model, prompts, sizes, lengths,
                                            arrival_times(args.requests, args.rate, args.seed),
                                            stats_path=args.stats_path, headers=headers))
    summary = summarise(records)
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "records": [asdict(r) for r in records],
                                        "stats": samples}))
    print(json.dumps(summary))
    failed = [r for r in records if r.error]
    if failed:
        first = failed[0]
        print(f"{len(failed)} request(s) failed, first: HTTP {first.status} {first.error}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
