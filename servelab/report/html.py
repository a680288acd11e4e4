"""The run's report: one self-contained HTML page drawn from the results data only.

``write_report(run_dir)`` reads the measurements the notebooks stored under
``run_dir`` (``fastapi``, ``flask``, ``triton`` — CSV + JSONL each), draws
each plot with matplotlib's Agg backend as an embedded PNG with a one-line
reading computed from the numbers, and states which of the lab's expected
effects this run observed. Nothing is copied from the notebooks' outputs, so
the report can be redrawn for any results folder (``python -m servelab.lab
report results/<run>``).

The plotting functions take DataFrames and return figures, so the notebooks
draw the very same plots for a student.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

FASTAPI = "fastapi"
FLASK = "flask"
TRITON = "triton"

QUEUE = "queue_ms"
COMPUTE_PARTS = ("compute_input_ms", "compute_infer_ms", "compute_output_ms")
NOISE_NOTE = ("Runs on a shared or small CPU are noisy, and several of the lab's effects belong to a GPU: "
              "a 'not observed' here is a fact about this run on this machine, not a hidden failure.")


# ----------------------------------------------------------------------------- data

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

    Adds ``concurrency``/``rate`` from the load level, the mean GPU utilisation
    over all GPUs, and keeps every original column.
    """
    if df.empty:
        return df
    df = df.copy()
    for short, long in TRITON_ALIASES.items():
        if long in df and short not in df:
            df[short] = df[long]
    if "load_mode" in df and "load_value" in df:
        mode = df["load_mode"].astype(str)
        df["concurrency"] = pd.to_numeric(df["load_value"].where(mode == "concurrency"), errors="coerce")
        df["rate"] = pd.to_numeric(df["load_value"].where(mode == "request_rate"), errors="coerce")
    gpu_cols = [c for c in df if c.startswith("gpu") and c.endswith("_util_mean_pct")]
    df["gpu_util_pct"] = df[gpu_cols].apply(pd.to_numeric, errors="coerce").mean(axis=1) if gpu_cols else None
    return df


def step_rows(df: pd.DataFrame, *steps: str) -> pd.DataFrame:
    """The rows of the named lab steps (column ``step``)."""
    if df.empty or "step" not in df:
        return pd.DataFrame()
    return df[df["step"].isin(steps)].copy()


def _num(df: pd.DataFrame, column: str) -> pd.Series:
    return pd.to_numeric(df[column], errors="coerce") if column in df else pd.Series(dtype=float)


def batch_size_counts(df: pd.DataFrame) -> dict[int, int]:
    """Executions per batch size, summed over ``df``'s rows (column ``batch_counts``)."""
    total: dict[int, int] = {}
    for value in df.get("batch_counts", pd.Series(dtype=object)).dropna():
        counts = json.loads(value) if isinstance(value, str) else value
        for size, count in dict(counts).items():
            total[int(size)] = total.get(int(size), 0) + int(count)
    return dict(sorted(total.items()))


# ----------------------------------------------------------------------------- figures

def _figure(width: float = 7.5, height: float = 3.4, cols: int = 1) -> tuple[Figure, Any]:
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, cols)
    return fig, axes


def _label(row: pd.Series, x: str) -> str:
    value = row.get(x)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def fig_fastapi(df: pd.DataFrame) -> Figure:
    """Latency percentiles (sequential and concurrent) and throughput, PyTorch vs ONNX."""
    fig, (left, right) = _figure(cols=2)
    df = df.copy()
    df["run"] = df["backend"].astype(str) + "\n" + df["mode"].astype(str)
    positions = range(len(df))
    width = 0.27
    for i, (column, name) in enumerate([("median_ms", "p50"), ("p95_ms", "p95"), ("p99_ms", "p99")]):
        left.bar([p + (i - 1) * width for p in positions], _num(df, column), width, label=name)
    left.set_xticks(list(positions), df["run"], fontsize=8)
    left.set_ylabel("latency (ms)")
    left.set_title("latency", fontsize=10)
    left.legend(fontsize=8)
    right.bar(list(positions), _num(df, "throughput_rps"), color="tab:green")
    right.set_xticks(list(positions), df["run"], fontsize=8)
    right.set_ylabel("requests/s")
    right.set_title("throughput", fontsize=10)
    fig.suptitle("FastAPI: PyTorch vs ONNX Runtime", fontsize=11)
    fig.tight_layout()
    return fig


