"""Notebook 09: a language model behind an OpenAI-compatible engine — prefill vs decode, static vs
continuous batching under Poisson arrivals, and how many sequences the KV cache holds.

Every load run is the lab's client command (``python -m servelab.llm.client``), printed before it
runs; its summary lands as one row of the ``llm`` experiment. Sizes and their reasons:
docs/decisions/2026-11-23-llm-serving.md.
"""

from __future__ import annotations

import html
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from servelab.core.paths import ON_THE_NODE, REPO_ROOT
from servelab.lab.params import LabParams
from servelab.lab.step09_views import (
    fig_batching,
    fig_kv,
    fig_single,
    gap_to_close,
    read_batching,
    read_itl,
    read_kv,
    read_single,
)
from servelab.lab.tables import record, show_columns
from servelab.llm.client import STATS_PATH, Record, make_prompt, percentile, split_half_spread, stream_sync
from servelab.llm.server import Engine, EngineOptions, short_command, start_engine, start_engine_compose
from servelab.llm.server import refused as refused  # re-exported: the notebook calls them as step.…
from servelab.llm.server import transformers_serve_command as transformers_serve_command
from servelab.llm.server import try_request as try_request
from servelab.report.effects import Check, Quantity, Rerun, check, row
from servelab.report.figures import Section, as_image, plot_html, table_html
from servelab.report.terms import define
from servelab.results.schema import LLM, RunData, num, robust_spread, step_rows
from servelab.results.store import results_dir

# what a verdict's "(spread …)" spans here (servelab.report.terms)
# the verdict the report's first screen gives as this step's one line (servelab.report.html.headline)
HEADLINE = "continuous batching gives more output tokens"
SPREAD_OVER = ("the timed repeats of each prompt length (one request at a time), a load run's two "
               "interleaved halves (Poisson load)")
LLM_COLUMNS = ["step", "batching", "label", "rate", "output_lengths", "requests", "errors", "ttft_p50_ms",
               "ttft_p99_ms", "ttft_p99_spread", "itl_p50_ms", "itl_p99_ms", "output_tokens_s",
               "output_tokens_s_spread", "requests_s", "max_running", "max_waiting", "kv_blocks"]
# what a notebook and the report show of a load run (at most 8 columns; the CSV keeps LLM_COLUMNS)
LLM_SHOWN = ["label", "output_lengths", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "output_tokens_s",
             "max_running", "max_waiting"]
SINGLE_COLUMNS = ["step", "prompt", "repeat", "prompt_tokens", "output_tokens", "ttft_ms", "tpot_ms"]
LOAD_TIMEOUT_S = 300  # one load run, the client's whole command


def engine_up(p: LabParams, batching: str, kv_blocks: int | None = None) -> Engine:
    """The engine with ``batching`` (continuous: a KV cache of ``kv_blocks`` × 32 tokens), started and
    warmed up, its command printed: a local process, or its compose stack on a GPU host (``docker``)."""
    options = EngineOptions(batching=batching, max_batch=p.llm_max_batch,
                            cb_num_blocks=kv_blocks or p.llm_kv_blocks)
    print(f"starting the engine ({batching} batching), waiting until it is healthy and has answered one "
          "warm-up completion ...", flush=True)
    if p.target == "docker":
        engine = start_engine_compose(options)
    elif p.target == "local":
        engine = start_engine(options)
    else:
        raise RuntimeError(f"target={p.target!r}: notebook 09 runs on the node (target 'docker') or here "
                           f"(target 'local'), like notebooks {ON_THE_NODE}")
    print(f"$ {short_command(engine.command)}")
    print(f"$ curl -s {engine.url}/lab/stats  # where the engine computes: {engine_device(engine) or '?'}")
    return engine


def engine_device(engine: Engine) -> str:
    """``cuda`` or ``cpu``, as the lab's front reports it at ``/lab/stats`` (asked once per engine: it
    cannot change while the engine runs); "" where it does not say. vLLM (no lab front) runs only on GPU
    hosts here (``step09_vllm``)."""
    if engine.kind == "vllm":
        return "cuda"
    if engine.url not in _DEVICES:
        try:
            _DEVICES[engine.url] = str(engine.stats().get("device") or "")
        except (OSError, ValueError):
            return ""
    return _DEVICES[engine.url]


