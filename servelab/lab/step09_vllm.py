"""Notebook 09, last part: the same load on vLLM where the GPU host can run it (compute capability 7.0
or higher: not the lab's P100 node), beside the lab's transformers engine with continuous batching.

Where vLLM cannot run, :func:`vllm_run` prints why and measures nothing; its rows (step ``vllm``,
engine ``vllm``) join the ``llm`` experiment. Why vLLM 0.10.1.1: docs/decisions/2026-11-23-vllm.md.
"""

from __future__ import annotations

import sys

import pandas as pd

from servelab.lab.params import LabParams
from servelab.lab.step09_llm_serving import LLM_SHOWN, after_continuous, load_run, short_command
from servelab.lab.tables import record
from servelab.lab.this_run import what_this_run_shows
from servelab.llm.vllm import (
    capability_argv,
    gpu_capabilities,
    serve_command,
    start_vllm_compose,
    vllm_problem,
)
from servelab.report.effects import Check, check, row
from servelab.report.figures import Section, table_html
from servelab.results.schema import LLM, RunData, num, step_rows

START_TIMEOUT_S = 900  # healthy after start (model load, torch.compile, CUDA graphs); the build comes first

# both engines side by side, at most 8 columns (the CSV keeps every one)
VLLM_SHOWN = ["engine", *(c for c in LLM_SHOWN if c != "output_lengths")]


def vllm_run(p: LabParams, rate: float) -> pd.DataFrame:
    """The top rate with mixed lengths on vLLM, its commands printed; or, where vLLM cannot run, why."""
    capabilities: list[tuple[int, int]] = []
    error = ""
    if p.target == "docker":
        print(f"$ {short_command(capability_argv())}", flush=True)
        capabilities, error = gpu_capabilities()
        print(", ".join(f"{a}.{b}" for a, b in capabilities) or error)
    problem = vllm_problem(p.target, capabilities, error)
    if problem:
        print(f"vLLM is not run here. {problem}. The transformers engine's results above stand alone.")
        return pd.DataFrame()
    print("building and starting vLLM: the first build downloads a few GB, then up to "
          f"{START_TIMEOUT_S // 60} min until it is healthy (model load, kernel compilation) ...", flush=True)
    try:
        engine = start_vllm_compose(START_TIMEOUT_S)
    except RuntimeError as exc:  # vLLM is the extra: the notebook's own results stand
        print(f"vLLM did not start, so nothing was measured with it (its stack is down again): {exc}")
        return pd.DataFrame()
    try:
        print(f"$ {short_command(engine.command)}\n  the service runs: $ {serve_command()}")
        top = p.llm_rate_fractions[-1] * rate
        lengths = (p.llm_output_lengths[0], p.llm_output_lengths[1])
        return record(LLM, [load_run(engine, p, "vllm", top, lengths, label=f"vllm {top:.2f}/s")])
    finally:
        engine.stop()


def beside(llm: pd.DataFrame) -> pd.DataFrame:
    """vLLM's rows after the transformers engine's continuous-batching rows at the same rate."""
    table = after_continuous(llm, "vllm")
    if table.empty:
        return table
    engines = table["engine"] if "engine" in table else pd.Series(None, index=table.index, dtype=object)
    return table.assign(engine=engines.fillna("transformers"))


def compare(llm: pd.DataFrame) -> pd.DataFrame | None:
    """vLLM beside the lab's engine: the reading and what this run shows of the expected effect, printed,
    and the table; nothing where vLLM did not run (``vllm_run`` said why)."""
    table = beside(llm)
    if table.empty:
        return None
    print(read(table))
    what_this_run_shows(sys.modules[__name__], "vLLM")
    return table[[c for c in VLLM_SHOWN if c in table]].round(2)


def read(table: pd.DataFrame) -> str:
    if table.empty:
        return "no vLLM run: the lab's transformers engine stands alone"
    parts = [f"{r['engine']}: {r['output_tokens_s']:.0f} tokens/s, TTFT p99 {r['ttft_p99_ms']:.0f} ms, "
             f"at most {r['max_running']:.0f} running" for _, r in table.iterrows()]
    return f"at {num(table, 'rate').iloc[-1]:.2f} requests/s, mixed lengths: " + "; ".join(parts)


def sections(data: RunData) -> list[Section]:
    table = beside(data.llm)
    if table.empty:
        return []
    return [Section("LLM: vLLM beside the lab's engine (GPU, compute capability 7.0 or higher)", [
        f"<p>{read(table)}</p>", table_html(table, VLLM_SHOWN)])]


def rules(data: RunData) -> list[Check]:
    """On a GPU that runs it, vLLM (paged attention, CUDA graphs) serves more tokens/s than the lab's
    transformers engine at the same rate (the gap weighed against each run's split-half spread)."""
    table = beside(data.llm)
    engines = ("transformers", "vllm")
    ran = not step_rows(data.llm, "mixed").empty  # the lab's engine ran: vLLM's absence is this machine's
    missing = ran and row(table, "output_tokens_s", engine="vllm") is None
    absent = ("vLLM did not run on this machine: it needs a GPU with compute capability 7.0 or higher "
              "(the notebook said why)") if missing else None
    return [check("LLM on a GPU (compute capability ≥ 7.0): vLLM gives more output tokens/s than the lab's "
                  "transformers engine at the same rate",
                  tuple(row(table, "output_tokens_s", engine=e) for e in engines),
                  lambda t, v: v > t, lambda t, v: f"transformers {t:.0f}, vLLM {v:.0f} tokens/s",
                  gpu_only=True,
                  noise=tuple(row(table, "output_tokens_s_spread", engine=e) for e in engines),
                  unit="tokens/s", names=("transformers", "vLLM"), blocked=absent)]