def fig_breakdown(df: pd.DataFrame, x: str = "concurrency", title: str = "") -> Figure:
    """Server-side queue vs compute time per request (stacked), and client p50/p99, per ``x``."""
    fig, (left, right) = _figure(cols=2)
    labels = _tick_labels(df, x)
    positions = list(range(len(df)))
    bottom = pd.Series([0.0] * len(df))
    for column, colour in [(QUEUE, "tab:red"), *zip(COMPUTE_PARTS, ("tab:olive", "tab:blue", "tab:cyan"),
                                                    strict=True)]:
        values = _num(df, column).fillna(0.0).reset_index(drop=True)
        left.bar(positions, values, bottom=bottom, color=colour, label=column.removesuffix("_ms"))
        bottom = bottom + values
    left.set_xticks(positions, labels, fontsize=7, rotation=15 if len(labels[0]) > 8 else 0)
    left.set_ylabel("server time per request (ms)")
    left.set_xlabel(x)
    left.legend(fontsize=7)
    right.plot(positions, _num(df, "p50_ms"), "o-", label="p50")
    right.plot(positions, _num(df, "p99_ms"), "s--", label="p99")
    right.set_xticks(positions, labels, fontsize=7, rotation=15 if len(labels[0]) > 8 else 0)
    right.set_ylabel("client latency (ms)")
    right.set_xlabel(x)
    right.legend(fontsize=8)
    fig.suptitle(title or "queue vs compute", fontsize=11)
    fig.tight_layout()
    return fig


def _tick_labels(df: pd.DataFrame, x: str) -> list[str]:
    """The ``x`` values, or the rows' labels where ``x`` alone does not tell the rows apart."""
    values = [_label(r, x) for _, r in df.iterrows()]
    if len(set(values)) == len(values) or "label" not in df:
        return values
    return [str(r.get("label") or v) for v, (_, r) in zip(values, df.iterrows(), strict=True)]


def fig_scaling(df: pd.DataFrame, title: str = "") -> Figure:
    """Throughput and p99 per instance configuration."""
    fig, (left, right) = _figure(cols=2)
    labels = [str(v) for v in df.get("label", df.get("instances", pd.Series(dtype=str)))]
    positions = list(range(len(df)))
    left.bar(positions, _num(df, "throughput"), color="tab:green")
    left.set_xticks(positions, labels, fontsize=7, rotation=15)
    left.set_ylabel("inferences/s")
    right.bar(positions, _num(df, "p99_ms"), color="tab:red", label="p99")
    right.plot(positions, _num(df, "p50_ms"), "ko-", label="p50")
    right.set_xticks(positions, labels, fontsize=7, rotation=15)
    right.set_ylabel("latency (ms)")
    right.legend(fontsize=8)
    fig.suptitle(title or "instance scaling", fontsize=11)
    fig.tight_layout()
    return fig


def fig_backends(df: pd.DataFrame) -> Figure:
    """Python vs ONNX backend: compute time and throughput at each concurrency."""
    fig, (left, right) = _figure(cols=2)
    for model, group in df.groupby("model", sort=True):
        group = group.sort_values("concurrency")
        left.plot(_num(group, "concurrency"), _num(group, "compute_infer_ms"), "o-", label=str(model))
        right.plot(_num(group, "concurrency"), _num(group, "throughput"), "o-", label=str(model))
    left.set_xlabel("concurrency")
    left.set_ylabel("compute infer (ms)")
    right.set_xlabel("concurrency")
    right.set_ylabel("inferences/s")
    left.legend(fontsize=7)
    fig.suptitle("Python backend vs ONNX backend (one instance)", fontsize=11)
    fig.tight_layout()
    return fig


