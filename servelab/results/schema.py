"""One vocabulary for the lab's results: experiment names, column names, and how a run's rows are read.

Every experiment appends rows under the run's folder (``servelab.results.store``); the notebooks,
the report and ``--compare`` read them back through ``load``. Triton rows are written with
perf_analyzer's long names (``latency_p50_ms``) and read with the short ones the lab shows
(``p50_ms``) by ``normalise_triton``, which keeps both so older runs still compare.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

# Names of the results files each experiment writes (<run>/<name>.csv and .jsonl).
FASTAPI = "fastapi"
FLASK = "flask"
TRITON = "triton"
LLM = "llm"  # notebook 09: one row per LLM measurement (servelab.lab.step09_llm_serving)
SCALING = "scaling"  # notebook 10: one row per Ray Serve run (servelab.lab.step10_scaling_out)
SCALING_SERIES = "scaling_series"  # notebook 10: one row per sampling interval of a run
MODEL_ANALYZER = "model_analyzer"  # notebook 11: one row per configuration Model Analyzer measured

QUEUE = "queue_ms"
COMPUTE_PARTS = ("compute_input_ms", "compute_infer_ms", "compute_output_ms")


def load(run_dir: Path, experiment: str) -> pd.DataFrame:
    """All rows of ``experiment`` in ``run_dir`` (nested fields intact), or an empty frame."""
    path = Path(run_dir) / f"{experiment}.jsonl"
    if not path.exists():
        return pd.DataFrame()
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return pd.DataFrame(rows)


TRITON_ALIASES = {
    "throughput": "throughput_infer_s", "p50_ms": "latency_p50_ms", "p90_ms": "latency_p90_ms",
    "p95_ms": "latency_p95_ms", "p99_ms": "latency_p99_ms", "avg_ms": "latency_avg_ms",
    "queue_ms": "server_queue_ms", "compute_input_ms": "server_compute_input_ms",
    "compute_infer_ms": "server_compute_infer_ms", "compute_output_ms": "server_compute_output_ms",
    "batch_counts": "batch_executions", "cpu_util_pct": "cpu_mean_pct", "batch": "batch_size",
}


def normalise_triton(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``servelab.triton.experiments.measure`` → the short column names the report plots.

    Adds ``concurrency``/``rate`` from the load level, the server processes' CPU on the machine's scale
    (``server_cpu_pct``: 100 = all cores, like ``cpu_util_pct``), the mean GPU utilisation over all GPUs,
    and keeps every original column.
    """
    if df.empty:
        return df
    df = df.copy()
    for short, long in TRITON_ALIASES.items():  # a row that wrote the short name itself (12's) keeps it
        if long in df:
            df[short] = df[short].where(df[short].notna(), df[long]) if short in df else df[long]
    if "load_mode" in df and "load_value" in df:
        mode = df["load_mode"].astype(str)
        df["concurrency"] = pd.to_numeric(df["load_value"].where(mode == "concurrency"), errors="coerce")
        df["rate"] = pd.to_numeric(df["load_value"].where(mode == "request_rate"), errors="coerce")
    if "proc_cpu_mean_pct" in df:  # one core = 100 for psutil: on the machine's scale, all cores = 100
        from servelab.core.cpu import cpu_cores  # a row not yet stored has no cpu_count: this machine's

        cores = (pd.to_numeric(df["cpu_count"], errors="coerce").fillna(cpu_cores()) if "cpu_count" in df
                 else cpu_cores())
        df["server_cpu_pct"] = (pd.to_numeric(df["proc_cpu_mean_pct"], errors="coerce") / cores).round(1)
    gpu_cols = [c for c in df if isinstance(c, str) and c.startswith("gpu") and c.endswith("_util_mean_pct")]
    df["gpu_util_pct"] = df[gpu_cols].apply(pd.to_numeric, errors="coerce").mean(axis=1) if gpu_cols else None
    return df


def step_rows(df: pd.DataFrame, *steps: str) -> pd.DataFrame:
    """The rows of the named lab steps (column ``step``)."""
    if df.empty or "step" not in df:
        return pd.DataFrame()
    return df[df["step"].isin(steps)].copy()


def num(df: pd.DataFrame, column: str) -> pd.Series:
    """``df[column]`` as numbers (NaN where missing, and all NaN when the column is absent)."""
    return pd.to_numeric(df[column], errors="coerce") if column in df else pd.Series(math.nan, index=df.index)


def device_label(device: Any, gpu: Any = None) -> str:
    """A row's ``device`` as a sentence names it: "GPU (NVIDIA H100 80GB HBM3)" for ``cuda`` (the
    machine's ``gpu`` column gives the name), "CPU" for ``cpu``; "" when the row does not say."""
    text = "" if device is None or device != device else str(device).strip().lower()
    if text.startswith("cuda") or text == "gpu":
        name = "" if gpu is None or gpu != gpu or not str(gpu).strip() else f" ({str(gpu).strip()})"
        return f"GPU{name}"
    return "CPU" if text == "cpu" else ""


def device_of(df: pd.DataFrame, **where: Any) -> str:
    """``device_label`` of the rows matching ``where`` (column == value); "" when none says, and both
    joined with " and " when they ran on several devices."""
    sel = df
    for key, value in where.items():
        if key not in sel:
            return ""
        sel = sel[sel[key] == value]
    if sel.empty or "device" not in sel:
        return ""
    gpus = sel["gpu"] if "gpu" in sel else pd.Series(None, index=sel.index)
    labels = [device_label(d, g) for d, g in zip(sel["device"], gpus, strict=True)]
    return " and ".join(dict.fromkeys(label for label in labels if label))


