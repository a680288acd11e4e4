"""Figures and their one-line readings, shared by the step modules; the report embeds the same ones.

Figures are drawn with matplotlib's Agg canvas (no global state, any backend); ``as_image`` shows
one in a notebook, ``plot_html``/``table_html`` put one in the report. A ``Section`` is one heading
of the report with its parts.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from servelab.results.schema import COMPUTE_PARTS, FASTAPI_COLUMNS, QUEUE, TRITON_COLUMNS, num


def figure(width: float = 7.5, height: float = 3.4, cols: int = 1) -> tuple[Figure, Any]:
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, cols)
    return fig, axes


def finish(fig: Figure, ax: Any, xlabel: str | None, ylabel: str, title: str) -> Figure:
    """One plot's axis labels, legend and title, laid out: the figure, ready to show or save."""
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return fig


def _label(row: pd.Series, x: str) -> str:
    value = row.get(x)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _tick_labels(df: pd.DataFrame, x: str) -> list[str]:
    """The ``x`` values, or the rows' labels where ``x`` alone does not tell the rows apart."""
    values = [_label(r, x) for _, r in df.iterrows()]
    if len(set(values)) == len(values) or "label" not in df:
        return values
    return [str(r.get("label") or v) for v, (_, r) in zip(values, df.iterrows(), strict=True)]


def fig_breakdown(df: pd.DataFrame, x: str = "concurrency", title: str = "") -> Figure:
    """Server-side queue vs compute time per request (stacked), and client p50/p99, per ``x``."""
    fig, (left, right) = figure(cols=2)
    labels = _tick_labels(df, x)
    positions = list(range(len(df)))
    bottom = pd.Series([0.0] * len(df))
    for column, colour in [(QUEUE, "tab:red"), *zip(COMPUTE_PARTS, ("tab:olive", "tab:blue", "tab:cyan"),
                                                    strict=True)]:
        values = num(df, column).fillna(0.0).reset_index(drop=True)
        left.bar(positions, values, bottom=bottom, color=colour, label=column.removesuffix("_ms"))
        bottom = bottom + values
    left.set_xticks(positions, labels, fontsize=7, rotation=15 if len(labels[0]) > 8 else 0)
    left.set_ylabel("server time per request (ms)")
    left.set_xlabel(x)
    left.legend(fontsize=7)
    right.plot(positions, num(df, "p50_ms"), "o-", label="p50")
    right.plot(positions, num(df, "p99_ms"), "s--", label="p99")
    right.set_xticks(positions, labels, fontsize=7, rotation=15 if len(labels[0]) > 8 else 0)
    right.set_ylabel("client latency (ms)")
    right.set_xlabel(x)
    right.legend(fontsize=8)
    fig.suptitle(title or "queue vs compute", fontsize=11)
    fig.tight_layout()
    return fig


def fig_scaling(df: pd.DataFrame, title: str = "") -> Figure:
    """Throughput and p99 per instance configuration."""
    fig, (left, right) = figure(cols=2)
    labels = [str(v) for v in df.get("label", df.get("instances", pd.Series(dtype=str)))]
    positions = list(range(len(df)))
    left.bar(positions, num(df, "throughput"), color="tab:green")
    left.set_xticks(positions, labels, fontsize=7, rotation=15)
    left.set_ylabel("inferences/s")
    right.bar(positions, num(df, "p99_ms"), color="tab:red", label="p99")
    right.plot(positions, num(df, "p50_ms"), "ko-", label="p50")
    right.set_xticks(positions, labels, fontsize=7, rotation=15)
    right.set_ylabel("latency (ms)")
    right.legend(fontsize=8)
    fig.suptitle(title or "instance scaling", fontsize=11)
    fig.tight_layout()
    return fig


def fig_utilisation(df: pd.DataFrame) -> Figure:
    """Mean CPU (and GPU) utilisation during each measurement: one horizontal bar per row, its step and
    label written level beside it, so the figure grows with the rows and every name stays readable."""
    rows = max(len(df), 1)
    fig, ax = figure(width=9, height=1.2 + 0.24 * rows)
    labels = [_util_label(_text(r.get("step")), _text(r.get("label")) or _text(r.get("mode")))
              for _, r in df.iterrows()]
    positions = list(range(len(df)))
    has_gpu = "gpu_util_pct" in df and num(df, "gpu_util_pct").notna().any()
    width = 0.4 if has_gpu else 0.7
    ax.barh([p - width / 2 if has_gpu else p for p in positions], num(df, "cpu_util_pct"), width,
            label="CPU %")
    if has_gpu:
        ax.barh([p + width / 2 for p in positions], num(df, "gpu_util_pct"), width, label="GPU %")
    ax.set_yticks(positions, labels, fontsize=8)
    ax.invert_yaxis()  # the run's order, top to bottom
    ax.set_xlabel("mean utilisation during the measurement (%)")
    ax.set_xlim(0, 105)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("utilisation during each measurement", fontsize=11)
    fig.tight_layout()
    return fig