def fig_rates(df: pd.DataFrame) -> Figure:
    """p50 and p99 against the Poisson arrival rate, dynamic batching off vs on."""
    fig, ax = _figure()
    for enabled, group in df.groupby("dynamic_batching", sort=True):
        group = group.sort_values("rate")
        name = "batching on" if bool(enabled) else "batching off"
        ax.plot(_num(group, "rate"), _num(group, "p50_ms"), "o-", label=f"{name} p50")
        ax.plot(_num(group, "rate"), _num(group, "p99_ms"), "s--", label=f"{name} p99")
    ax.set_xlabel("Poisson arrival rate (requests/s)")
    ax.set_ylabel("latency (ms)")
    ax.legend(fontsize=8)
    ax.set_title("dynamic batching across arrival rates", fontsize=11)
    fig.tight_layout()
    return fig


def fig_batch_sizes(counts: dict[int, int], title: str = "") -> Figure:
    """Executions per batch size, as the server's statistics counted them."""
    fig, ax = _figure(height=3.0)
    ax.bar([str(k) for k in counts], list(counts.values()), color="tab:purple")
    ax.set_xlabel("batch size of an execution")
    ax.set_ylabel("executions")
    ax.set_title(title or "batch sizes with dynamic batching on", fontsize=11)
    fig.tight_layout()
    return fig


def fig_utilisation(df: pd.DataFrame) -> Figure:
    """Mean CPU (and GPU) utilisation during each measurement."""
    fig, ax = _figure(width=9, height=3.4)
    labels = [f"{_text(r.get('step'))}\n{_text(r.get('label')) or _text(r.get('mode'))}"
              for _, r in df.iterrows()]
    positions = list(range(len(df)))
    ax.bar([p - 0.2 for p in positions], _num(df, "cpu_util_pct"), 0.4, label="CPU %")
    if "gpu_util_pct" in df and _num(df, "gpu_util_pct").notna().any():
        ax.bar([p + 0.2 for p in positions], _num(df, "gpu_util_pct"), 0.4, label="GPU %")
    ax.set_xticks(positions, labels, fontsize=6, rotation=60, ha="right")
    ax.set_ylabel("utilisation (%)")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=8)
    ax.set_title("utilisation during each measurement", fontsize=11)
    fig.tight_layout()
    return fig


def _text(value: Any) -> str:
    """A cell as text; missing values (None, NaN) as ''."""
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