_DEVICES: dict[str, str] = {}  # engine_device's answer per engine (its URL)


# ----------------------------------------------------------------------------- experiments

def one_request(engine: Engine, p: LabParams) -> pd.DataFrame:
    """A short and a long prompt, one request at a time: TTFT (prefill) and time per output token (decode).

    Per length, one untimed warm-up request, then ``llm_single_repeats`` timed ones, each with a prompt
    the engine has not seen (it keeps the KV blocks of earlier prompts: a repeated prompt could skip its
    prefill). Finally the last long prompt once more, printed beside the rest, not recorded."""
    rows, warm, seeds, device = [], [], iter(range(1000, 100_000)), engine_device(engine)

    def one(name: str, prompt: str, tokens: int, asked: int = 2) -> Record:  # untimed ones: the TTFT only
        r = stream_sync(engine.url, engine.model, prompt, asked, tokens, engine.headers)
        if r.error or len(r.tokens) < 2:
            raise RuntimeError(f"single request ({name} prompt) failed: HTTP {r.status} {r.error}")
        return r

    for name, tokens in (("short", p.llm_short_prompt), ("long", p.llm_long_prompt)):
        first = one(name, make_prompt(tokens, next(seeds)), tokens)
        warm.append(f"{name} {(first.ttft or 0) * 1000:.0f} ms")
        sized = sized_for(tokens, first.prompt_tokens)  # the warm-up's count sizes the timed prompts
        for i in range(p.llm_single_repeats):
            prompt = make_prompt(sized, next(seeds))
            r = one(name, prompt, tokens, p.llm_single_tokens)
            rows.append({"step": "single", "batching": engine.options.batching, "device": device,
                         "prompt": name, "repeat": i,
                         "prompt_tokens": r.prompt_tokens, "output_tokens": len(r.tokens),
                         "ttft_ms": round((r.ttft or 0) * 1000, 2),
                         "tpot_ms": round((r.tokens[-1] - r.tokens[0]) / (len(r.tokens) - 1) * 1000, 2)})
    again = (one("long", prompt, p.llm_long_prompt).ttft or 0) * 1000
    df = record(LLM, rows)
    print(f"untimed warm-up, first token after: {', '.join(warm)}")
    print(read_single(df))
    if said := define("TPOT"):
        print(said)
    new = num(df[df["prompt"] == "long"], "ttft_ms")
    print(f"the last long prompt sent again: first token after {again:.0f} ms, "
          + ("sooner than every new long prompt's (the engine reused the KV blocks it kept for that prompt: "
             "prefix caching)" if again < new.min() else f"not sooner than new long prompts' ({new.min():.0f}"
             f"-{new.max():.0f} ms)"))
    return show_columns(df, SINGLE_COLUMNS)


def sized_for(tokens: int, got: int | None) -> int:
    """What to ask ``make_prompt`` for to get about ``tokens`` tokens, where asking ``tokens`` gave ``got``
    (its words-per-token guess is the lab's text's average, not this tokenizer's)."""
    return tokens if not got else max(1, round(tokens * tokens / got))


def sequential_rate(single: pd.DataFrame, p: LabParams) -> float:
    """Requests/s the engine serves one at a time with the mixed lengths: 1 / (TTFT + mean length × TPOT)."""
    short = single[single["prompt"] == "short"]
    ttft, tpot = num(short, "ttft_ms").median() / 1000, num(short, "tpot_ms").median() / 1000
    mean_len = sum(p.llm_output_lengths) / 2
    rate = 1 / (ttft + mean_len * tpot)
    print(f"one request at a time: ≈{ttft * 1000:.0f} ms to the first token + {mean_len:.0f} tokens × "
          f"{tpot * 1000:.1f} ms ≈ {rate:.2f} requests/s; the load levels are {p.llm_rate_fractions} × that")
    return rate


def client_command(engine: Engine, rate: float, requests: int, lengths: tuple[int, int], prompt_tokens: int,
                   out: Path, seed: int = 0) -> list[str]:
    return [sys.executable, "-m", "servelab.llm.client", "--url", engine.url, "--model", engine.model,
            "--rate", f"{rate:g}", "--requests", str(requests),
            "--output-lengths", f"{lengths[0]}-{lengths[1]}", "--prompt-tokens", str(prompt_tokens),
            "--seed", str(seed), "--out", str(out),
            *(["--stats-path", engine.stats_path] if engine.stats_path != STATS_PATH else []),
            *(["--api-key-file", str(engine.key_file)] if engine.key_file else [])]