def relative_spread(values: Any) -> float | None:
    """(max − min) / mean of repeated measurements of one level (windows, repeats); None for fewer
    than two. The noise the verdicts compare gaps with (``servelab.report.effects.check``)."""
    figures = [float(v) for v in values if v is not None and v == v]
    if len(figures) < 2:
        return None
    mean = sum(figures) / len(figures)
    return round((max(figures) - min(figures)) / mean, 4) if mean else None


def robust_spread(values: Any) -> float | None:
    """``relative_spread`` of the parts a median is judged by, without the one farthest from their median
    (three or more parts): one slow third or window cannot widen a median's band by itself, as it cannot
    move the median much (docs/decisions/2026-12-01-verdicts-at-a-glance.md)."""
    figures = sorted(float(v) for v in values if v is not None and v == v)
    if len(figures) >= 3:
        middle = figures[len(figures) // 2] if len(figures) % 2 else \
            (figures[len(figures) // 2 - 1] + figures[len(figures) // 2]) / 2
        figures.remove(max(figures, key=lambda f: abs(f - middle)))
    return relative_spread(figures)


def trend(times: Any, values: Any) -> tuple[float, float] | None:
    """A least-squares line through ``values`` sampled at ``times``: (its slope, per unit of time; the
    scatter of the samples about it, max − min of the residuals, in the values' unit). None for fewer than
    three samples or samples all at one time."""
    pairs = [(float(t), float(v)) for t, v in zip(times, values, strict=True)
             if t is not None and v is not None and t == t and v == v]
    if len(pairs) < 3:
        return None
    n = len(pairs)
    mean_x, mean_y = sum(t for t, _ in pairs) / n, sum(v for _, v in pairs) / n
    spread_x = sum((t - mean_x) ** 2 for t, _ in pairs)
    if not spread_x:
        return None
    slope = sum((t - mean_x) * (v - mean_y) for t, v in pairs) / spread_x
    residuals = [v - (mean_y + slope * (t - mean_x)) for t, v in pairs]
    return slope, max(residuals) - min(residuals)


def trend_spread(values: Any) -> float | None:
    """The scatter of samples about their own trend (``trend`` in sample order), (max − min) / mean of the
    residuals: the noise of a figure that moves while it is sampled (a backlog growing or draining), which
    ``relative_spread`` would count whole. None for fewer than three."""
    figures = [float(v) for v in values if v is not None and v == v]
    fit = trend(range(len(figures)), figures)
    if fit is None:
        return None
    mean_y = sum(figures) / len(figures)
    return round(fit[1] / mean_y, 4) if mean_y else None


def batch_size_counts(df: pd.DataFrame) -> dict[int, int]:
    """Executions per batch size, summed over ``df``'s rows (column ``batch_counts``)."""
    total: dict[int, int] = {}
    for value in df.get("batch_counts", pd.Series(dtype=object)).dropna():
        counts = json.loads(value) if isinstance(value, str) else value
        for size, count in dict(counts).items():
            total[int(size)] = total.get(int(size), 0) + int(count)
    return dict(sorted(total.items()))


# what the notebooks and the report show of a Triton measurement, in this order
TRITON_COLUMNS = ["step", "model", "device", "label", "instances", "threads", "dynamic_batching",
                  "concurrency", "batch", "distribution", "rate", "throughput", "p50_ms", "p99_ms",
                  "queue_ms", "compute_input_ms", "compute_infer_ms", "compute_output_ms", "cpu_util_pct",
                  "server_cpu_pct", "gpu_util_pct", "mean_batch_size", "batch_counts", "settled", "warmup"]


FASTAPI_COLUMNS = ["backend", "device", "max_batch", "mode", "concurrency", "requests", "errors", "median_ms",
                   "p95_ms", "p99_ms",
                   "throughput_rps", "cpu_util_pct", "gpu_util_pct"]


@dataclass
class RunData:
    """A run's tables, as the report and the rules read them (Triton's with the short names)."""

    fastapi: pd.DataFrame
    flask: pd.DataFrame
    triton: pd.DataFrame
    llm: pd.DataFrame = field(default_factory=pd.DataFrame)
    scaling: pd.DataFrame = field(default_factory=pd.DataFrame)
    scaling_series: pd.DataFrame = field(default_factory=pd.DataFrame)
    model_analyzer: pd.DataFrame = field(default_factory=pd.DataFrame)

    @classmethod
    def load(cls, run_dir: Path) -> RunData:
        return cls(unsampled_gpu_blank(load(run_dir, FASTAPI)), load(run_dir, FLASK),
                   unsampled_gpu_blank(normalise_triton(load(run_dir, TRITON))),
                   load(run_dir, LLM), load(run_dir, SCALING), load(run_dir, SCALING_SERIES),
                   load(run_dir, MODEL_ANALYZER))


def gpu_polled(df: pd.DataFrame) -> pd.Series:
    """Per row: its GPU figure came from the monitor before it sampled the driver's window (a GPU counted,
    no ``gpu_util_method``): a poll of NVML, which reads 0 for runs this short, not a sample
    (docs/decisions/2026-11-26-gpu-utilisation.md)."""
    def polled(row: pd.Series) -> bool:
        util = row.get("utilisation")
        facts = util if isinstance(util, dict) else row.to_dict()
        method = facts.get("gpu_util_method")
        counted = bool(facts.get("gpu_count")) or any(str(k).startswith("gpu0_util") for k in facts)
        return counted and (method is None or method != method)

    return df.apply(polled, axis=1) if not df.empty else pd.Series(dtype=bool)


def unsampled_gpu_blank(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with GPU % blank (not 0) in the rows whose GPU was never sampled (``gpu_polled``)."""
    if df.empty or "gpu_util_pct" not in df:
        return df
    polled = gpu_polled(df)
    return df.assign(gpu_util_pct=df["gpu_util_pct"].where(~polled)) if polled.any() else df