def png(fig: Figure) -> str:
    """A figure as a base64 PNG data URI."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


# ----------------------------------------------------------------------------- readings

def _first(df: pd.DataFrame, column: str, **where: Any) -> float | None:
    sel = df
    for key, value in where.items():
        if key not in sel:
            return None
        sel = sel[sel[key] == value]
    values = _num(sel, column).dropna()
    return float(values.iloc[-1]) if len(values) else None


def read_fastapi(df: pd.DataFrame) -> str:
    parts = []
    for backend in ("pt", "onnx"):
        seq = _first(df, "median_ms", backend=backend, mode="sequential")
        conc = _first(df, "median_ms", backend=backend, mode="concurrent")
        if seq and conc:
            parts.append(f"{backend}: median {seq:.0f} ms alone → {conc:.0f} ms with "
                         f"{int(_first(df, 'concurrency', backend=backend, mode='concurrent') or 0)} clients "
                         f"({conc / seq:.1f}×)")
    pt, onnx = (_first(df, "median_ms", backend=b, mode="sequential") for b in ("pt", "onnx"))
    if pt and onnx:
        parts.append(f"ONNX Runtime {pt / onnx:.1f}× faster than PyTorch for one client")
    return "; ".join(parts) or "no FastAPI measurements in this run"


def read_breakdown(df: pd.DataFrame, x: str = "concurrency") -> str:
    if df.empty:
        return "no measurements"
    lo, hi = df.iloc[0], df.iloc[-1]
    queue_lo, queue_hi = (float(r.get(QUEUE) or 0) for r in (lo, hi))
    infer_lo, infer_hi = (float(r.get("compute_infer_ms") or 0) for r in (lo, hi))
    return (f"from {x} {_label(lo, x)} to {_label(hi, x)}: queue {queue_lo:.1f} → {queue_hi:.1f} ms, "
            f"compute infer {infer_lo:.1f} → {infer_hi:.1f} ms, p99 {float(lo.get('p99_ms') or 0):.0f} → "
            f"{float(hi.get('p99_ms') or 0):.0f} ms")


def read_client_batch(df: pd.DataFrame) -> str:
    """Single images vs a client batch, both from one client."""
    one = _first(df, "throughput", batch=1)
    many = df[_num(df, "batch") > 1]
    if one is None or many.empty:
        return "no comparison with single images in this run"
    size, tput = int(_num(many, "batch").iloc[-1]), float(_num(many, "throughput").iloc[-1])
    return (f"one client: {one:.1f} images/s sending single images, {tput:.1f} images/s sending batches "
            f"of {size} ({tput / one:.1f}×)")


def read_per_level(df: pd.DataFrame, by: str) -> str:
    """At each concurrency, the rows that differ in ``by`` (model or instances) side by side."""
    parts = []
    for level, group in df.groupby("concurrency", sort=True):
        cells = [f"{r[by]}: {float(r['throughput']):.1f}/s, infer {float(r['compute_infer_ms']):.1f} ms, "
                 f"p99 {float(r['p99_ms']):.0f} ms" for _, r in group.iterrows()]
        parts.append(f"concurrency {level:g} — " + "; ".join(cells))
    return " | ".join(parts) or "no measurements"


def read_arrivals(df: pd.DataFrame) -> str:
    capacity = _first(df, "throughput", step="capacity")
    constant = _first(df, "p99_ms", step="arrivals", distribution="constant")
    poisson = _first(df, "p99_ms", step="arrivals", distribution="poisson")
    rate = _first(df, "rate", step="arrivals")
    if None in (capacity, constant, poisson, rate):
        return "no arrival-pattern measurements"
    return (f"one instance serves ≈{capacity:.1f}/s; at {rate:.1f}/s p99 is {constant:.0f} ms with evenly "
            f"spaced arrivals and {poisson:.0f} ms with Poisson arrivals")


def read_scaling(df: pd.DataFrame) -> str:
    if df.empty:
        return "no measurements"
    best = df.loc[_num(df, "throughput").idxmax()]
    name = best.get("label", best.get("instances"))
    return (f"best throughput {float(best['throughput']):.1f}/s with {name}; "
            + ", ".join(f"{r.get('label', r.get('instances'))}: {float(r['throughput']):.1f}/s, "
                        f"p99 {float(r['p99_ms']):.0f} ms" for _, r in df.iterrows()))


def read_rates(df: pd.DataFrame) -> str:
    if df.empty:
        return "no measurements"
    top = _num(df, "rate").max()
    on = _first(df, "p99_ms", rate=top, dynamic_batching=True)
    off = _first(df, "p99_ms", rate=top, dynamic_batching=False)
    if on is None or off is None:
        return f"highest rate {top:.0f}/s"
    return (f"at the highest rate ({top:.0f}/s) p99 is {off:.0f} ms with batching off "
            f"and {on:.0f} ms with it on")


def read_batch_sizes(counts: dict[int, int]) -> str:
    total = sum(counts.values())
    if not total:
        return "no executions counted"
    batched = sum(c for s, c in counts.items() if s > 1)
    mean = sum(s * c for s, c in counts.items()) / total
    return (f"{batched} of {total} executions carried more than one request (mean batch {mean:.2f}), "
            "although every client sent single images")


# ----------------------------------------------------------------------------- expected effects

@dataclass
class Check:
    """One of the lab's expected effects, tested on this run's numbers."""

    effect: str
    status: str  # observed | not observed | not measured
    evidence: str
    gpu_only: bool = False


def _check(effect: str, values: tuple[float | None, ...], test: Callable[..., bool],
           evidence: Callable[..., str], gpu_only: bool = False) -> Check:
    if any(v is None for v in values):
        return Check(effect, "not measured", "this run has no numbers for it", gpu_only)
    ok = bool(test(*values))
    return Check(effect, "observed" if ok else "not observed", evidence(*values), gpu_only)


def _row(df: pd.DataFrame, column: str, pick: str = "last", **where: Any) -> float | None:
    sel = df
    for key, value in where.items():
        if sel.empty or key not in sel:
            return None
        sel = sel[sel[key] == value]
    values = _num(sel, column).dropna()
    if not len(values):
        return None
    return float(values.max() if pick == "max" else values.min() if pick == "min" else values.iloc[-1])


def expected_effects(fastapi: pd.DataFrame, triton: pd.DataFrame) -> list[Check]:
    """The lab's expected observations, each checked with a simple rule on this run's data."""
    checks: list[Check] = []
    for backend in ("pt", "onnx"):
        checks.append(_check(
            f"FastAPI {backend}: with many clients the median latency is ≥ 4× one client's (queuing)",
            (_row(fastapi, "median_ms", backend=backend, mode="sequential"),
             _row(fastapi, "median_ms", backend=backend, mode="concurrent")),
            lambda a, b: b >= 4 * a, lambda a, b: f"{a:.0f} ms → {b:.0f} ms ({b / a:.1f}×)"))
    checks.append(_check(
        "FastAPI: ONNX Runtime answers one client faster than PyTorch",
        (_row(fastapi, "median_ms", backend="pt", mode="sequential"),
         _row(fastapi, "median_ms", backend="onnx", mode="sequential")),
        lambda pt, ox: ox < pt, lambda pt, ox: f"PyTorch {pt:.0f} ms, ONNX {ox:.0f} ms"))
    sweep = step_rows(triton, "python_concurrency")
    c_lo = _row(sweep, "concurrency", "min")
    c_hi = _row(sweep, "concurrency", "max")
    lat = (_row(sweep, "p50_ms", concurrency=c_lo), _row(sweep, "p50_ms", concurrency=c_hi)) \
        if c_lo is not None and c_hi is not None and c_hi > c_lo else (None, None)
    checks.append(_check(
        f"Triton Python backend: latency at concurrency {c_hi or '16':.0f} > 4× latency at {c_lo or 1:.0f}"
        if c_hi else "Triton Python backend: latency at concurrency 16 > 4× latency at 1",
        lat, lambda a, b: b > 4 * a, lambda a, b: f"p50 {a:.0f} ms → {b:.0f} ms ({b / a:.1f}×)"))
    comp = (_row(sweep, "compute_infer_ms", concurrency=c_lo),
            _row(sweep, "compute_infer_ms", concurrency=c_hi)) \
        if c_hi is not None and c_lo is not None and c_hi > c_lo else (None, None)
    checks.append(_check(
        "Triton Python backend: compute time stays flat (< 2×) while concurrency rises",
        comp, lambda a, b: b < 2 * a, lambda a, b: f"compute infer {a:.1f} ms → {b:.1f} ms"))
    queue = (_row(sweep, QUEUE, concurrency=c_hi), _row(sweep, "compute_infer_ms", concurrency=c_hi)) \
        if c_hi is not None else (None, None)
    checks.append(_check(
        "Triton Python backend: at the highest concurrency queue time exceeds compute time",
        queue, lambda q, c: q > c, lambda q, c: f"queue {q:.1f} ms vs compute infer {c:.1f} ms"))
    batch = step_rows(triton, "python_client_batch")
    checks.append(_check(
        "Client batch 16 raises throughput (images/s) ≥ 1.5× over single images at concurrency 1",
        (_row(sweep, "throughput", concurrency=c_lo), _row(batch, "throughput")),
        lambda one, many: many >= 1.5 * one, lambda one, many: f"{one:.1f} → {many:.1f} images/s",
        gpu_only=True))
    scaling = step_rows(triton, "instance_scaling")
    if not scaling.empty:
        tput = _num(scaling, "throughput").reset_index(drop=True)
        first, best = float(tput.iloc[0]), float(tput.max())
        checks.append(_check(
            "More instances raise throughput at concurrency 8 (best vs one instance)", (first, best),
            lambda a, b: b > 1.1 * a, lambda a, b: f"{a:.1f} → best {b:.1f} inferences/s", gpu_only=True))
        if len(tput) >= 3:
            checks.append(_check(
                "The largest instance count is no better than the middle one (4+4 vs 2+2)",
                (float(tput.iloc[-2]), float(tput.iloc[-1])), lambda mid, top: top <= 1.05 * mid,
                lambda mid, top: f"{mid:.1f} vs {top:.1f} inferences/s"))
    else:
        checks.append(Check("More instances raise throughput at concurrency 8", "not measured",
                            "this run has no numbers for it", True))
    threads = step_rows(triton, "threads_lesson")
    checks.append(_check(
        "Several instances: one thread each beats the framework's default threads",
        (_row(threads, "throughput", threads="default"), _row(threads, "throughput", threads="split")),
        lambda d, s: s > d, lambda d, s: f"default threads {d:.1f}/s, split {s:.1f}/s"))
    both = step_rows(triton, "python_vs_onnx", "onnx_backend")
    c8 = _row(both, "concurrency", "min")
    checks.append(_check(
        "The ONNX backend's inference time is lower than the Python backend's at the same concurrency",
        (_row(both, "compute_infer_ms", model="food_classifier", concurrency=c8),
         _row(both, "compute_infer_ms", model="food_classifier_onnx", concurrency=c8)),
        lambda py, ox: ox < py, lambda py, ox: f"Python {py:.1f} ms, ONNX {ox:.1f} ms"))
    onnx1, onnx2 = step_rows(triton, "onnx_backend"), step_rows(triton, "onnx_scaling")
    c_top = _row(onnx2, "concurrency", "max")
    checks.append(_check(
        "ONNX backend: two instances serve more than one",
        (_row(onnx1, "throughput", concurrency=c_top), _row(onnx2, "throughput", concurrency=c_top)),
        lambda a, b: b > 1.1 * a, lambda a, b: f"{a:.1f} → {b:.1f} inferences/s", gpu_only=True))
    arrivals = step_rows(triton, "arrivals")
    checks.append(_check(
        "Poisson arrivals queue more than evenly spaced ones at the same rate (p99)",
        (_row(arrivals, "p99_ms", distribution="constant"), _row(arrivals, "p99_ms", distribution="poisson")),
        lambda c, p: p > c, lambda c, p: f"constant {c:.1f} ms, Poisson {p:.1f} ms"))
    dyn = step_rows(triton, "dynamic_batching")
    counts = batch_size_counts(dyn[dyn["dynamic_batching"] == True]) if not dyn.empty else {}  # noqa: E712
    checks.append(_check(
        "With dynamic batching on, some executions carry more than one request",
        (sum(c for s, c in counts.items() if s > 1) if counts else None,),
        lambda n: n > 0, lambda n: f"{n} batched executions"))
    top = _row(dyn, "rate", "max")
    checks.append(_check(
        "At the highest rate, p99 with dynamic batching ≤ p99 without",
        (_row(dyn, "p99_ms", rate=top, dynamic_batching=False),
         _row(dyn, "p99_ms", rate=top, dynamic_batching=True))
        if top is not None else (None, None),
        lambda off, on: on <= off, lambda off, on: f"off {off:.1f} ms, on {on:.1f} ms", gpu_only=True))
    return checks


# ----------------------------------------------------------------------------- HTML

def _table(df: pd.DataFrame, columns: list[str]) -> str:
    present = [c for c in columns if c in df]
    if df.empty or not present:
        return "<p><em>no rows</em></p>"
    return df[present].round(2).to_html(index=False, border=0, classes="data", na_rep="")


@dataclass
class Section:
    """One heading with its plots (each with a reading) and tables."""

    title: str
    parts: list[str]


def _plot(fig: Figure, reading: str) -> str:
    return (f'<figure><img src="{png(fig)}" alt="{html.escape(reading)}">'
            f"<figcaption>{html.escape(reading)}</figcaption></figure>")


TRITON_COLUMNS = ["step", "model", "label", "instances", "threads", "dynamic_batching", "concurrency",
                  "batch",
                  "distribution", "rate", "throughput", "p50_ms", "p99_ms", QUEUE, *COMPUTE_PARTS,
                  "cpu_util_pct", "gpu_util_pct", "settled"]
FASTAPI_COLUMNS = ["backend", "mode", "concurrency", "requests", "errors", "median_ms", "p95_ms", "p99_ms",
                   "throughput_rps", "cpu_util_pct", "gpu_util_pct"]


def sections(run_dir: Path, compare: Path | None = None) -> list[Section]:
    """Every section of the report, in the lab's order."""
    fastapi, flask = load(run_dir, FASTAPI), load(run_dir, FLASK)
    triton = normalise_triton(load(run_dir, TRITON))
    out: list[Section] = [_machine_section(run_dir, fastapi, triton)]
    if not fastapi.empty:
        out.append(Section("FastAPI: PyTorch vs ONNX Runtime", [
            _plot(fig_fastapi(fastapi), read_fastapi(fastapi)), _table(fastapi, FASTAPI_COLUMNS)]))
    if not flask.empty:
        out.append(Section("GourmetGram (Flask) through each backend", [
            _table(flask, ["step", "backend", "requests", "errors", "median_ms", "p95_ms", "labels_agree"])]))
    for steps, title, plot, reader in _triton_views():
        rows = step_rows(triton, *steps)
        if not rows.empty:
            out.append(Section(title, [_plot(plot(rows), reader(rows)), _table(rows, TRITON_COLUMNS)]))
    dyn = step_rows(triton, "dynamic_batching")
    counts = batch_size_counts(dyn[dyn["dynamic_batching"] == True]) if not dyn.empty else {}  # noqa: E712
    if counts:
        out.append(Section("Batch sizes the server formed (dynamic batching on)", [
            _plot(fig_batch_sizes(counts), read_batch_sizes(counts))]))
    util = pd.concat([fastapi.assign(step=fastapi.get("step", "fastapi")) if not fastapi.empty else fastapi,
                      triton], ignore_index=True)
    if not util.empty and "cpu_util_pct" in util:
        out.append(Section("CPU / GPU utilisation during each run", [
            _plot(fig_utilisation(util), _read_util(util))]))
    out.append(_effects_section(fastapi, triton, compare))
    return out


