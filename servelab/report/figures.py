"""Figures and tables, shared by the step modules; the report embeds the same ones (their one-line
readings: ``servelab.report.readings``).

Figures are drawn with matplotlib's Agg canvas (no global state, any backend); ``as_image`` shows
one in a notebook, ``plot_html``/``table_html`` put one in the report. A ``Section`` is one heading
of the report with its parts.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from servelab.report.readings import config_column, level_text
from servelab.report.verdict import amount
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


def _tick_labels(df: pd.DataFrame, x: str) -> list[str]:
    """The ``x`` values, or the rows' labels where ``x`` alone does not tell the rows apart."""
    values = [level_text(r, x) for _, r in df.iterrows()]
    if len(set(values)) == len(values) or "label" not in df:
        return values
    return [str(r.get("label") or v) for v, (_, r) in zip(values, df.iterrows(), strict=True)]


HATCHES = ("", "//", "..", "xx", "\\\\")


def fig_breakdown(df: pd.DataFrame, x: str = "concurrency", title: str = "") -> Figure:
    """Server-side queue vs compute time per request (stacked), and client p50/p99, per ``x``. Several
    configurations at the same ``x`` (``config_column``) get bars side by side and a line each; rows
    that are configurations themselves (``x`` not a number) get points, never a line between them."""
    by = config_column(df, x)
    groups = [("", df)] if by is None else [(str(k), g) for k, g in df.groupby(by, sort=False)]
    levels = (sorted(set(num(df, x).dropna())) if by is not None else list(range(len(df))))
    fig, (left, right) = figure(cols=2)
    width = 0.8 / len(groups)
    numeric = num(df, x).notna().all()
    for n, (name, group) in enumerate(groups):
        at = ([levels.index(v) for v in num(group, x)] if by is not None else list(range(len(group))))
        shift = [p + (n - (len(groups) - 1) / 2) * width for p in at]
        bottom = pd.Series([0.0] * len(group))
        for column, colour in [(QUEUE, "tab:red"), *zip(COMPUTE_PARTS, ("tab:olive", "tab:blue", "tab:cyan"),
                                                        strict=True)]:
            values = num(group, column).fillna(0.0).reset_index(drop=True)
            left.bar(shift, values, width * 0.95, bottom=bottom, color=colour,
                     hatch=HATCHES[n % len(HATCHES)], edgecolor="white" if n else None,
                     label=column.removesuffix("_ms") if n == 0 else None)
            bottom = bottom + values
        style = ("o-", "s--") if numeric else ("o", "s")
        prefix = f"{name} " if name else ""
        right.plot(at, num(group, "p50_ms"), style[0], label=f"{prefix}p50")
        right.plot(at, num(group, "p99_ms"), style[1], label=f"{prefix}p99")
        if by is not None:
            left.bar([0], [0], 0, color="white", edgecolor="grey", hatch=HATCHES[n % len(HATCHES)],
                     label=name)
    labels = ([level_text(pd.Series({x: v}), x) for v in levels] if by is not None else _tick_labels(df, x))
    ticks = list(range(len(labels)))
    rotation = 15 if max((len(t) for t in labels), default=0) > 8 else 0
    for ax, ylabel in ((left, "server time per request (ms)"), (right, "client latency (ms)")):
        ax.set_xticks(ticks, labels, fontsize=7, rotation=rotation)
        ax.set_ylabel(ylabel)
        ax.set_xlabel(x)
        ax.legend(fontsize=7)
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
    right.plot(positions, num(df, "p50_ms"), "ko", label="p50")  # configurations: points, no line between
    right.set_xticks(positions, labels, fontsize=7, rotation=15)
    right.set_ylabel("latency (ms)")
    right.legend(fontsize=8)
    fig.suptitle(title or "instance scaling", fontsize=11)
    fig.tight_layout()
    return fig