def load_run(engine: Engine, p: LabParams, step: str, rate: float, lengths: tuple[int, int],
             label: str = "") -> dict[str, Any]:
    """One load level: the client's command printed, run, and its summary + the engine's stats as a row.
    The client's own output (every request's timings) is kept in the results folder's ``llm-client/``."""
    o = engine.options
    folder = results_dir() / "llm-client"
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{step}-{engine.kind}-{o.batching}-{rate:.2f}-{time.strftime('%H%M%S')}.json"
    argv = client_command(engine, rate, p.llm_requests, lengths, p.llm_short_prompt, out)
    print(f"$ {short_command(argv)}", flush=True)
    out.unlink(missing_ok=True)
    done = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=LOAD_TIMEOUT_S,
                          check=False)
    if not out.exists():
        raise RuntimeError(f"the load client failed (exit {done.returncode}): {done.stderr[-800:]}")
    result = json.loads(out.read_text())
    samples = result["stats"]
    summary = result["summary"]
    print(f"  {summary['completed']}/{summary['requests']} done, {summary['output_tokens_s']} tokens/s, "
          f"TTFT p99 {summary['ttft_p99_ms']} ms" + (f"; {done.stderr.strip()}" if done.returncode else ""))
    halves = [max((s.get("running", 0) for s in samples[i::2]), default=None) for i in (0, 1)]
    return {"step": step, "engine": engine.kind, "batching": o.batching, "device": engine_device(engine),
            "label": label or f"{o.batching} {rate:.2f}/s",
            "rate": round(rate, 3), "output_lengths": f"{lengths[0]}-{lengths[1]}",
            "prompt_tokens": counted_prompt(result.get("records", []), p.llm_short_prompt), **summary,
            "max_running": max((s.get("running", 0) for s in samples), default=None),
            "max_running_spread": split_half_spread(*halves),  # the stats samples' interleaved halves
            "max_waiting": max((s.get("waiting", 0) for s in samples), default=None),
            "min_kv_free": min((s["kv_free"] for s in samples if s.get("kv_free") is not None), default=None),
            "kv_blocks": o.cb_num_blocks if o.batching == "continuous" else None,
            "max_batch": o.max_batch if o.batching == "static" else None,
            "command": short_command(argv), "stats": samples}