def _read_util(df: pd.DataFrame) -> str:
    cpu = _num(df, "cpu_util_pct").dropna()
    if cpu.empty:
        return "no utilisation samples"
    return f"CPU utilisation ranged {cpu.min():.0f}–{cpu.max():.0f}% across the measurements"


def _triton_views() -> list[tuple[tuple[str, ...], str, Callable[[pd.DataFrame], Figure],
                                  Callable[[pd.DataFrame], str]]]:
    return [
        (("python_concurrency",), "Triton, Python backend: concurrency sweep (queue vs compute)",
         lambda d: fig_breakdown(d, "concurrency", "Python backend: queue vs compute"), read_breakdown),
        (("python_client_batch", "python_concurrency"), "Triton, Python backend: client batch",
         lambda d: fig_breakdown(_one_client(d), "batch", "one client: single images vs a batch"),
         lambda d: read_client_batch(_one_client(d))),
        (("instance_scaling",), "Instance scaling (Python backend)",
         lambda d: fig_scaling(d, "instance scaling, Python backend"), read_scaling),
        (("threads_lesson",), "Threads per instance",
         lambda d: fig_scaling(d, "two instances: default threads vs split"), read_scaling),
        (("python_vs_onnx", "onnx_backend"), "Python backend vs ONNX backend", fig_backends,
         lambda d: read_per_level(d, "model")),
        (("onnx_backend", "onnx_scaling"), "ONNX backend: 1 vs 2 instances",
         lambda d: fig_breakdown(d, "concurrency", "ONNX backend scaling"),
         lambda d: read_per_level(d, "instances")),
        (("capacity", "arrivals"), "Capacity and arrival patterns (one instance)",
         lambda d: fig_breakdown(d[d["step"] == "arrivals"], "distribution", "constant vs Poisson arrivals"),
         read_arrivals),
        (("dynamic_batching",), "Dynamic batching across arrival rates", fig_rates, read_rates),
    ]