def fig_utilisation(df: pd.DataFrame) -> Figure:
    """Mean CPU (the machine's, and the server processes' share where sampled) and GPU utilisation during
    each measurement: bars per row, its step and label written level beside it, so the figure grows with
    the rows and every name stays readable."""
    rows = max(len(df), 1)
    fig, ax = figure(width=9, height=1.2 + 0.24 * rows)
    labels = [_util_label(_text(r.get("step")), _text(r.get("label")) or _text(r.get("mode")))
              for _, r in df.iterrows()]
    positions = list(range(len(df)))
    # the machine's CPU, the server processes' share of it (same scale), the GPU: those sampled
    named = (("cpu_util_pct", "CPU % (whole machine)"), ("server_cpu_pct", "server CPU %"),
             ("gpu_util_pct", "GPU %"))
    series = [(c, name) for c, name in named if c in df and num(df, c).notna().any()]
    width = 0.8 / max(1, len(series))
    for n, (column, name) in enumerate(series):
        shifted = [p + (n - (len(series) - 1) / 2) * width for p in positions]
        ax.barh(shifted, num(df, column), width, label=name)
    ax.set_yticks(positions, labels, fontsize=8)
    ax.invert_yaxis()  # the run's order, top to bottom
    ax.set_xlabel("mean utilisation during the measurement (%; CPU: 100 = all cores)")
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


def as_image(fig: Figure, name: str | None = None) -> Any:
    """A figure as an image a notebook shows (and stores) as PNG, whatever matplotlib backend is active;
    also saved for a lab report (:func:`save_figure`)."""
    from IPython.display import Image

    return Image(data=save_figure(fig, name), format="png")


_SAVED_SAID: list[bool] = []  # this kernel (one notebook) said where its plots are saved


def save_figure(fig: Figure, name: str | None = None) -> bytes:
    """The figure as PNG, saved as ``plots/<name>.png`` in the run's results folder (``name``: the
    figure's title by default; an existing file is never overwritten: ``-2``, ``-3`` … are added). Where
    they go is said once per notebook, under its first plot."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    from servelab.core.paths import shown

    path = save_png(buffer.getvalue(), name or _title(fig))
    if not _SAVED_SAID:
        _SAVED_SAID.append(True)
        print(f"plot saved: {shown(str(path))} (every plot of this notebook is saved as a PNG in "
              f"{shown(str(path.parent))}/, named after its title)")
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
MAX_COLUMNS = 9
# perf_analyzer counts every image of a client batch as one inference (its infer/sec); the FastAPI and
# Flask clients send one image per request
HEADINGS = {"server_cpu_pct": "server CPU %",
            "label": "measurement", "throughput": "throughput (images/s)",
            "throughput_rps": "throughput (requests/s)",
            "p50_ms": "p50 (ms)", "median_ms": "p50 (ms)", "p95_ms": "p95 (ms)", "p99_ms": "p99 (ms)",
            "queue_ms": "queue (ms)", "compute_infer_ms": "compute (ms)", "cpu_util_pct": "CPU %",
            "gpu_util_pct": "GPU %", "threads": "threads", "batch": "client batch",
            "mean_batch_size": "mean batch", "max_batch": "max batch", "cold_ms": "first (ms)",
            "max_ms": "max (ms)", "goodput_rps": "goodput (requests/s)", "shed_p99_ms": "refused p99 (ms)",
            "request_kb": "request (KB)", "client_cpu_ms": "client CPU (ms/request)",
            "compute_ms": "compute, all stages (ms)", "inference_count": "requests",
            # 09's LLM rows
            "ttft_ms": "TTFT (ms)", "tpot_ms": "TPOT (ms)", "ttft_p50_ms": "TTFT p50 (ms)",
            "ttft_p99_ms": "TTFT p99 (ms)", "itl_p50_ms": "ITL p50 (ms)",
            "output_tokens_s": "output (tokens/s)",
            "prompt_tokens": "prompt (tokens)", "output_tokens": "output (tokens)",
            "output_lengths": "output lengths (tokens)", "max_running": "most running (sequences)",
            "max_waiting": "most waiting (requests)",
            # 10's step loads, shedding and kill
            "sent": "sent (requests)", "ok": "answered (requests)", "shed_503": "refused, 503 (requests)",
            "timeouts": "timed out (requests)", "replicas_max": "most replicas",
            "replica_seconds": "replica-s",
            "failed": "failed (requests)", "in_flight_at_kill": "in flight at the kill (requests)",
            "killed_at_s": "killed at (s)", "replaced_after_s": "replaced after (s)",
            "fewest_running_after_kill": "fewest running after (replicas)",
            "max_queued_requests": "max_queued_requests (requests)"}
DECIMALS = 1  # every measured figure a table shows: rounded once, here, from the row's full value
# why: docs/decisions/2026-11-28-numbers-printed-once.md
LESSONS = ("threads", "batch", "mean_batch_size", "max_batch")  # the first that varies is the table's lesson


def _text_series(df: pd.DataFrame, column: str) -> list[str]:
    return ["" if v is None or v != v else str(v) for v in df[column]] if column in df else [""] * len(df)


def _several(row: pd.Series) -> bool:
    """A FastAPI row measured with more than one worker process (``workers``)."""
    workers = pd.to_numeric(pd.Series([row.get("workers")]), errors="coerce").iloc[0]
    return bool(workers > 1)


def short_view(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame | None:
    """The report's short form (at most ``MAX_COLUMNS`` columns, plain headings with units, figures
    rounded once to ``DECIMALS``) of a table drawn with ``TRITON_COLUMNS`` or ``FASTAPI_COLUMNS``; any
    other table: its ``columns`` that are present, under the same headings and rounding; None when none
    is present."""
    if list(columns) not in (TRITON_COLUMNS, FASTAPI_COLUMNS):
        present = [c for c in columns if c in df]
        return df[present].round(DECIMALS).rename(columns=HEADINGS) if present else None
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
                                 (f" c={level_text(r, 'concurrency')}" if _text(r.get("concurrency")) else "")
                                 + (f" ×{level_text(r, 'workers')} processes" if _several(r) else "")
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
    # utilisation: the GPU's, the machine's CPU and, beside it, the server processes' share of it
    util = [c for c in ("gpu_util_pct", "cpu_util_pct", "server_cpu_pct") if num(frame, c).notna().any()]
    lesson = [c for c in LESSONS if c in frame and frame[c].dropna().astype(str).nunique() > 1][:1]
    if not lesson and num(frame, "threads").notna().any():  # the thread count is always worth seeing
        lesson = ["threads"]
    picked += util[:1]
    for more in util[1:]:
        if len(picked) + len(lesson) < MAX_COLUMNS:
            picked.append(more)
    picked = [c for c in picked + lesson if c in frame][:MAX_COLUMNS]
    return frame[picked].round(DECIMALS).rename(columns=HEADINGS)


def table_html(df: pd.DataFrame, columns: list[str]) -> str:
    """``df``'s ``columns`` (those present; the short view for Triton and FastAPI tables) as an HTML table
    that scrolls inside its own box rather than widening the page."""
    frame = None if df.empty else short_view(df, columns)
    if frame is None or frame.columns.empty:
        return "<p><em>no rows</em></p>"
    frame = whole_numbers(frame)
    return f'<div class="table">{frame.to_html(index=False, border=0, classes="data", na_rep="")}</div>'


def whole_numbers(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as a table shows it: its float columns that hold only whole numbers (counts a missing
    value made float: 501.0 requests) as integers, and every missing value (None, NaN) blank."""
    out = frame.copy()
    for column in out.columns:
        values = out[column]
        if values.dtype.kind == "f" and values.notna().any() and (values.dropna() % 1 == 0).all():
            out[column] = ["" if pd.isna(v) else int(v) for v in values]
        elif values.dtype.kind == "O":
            out[column] = ["" if v is None or (isinstance(v, float) and v != v) else v for v in values]
    return out