def _util_label(step: str, label: str) -> str:
    return " · ".join(dict.fromkeys(part for part in (step, label) if part))  # once when they are the same


def _text(value: Any) -> str:
    """A cell as text; missing values (None, NaN) as ''."""
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


def png(fig: Figure) -> str:
    """A figure as a base64 PNG data URI."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def first(df: pd.DataFrame, column: str, **where: Any) -> float | None:
    sel = df
    for key, value in where.items():
        if key not in sel:
            return None
        sel = sel[sel[key] == value]
    values = num(sel, column).dropna()
    return float(values.iloc[-1]) if len(values) else None


def read_breakdown(df: pd.DataFrame, x: str = "concurrency") -> str:
    if df.empty:
        return "no measurements"
    lo, hi = df.iloc[0], df.iloc[-1]
    queue_lo, queue_hi = (float(r.get(QUEUE) or 0) for r in (lo, hi))
    infer_lo, infer_hi = (float(r.get("compute_infer_ms") or 0) for r in (lo, hi))
    return (f"from {x} {_label(lo, x)} to {_label(hi, x)}: queue {queue_lo:.1f} → {queue_hi:.1f} ms, "
            f"compute infer {infer_lo:.1f} → {infer_hi:.1f} ms, p99 {float(lo.get('p99_ms') or 0):.0f} → "
            f"{float(hi.get('p99_ms') or 0):.0f} ms")


def read_per_level(df: pd.DataFrame, by: str) -> str:
    """At each concurrency, the rows that differ in ``by`` (model or instances) side by side."""
    parts = []
    for level, group in df.groupby("concurrency", sort=True):
        cells = [f"{r[by]}: {float(r['throughput']):.1f}/s, infer {float(r['compute_infer_ms']):.1f} ms, "
                 f"p99 {float(r['p99_ms']):.0f} ms" for _, r in group.iterrows()]
        parts.append(f"concurrency {level:g} — " + "; ".join(cells))
    return " | ".join(parts) or "no measurements"


def read_scaling(df: pd.DataFrame) -> str:
    if df.empty:
        return "no measurements"
    best = df.iloc[num(df, "throughput").argmax()]  # the row of the best throughput (NaN skipped)
    name = best.get("label", best.get("instances"))
    return (f"best throughput {float(best['throughput']):.1f}/s with {name}; "
            + ", ".join(f"{r.get('label', r.get('instances'))}: {float(r['throughput']):.1f}/s, "
                        f"p99 {float(r['p99_ms']):.0f} ms" for _, r in df.iterrows()))


def read_util(df: pd.DataFrame) -> str:
    cpu = num(df, "cpu_util_pct").dropna()
    if cpu.empty:
        return "no utilisation samples"
    return f"CPU utilisation ranged {cpu.min():.0f}–{cpu.max():.0f}% across the measurements"


def as_image(fig: Figure, name: str | None = None) -> Any:
    """A figure as an image a notebook shows (and stores) as PNG, whatever matplotlib backend is active;
    also saved for a lab report (:func:`save_figure`)."""
    from IPython.display import Image

    return Image(data=save_figure(fig, name), format="png")


def save_figure(fig: Figure, name: str | None = None) -> bytes:
    """The figure as PNG, saved as ``plots/<name>.png`` in the run's results folder (``name``: the
    figure's title by default; an existing file is never overwritten: ``-2``, ``-3`` … are added)."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    print(f"plot saved: {save_png(buffer.getvalue(), name or _title(fig))}")
    return buffer.getvalue()


def _title(fig: Figure) -> str:
    titles = [fig.get_suptitle(), *(ax.get_title() for ax in fig.axes)]
    return next((t for t in titles if t), "figure")


def save_png(data: bytes, name: str) -> Path:
    """Write ``data`` to ``plots/<slug of name>.png`` under the run's results, without overwriting."""
    import re

    from servelab.results.store import results_dir

    folder = results_dir() / "plots"
    folder.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:80] or "figure"
    for n in range(1, 1000):
        path = folder / (f"{slug}.png" if n == 1 else f"{slug}-{n}.png")
        try:
            with path.open("xb") as handle:
                handle.write(data)
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"{folder}: 999 plots named {slug} already")