def _one_client(df: pd.DataFrame) -> pd.DataFrame:
    """Rows measured with one client (concurrency 1), single images first."""
    rows = df[_num(df, "concurrency") == 1]
    return rows.sort_values("batch", kind="stable") if "batch" in rows else rows


def _machine_section(run_dir: Path, *frames: pd.DataFrame) -> Section:
    facts: dict[str, Any] = {}
    for df in frames:
        if not df.empty:
            facts = {k: df.iloc[0][k] for k in ("host", "cpu_count", "gpu", "platform", "python") if k in df}
            break
    run_file = Path(run_dir) / "run.json"
    if run_file.exists():
        run = json.loads(run_file.read_text())
        facts.update({"preset": run.get("preset"), "target": run.get("target"),
                      "total time (s)": run.get("seconds"), "all notebooks passed": run.get("ok"),
                      "1-min load average before / after the run (contention)":
                          f"{run.get('load_average_before')} / {run.get('load_average_after')} "
                          f"on {run.get('cpu_count')} cores"})
        timings = pd.DataFrame(run.get("notebooks", []))
        steps = pd.DataFrame(run.get("steps", []))  # a chameleon run: provisioning, the node's run, teardown
    else:
        timings = steps = pd.DataFrame()
    parts = [pd.DataFrame({"fact": list(facts), "value": [str(v) for v in facts.values()]})
             .to_html(index=False, border=0, classes="data")]
    if not steps.empty:
        parts.append(_table(steps, ["step", "seconds", "ok", "detail"]))
    if not timings.empty:
        parts.append(_table(timings, ["name", "seconds", "ok", "error"]))
    return Section("Machine and run", parts)