class Amount(float):
    """A measured figure that a notebook cell shows with its unit ("45.7 inferences/s"), and computes with
    as the float it is."""

    unit: str = ""

    def __new__(cls, value: float, unit: str) -> Amount:
        made = super().__new__(cls, value)
        made.unit = unit
        return made

    def __repr__(self) -> str:
        return f"{amount(float(self))} {self.unit}"


class Amounts(list[float]):
    """Figures a cell shows with their unit and what they were made of ("27.4, 54.9 requests/s (0.6, 1.2 ×
    the capacity)"); a list of floats to compute with."""

    def __init__(self, values: Sequence[float], unit: str, said: str = "") -> None:
        super().__init__(values)
        self.unit, self.said = unit, said

    def __repr__(self) -> str:
        return f"{', '.join(amount(v) for v in self)} {self.unit}" + (f" ({self.said})" if self.said else "")


@dataclass
class Section:
    """One heading with its plots (each with a reading) and tables."""

    title: str
    parts: list[str]
    anchor: str = ""  # the section's id in the page, for links to it


def plot_html(fig: Figure, reading: str) -> str:
    return (f'<figure><img src="{png(fig)}" alt="{html.escape(reading)}">'
            f"<figcaption>{html.escape(reading).replace(chr(10), '<br>')}</figcaption></figure>")