# The report's tables of Triton and FastAPI measurements show a short set of columns under plain headings
# (the CSVs keep every column): what was run, throughput, p50, p99, queue, compute, utilisation and the
# one setting the table varies (threads or batch), when it varies. ``short_view`` is the one place.
MAX_COLUMNS = 8
HEADINGS = {"label": "measurement", "throughput": "throughput (/s)", "throughput_rps": "throughput (/s)",
            "p50_ms": "p50 (ms)", "median_ms": "p50 (ms)", "p99_ms": "p99 (ms)", "queue_ms": "queue (ms)",
            "compute_infer_ms": "compute (ms)", "cpu_util_pct": "CPU %", "gpu_util_pct": "GPU %",
            "threads": "threads", "batch": "client batch", "mean_batch_size": "mean batch",
            "max_batch": "max batch"}
LESSONS = ("threads", "batch", "mean_batch_size", "max_batch")  # the first that varies is the table's lesson


def _text_series(df: pd.DataFrame, column: str) -> list[str]:
    return ["" if v is None or v != v else str(v) for v in df[column]] if column in df else [""] * len(df)


def short_view(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame | None:
    """The report's short form (at most ``MAX_COLUMNS`` columns, plain headings) of a table drawn with
    ``TRITON_COLUMNS`` or ``FASTAPI_COLUMNS``; None for any other table."""
    if list(columns) == TRITON_COLUMNS:
        frame = df if "label" in df else df.assign(label=df.get("model", ""))
        # a level measured after a skipped warm-up (no rule counts it), or that never settled, says so
        blank = pd.Series("", index=frame.index)
        cold = [str(v).startswith("skipped") for v in frame.get("warmup", blank)]
        loose = [v is False or str(v) == "False" for v in frame.get("settled", blank)]
        labels = [f"{label}{' (no warm-up)' * c}{' (unsettled)' * u}"
                  for label, c, u in zip(frame["label"], cold, loose, strict=True)]
        frame = frame.assign(label=labels)
        picked = ["label", "throughput", "p50_ms", "p99_ms", QUEUE, "compute_infer_ms"]
    elif list(columns) == FASTAPI_COLUMNS:
        frame = df.assign(label=[" ".join(_text(r.get(c)) for c in ("backend", "mode")) +
                                 (f" c={_label(r, 'concurrency')}" if _text(r.get("concurrency")) else "")
                                 for _, r in df.iterrows()])
        picked = ["label", "throughput_rps", "median_ms", "p99_ms"]
        if num(df, "errors").fillna(0).gt(0).any():
            picked.append("errors")
    else:
        return None
    devices = _text_series(frame, "device")
    if any(d.startswith("cuda") for d in devices):  # a GPU run: every row says where it computed
        frame = frame.assign(label=[f"{label} · {d}" if d else label
                                    for label, d in zip(frame["label"], devices, strict=True)])
    util = [c for c in ("gpu_util_pct", "cpu_util_pct") if num(frame, c).notna().any()]
    lesson = [c for c in LESSONS if c in frame and frame[c].dropna().astype(str).nunique() > 1][:1]
    if not lesson and num(frame, "threads").notna().any():  # the thread count is always worth seeing
        lesson = ["threads"]
    picked += util[:1]
    if len(util) > 1 and len(picked) + len(lesson) < MAX_COLUMNS:
        picked.append(util[1])
    picked = [c for c in picked + lesson if c in frame][:MAX_COLUMNS]
    return frame[picked].round(1).rename(columns=HEADINGS)


def table_html(df: pd.DataFrame, columns: list[str]) -> str:
    """``df``'s ``columns`` (those present; the short view for Triton and FastAPI tables) as an HTML table
    that scrolls inside its own box rather than widening the page."""
    short = None if df.empty else short_view(df, columns)
    frame = short if short is not None else df[[c for c in columns if c in df]].round(2)
    if df.empty or frame.columns.empty:
        return "<p><em>no rows</em></p>"
    return f'<div class="table">{frame.to_html(index=False, border=0, classes="data", na_rep="")}</div>'


@dataclass
class Section:
    """One heading with its plots (each with a reading) and tables."""

    title: str
    parts: list[str]
    anchor: str = ""  # the section's id in the page, for links to it


def plot_html(fig: Figure, reading: str) -> str:
    return (f'<figure><img src="{png(fig)}" alt="{html.escape(reading)}">'
            f"<figcaption>{html.escape(reading)}</figcaption></figure>")