def _effects_section(fastapi: pd.DataFrame, triton: pd.DataFrame, compare: Path | None = None) -> Section:
    checks = expected_effects(fastapi, triton)
    other: list[Check] = []
    other_name = ""
    if compare is not None:
        other = expected_effects(load(compare, FASTAPI), normalise_triton(load(compare, TRITON)))
        facts = load(compare, FASTAPI)
        other_name = f"{Path(compare).name} ({facts.iloc[0].get('gpu', '?')})" if not facts.empty else ""
    rows = "".join(
        f'<tr class="{c.status.replace(" ", "-")}"><td>{html.escape(c.effect)}'
        f'{" <small>(a GPU effect)</small>" if c.gpu_only else ""}</td>'
        f"<td>{c.status}</td><td>{html.escape(c.evidence)}</td>"
        + (f"<td>{o.status}: {html.escape(o.evidence)}</td>" if o is not None else "")
        + "</tr>" for c, o in zip(checks, other or [None] * len(checks), strict=True))
    seen = sum(c.status == "observed" for c in checks)
    summary = (f"<p>{seen} of {len(checks)} expected effects observed in this run. "
               f"{html.escape(NOISE_NOTE)}</p>")
    head = ("<tr><th>expected effect</th><th>this run</th><th>numbers</th>"
            + (f"<th>compared run {html.escape(other_name)}</th>" if other else "") + "</tr>")
    table = f'<table class="data effects">{head}{rows}</table>'
    return Section("The lab's expected effects: observed in this run?", [summary, table])