def counted_prompt(records: list[dict[str, Any]], asked: int) -> int:
    """The prompt length the engine counted (its usage reply; the median over the run's requests): the
    words the client sends come out a few tokens short or long of ``asked``, which it falls back to."""
    counted = sorted(int(r["prompt_tokens"]) for r in records
                     if r.get("prompt_tokens") and not r.get("error"))
    return counted[len(counted) // 2] if counted else asked


def rate_sweep(engine: Engine, p: LabParams, rate: float) -> pd.DataFrame:
    """Poisson arrivals at each ``llm_rate_fractions`` × ``rate``, mixed output lengths."""
    lengths = (p.llm_output_lengths[0], p.llm_output_lengths[1])
    return record(LLM, [load_run(engine, p, "mixed", f * rate, lengths) for f in p.llm_rate_fractions])


def equal_lengths(engine: Engine, p: LabParams, rate: float) -> pd.DataFrame:
    """The top rate again, every request asking ``llm_equal_length`` tokens."""
    top = p.llm_rate_fractions[-1] * rate
    n = p.llm_equal_length
    return record(LLM, [load_run(engine, p, "equal", top, (n, n))])


def small_cache(engine: Engine, p: LabParams, rate: float) -> pd.DataFrame:
    """The top rate with mixed lengths on a smaller KV cache (``llm_small_kv_blocks``)."""
    lengths = (p.llm_output_lengths[0], p.llm_output_lengths[1])
    top = p.llm_rate_fractions[-1] * rate
    return record(LLM, [load_run(engine, p, "kv_cache", top, lengths,
                                 label=f"{engine.options.cb_num_blocks} blocks {top:.2f}/s")])


# ----------------------------------------------------------------------------- plots and readings
# (the figures and one-line readings themselves: servelab/lab/step09_views.py)

def show(df: pd.DataFrame) -> pd.DataFrame:
    """A load run's table as the notebook shows it (``LLM_SHOWN``); the run's CSV keeps every column. The
    first table with an ITL says what it is, and how it differs from TPOT."""
    cols = [c for c in LLM_SHOWN if c in df]
    if "itl_p50_ms" in cols and (said := define("ITL")):
        print(said)
    return show_columns(df, cols)


def plot_single(df: pd.DataFrame) -> Any:
    return as_image(fig_single(df))


def plot_batching(df: pd.DataFrame, single: pd.DataFrame | None = None) -> Any:
    """Tokens/s and TTFT p99 against the rate, each batching; the readings: the top rate's figures, and
    the gap between tokens beside the sequences each step carried (``gaps``)."""
    print(read_batching(df))
    gaps(df, single)
    return as_image(fig_batching(df))


def gaps(df: pd.DataFrame, single: pd.DataFrame | None = None) -> None:
    """Print the two batchings' gap between tokens at the top rate, explained by their own statistics
    (``read_itl``), one request alone's TPOT (``single``) beside them."""
    if said := read_itl(df, single):
        print(said)


def plot_kv(df: pd.DataFrame) -> Any:
    print(read_kv(df))
    return as_image(fig_kv(df))




# ----------------------------------------------------------------------------- report and rules

def _top(df: pd.DataFrame) -> float | None:
    return row(df, "rate", "max")


def kv_rows(llm: pd.DataFrame) -> pd.DataFrame:
    """The cache experiment and the same top rate with the larger cache (for the comparison)."""
    return after_continuous(llm, "kv_cache")


def after_continuous(llm: pd.DataFrame, step: str) -> pd.DataFrame:
    """The rows of ``step`` after the continuous-batching, mixed-lengths rows at the same rate."""
    ours = step_rows(llm, step)
    if ours.empty:
        return ours
    mixed = step_rows(llm, "mixed")
    same = mixed[(mixed["batching"] == "continuous") & (num(mixed, "rate") == num(ours, "rate").iloc[-1])]
    return pd.concat([same, ours], ignore_index=True)


def sections(data: RunData) -> list[Section]:
    """Prefill vs decode, static vs continuous batching (mixed and equal lengths), the KV cache."""
    out = []
    single = step_rows(data.llm, "single")
    if not single.empty:
        out.append(Section("LLM: one request, prefill vs decode", [
            plot_html(fig_single(single), read_single(single)), table_html(single, SINGLE_COLUMNS)]))
    mixed = step_rows(data.llm, "mixed")
    if not mixed.empty:
        out.append(Section("LLM: static vs continuous batching, mixed output lengths", [
            plot_html(fig_batching(mixed), read_batching(mixed)), table_html(mixed, LLM_SHOWN),
            f"<p>{html.escape(read_itl(mixed, single))}</p>"]))
    equal = step_rows(data.llm, "equal")
    if not equal.empty:
        out.append(Section("LLM: static vs continuous batching, equal output lengths", [
            table_html(equal, LLM_SHOWN), f"<p>{read_batching(equal)}</p>",
            f"<p>{html.escape(read_itl(equal, single))}</p>"]))
    kv = kv_rows(data.llm)
    if not kv.empty:
        out.append(Section("LLM: the KV cache decides how many sequences run", [
            plot_html(fig_kv(kv), read_kv(kv)), table_html(kv, LLM_SHOWN)]))
    return out


def _ratio(df: pd.DataFrame) -> tuple[float | None, float | None]:
    """Static/continuous tokens/s at the top rate, and its noise: the sum of the two levels' spreads."""
    top = _top(df)
    if top is None:
        return None, None
    static, cont = (row(df, "output_tokens_s", rate=top, batching=b) for b in ("static", "continuous"))
    spreads = [row(df, "output_tokens_s_spread", rate=top, batching=b) for b in ("static", "continuous")]
    noise = None if None in spreads else sum(s for s in spreads if s is not None)
    return (None if static is None or not cont else static / cont), noise


def rules(data: RunData) -> list[Check]:
    """Prefill grows with the prompt; continuous batching wins with mixed lengths (tokens/s, TTFT p99);
    static batching fares better against it with equal lengths (whether there was a gap to close,
    ``gap_to_close``, is said with the numbers: a measured ratio is judged either way); a smaller
    KV cache holds fewer sequences and queues. Each gap is weighed against its levels' spread: the single
    requests' repeats, the load runs' halves."""
    single = step_rows(data.llm, "single")
    mixed = step_rows(data.llm, "mixed")
    top = _top(mixed)
    kv = kv_rows(data.llm)
    small = step_rows(data.llm, "kv_cache")
    big_blocks = num(kv, "kv_blocks").max() if not kv.empty else None

    def ttfts(prompt: str) -> list[float]:
        return [] if single.empty else num(single[single["prompt"] == prompt], "ttft_ms").dropna().tolist()

    def tokens(prompt: str) -> str:  # the prompt's length as the engine counted it
        rows = single[single["prompt"] == prompt] if not single.empty else single
        sent = num(rows, "prompt_tokens").dropna()
        return f" ({sent.median():.0f} tokens)" if len(sent) else ""

    def at_top(column: str, batching: str) -> float | None:
        return row(mixed, column, rate=top, batching=batching) if top is not None else None

    def both(column: str) -> tuple[float | None, float | None]:
        return at_top(column, "static"), at_top(column, "continuous")

    mixed_ratio, mixed_noise = _ratio(mixed)
    equal_ratio, equal_noise = _ratio(step_rows(data.llm, "equal"))
    gap = gap_to_close(mixed_ratio, mixed_noise)
    return [
        check("LLM: a long prompt's time to first token exceeds a short one's "
              "(prefill grows with the prompt)",
              (percentile(ttfts("short"), 50), percentile(ttfts("long"), 50)), lambda s, lg: lg > s,
              lambda s, lg: f"short{tokens('short')} {s:.0f} ms, long{tokens('long')} {lg:.0f} ms (medians)",
              noise=(robust_spread(ttfts("short")), robust_spread(ttfts("long"))), unit="ms",
              names=("TTFT short prompt", "long prompt"),
              rerun=Rerun("llm_single_repeats", len(ttfts("long")) or None)),
        check("LLM, mixed output lengths: continuous batching gives more output tokens/s than static "
              "at the highest rate",
              both("output_tokens_s"), lambda s, c: c > s,
              lambda s, c: f"static {s:.0f}, continuous {c:.0f} tokens/s",
              noise=both("output_tokens_s_spread"), unit="tokens/s", names=("static", "continuous"),
              rerun=Rerun("llm_requests", at_top("requests", "continuous"))),
        check("LLM, mixed output lengths: continuous batching's TTFT p99 is lower than static's at the "
              "highest rate",
              both("ttft_p99_ms"), lambda s, c: c < s,
              lambda s, c: f"static {s:.0f} ms, continuous {c:.0f} ms",
              noise=both("ttft_p99_spread"), unit="ms", names=("TTFT p99 static", "continuous"),
              rerun=Rerun("llm_requests", at_top("requests", "continuous"))),
        check("LLM: with equal output lengths static batching fares better against continuous than with "
              "mixed lengths (static/continuous tokens/s)",
              (mixed_ratio, equal_ratio), lambda m, e: e > m,
              lambda m, e: f"static/continuous {m:.2f} with mixed lengths, {e:.2f} with equal ones"
              + (" (static overtook continuous)" if e > 1 else "")
              + ("; continuous batching was ahead with mixed lengths: a gap to close" if gap.met
                 else f"; {gap.reached}" if gap.reached else ""),
              noise=(mixed_noise, equal_noise), unit="×", names=("mixed lengths", "equal lengths"),
              rerun=Rerun("llm_requests", at_top("requests", "continuous"))),
        check("LLM: a smaller KV cache holds fewer sequences at once, and requests wait for room",
              (row(kv, "max_running", kv_blocks=big_blocks) if not kv.empty else None,
               row(small, "max_running"), row(small, "max_waiting")),
              lambda big, sm, waiting: sm < big and waiting > 0,
              lambda big, sm, waiting: f"at most {big:.0f} running with the larger cache, {sm:.0f} with the "
                                       f"smaller one, where up to {waiting:.0f} waited",
              noise=(row(kv, "max_running_spread", kv_blocks=big_blocks) if not kv.empty else None,
                     row(small, "max_running_spread")), unit="sequences",
              figures=lambda big, sm, waiting: (Quantity("running, larger cache", big, "sequences"),
                                                Quantity("smaller", sm, "sequences"),
                                                Quantity("waiting", waiting, "requests"))),
    ]