STYLE = """
body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;border-bottom:1px solid #ccc;margin-top:2em}
table.data{border-collapse:collapse;font-size:.8em;margin:.5em 0}
table.data td,table.data th{border:1px solid #ddd;padding:2px 6px;text-align:right}
figure{margin:1em 0}img{max-width:100%}figcaption{font-style:italic;font-size:.9em}
tr.observed td:nth-child(2){color:#070}tr.not-observed td:nth-child(2){color:#a00}
tr.not-measured td:nth-child(2){color:#777}.effects td{text-align:left}
"""


def render(run_dir: Path, compare: Path | None = None) -> str:
    """The whole report as one HTML string (plots embedded); ``compare``: another run (e.g. on a GPU)."""
    body = "".join(f"<section><h2>{html.escape(s.title)}</h2>{''.join(s.parts)}</section>"
                   for s in sections(run_dir, compare))
    title = f"serve-system lab — results of {Path(run_dir).name}"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>")


def write_report(run_dir: Path, compare: Path | None = None) -> Path:
    """Write ``run_dir/report.html`` from the results in ``run_dir``; returns its path.

    ``compare`` names another run's folder (a GPU run, say) whose expected-effect
    checks are shown next to this run's.
    """
    path = Path(run_dir) / "report.html"
    path.write_text(render(Path(run_dir), Path(compare) if compare else None))
    return path
