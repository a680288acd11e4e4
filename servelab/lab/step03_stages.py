"""Notebook 03 inside a request: each FastAPI measurement's stages, the stage that bounds throughput with
many clients, and one worker process against N (with the model alone's ceiling beside them).

The stages come from the services' ``Server-Timing`` answers (``servelab.serving.stages``), as mean ms
per request in each measurement's row (``servelab.bench.client``). The bound is read from how much
each part of a request's time grew from one client to many: a queue forms in front of the part that
cannot keep up (``bounding``).
"""
# why: docs/decisions/2026-11-28-fastapi-stages-and-workers.md

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from servelab.report.effects import Check, Quantity, check
from servelab.report.figures import figure
from servelab.results.schema import num
from servelab.serving.stages import BATCH_COLUMN, OUTSIDE_COLUMN, STAGE_COLUMNS

# the stage table reads down: one row per figure (its unit named), one column per measurement
STAGE_ROWS = {"throughput_rps": "throughput (requests/s)", "of_ceiling": "share of the model alone's ceiling",
              "mean_ms": "mean latency (ms)", **{c: f"{c.removesuffix('_ms')} (ms)" for c in STAGE_COLUMNS},
              OUTSIDE_COLUMN: "outside the app (ms)", BATCH_COLUMN: "mean batch (images per forward pass)"}
MEASUREMENTS = 8  # columns of measurements a stage table shows at most (with its row names: 9)
PARTS = {  # the stages, by what does the work; the waits belong to what they wait for
    "inference": ("batch_wait_ms", "inference_ms"),
    "preprocessing": ("preprocess_wait_ms", "preprocess_ms"),
    "the HTTP layer": ("parse_ms", "response_ms", OUTSIDE_COLUMN),
}
EXPECTED_BOUND = {"cpu": "inference", "cuda": "preprocessing"}  # the expectation per device
COLOURS = {"parse_ms": "tab:gray", "preprocess_wait_ms": "navajowhite", "preprocess_ms": "tab:orange",
           "batch_wait_ms": "lightsteelblue", "inference_ms": "tab:blue", "response_ms": "tab:purple",
           OUTSIDE_COLUMN: "gainsboro"}
ENGINES = {"pt": "PyTorch", "onnx": "ONNX Runtime"}


def one_process(df: pd.DataFrame) -> pd.DataFrame:
    """The rows measured with one worker process (rows from before ``workers`` existed count as one)."""
    if df.empty or "workers" not in df:
        return df
    return df[num(df, "workers").fillna(1) <= 1]


def several_processes(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty or "workers" not in df:
        return df.iloc[0:0]
    return df[num(df, "workers").fillna(1) > 1]


def staged(df: pd.DataFrame) -> pd.DataFrame:
    """The rows that carry a stage breakdown (services that sent ``Server-Timing``)."""
    return df[num(df, "server_ms").notna()] if not df.empty else df


def stage_table_html(df: pd.DataFrame) -> str:
    """``stage_table`` as the report shows it."""
    from servelab.report.figures import whole_numbers

    table = stage_table(df)
    if table.empty:
        return "<p><em>no rows</em></p>"
    shown = whole_numbers(table.reset_index())
    return f'<div class="table">{shown.to_html(index=False, border=0, classes="data", na_rep="")}</div>'


def stage_table(df: pd.DataFrame) -> pd.DataFrame:
    """``df``'s measurements with a stage breakdown as columns (the last ``MEASUREMENTS``), the figures as
    rows under their units (``STAGE_ROWS``: throughput, mean latency, each stage, outside the app, the
    mean batch), each rounded to 0.1; a row no measurement has is left out."""
    from servelab.report.figures import DECIMALS

    rows = staged(df).tail(MEASUREMENTS)
    if rows.empty:
        return pd.DataFrame()
    figures = [c for c in STAGE_ROWS if num(rows, c).notna().any()]
    table = pd.DataFrame({_label(r): [num(rows.loc[[i]], c).round(DECIMALS).iloc[0] for c in figures]
                          for i, r in rows.iterrows()}, index=[STAGE_ROWS[c] for c in figures])
    table.index.name = "per request"
    return table


def _label(row: pd.Series) -> str:
    clients = int(row.get("concurrency") or 1)
    workers = int(num(pd.DataFrame([row]), "workers").fillna(1).iloc[0])
    device = " · cuda" if str(row.get("device")) == "cuda" else ""
    processes = f" · {workers} processes" if workers > 1 else ""
    return f"{row.get('backend')} · {clients} client{'s' * (clients > 1)}{processes}{device}"


def fig_stages(df: pd.DataFrame) -> Figure:
    """One stacked bar per measurement: the mean ms of each stage and outside the app (left), and the same
    as shares of the client's mean latency (right)."""
    rows = staged(df).reset_index(drop=True)
    fig, (left, right) = figure(width=9.5, height=1.6 + 0.45 * max(1, len(rows)), cols=2)
    labels = [_label(r) for _, r in rows.iterrows()]
    parts = [*STAGE_COLUMNS, OUTSIDE_COLUMN]
    values = pd.DataFrame({c: num(rows, c).fillna(0.0) for c in parts})
    total = values.sum(axis=1).where(lambda s: s > 0, 1.0)
    for ax, frame in ((left, values), (right, values.div(total, axis=0) * 100)):
        start = pd.Series(0.0, index=rows.index)
        for column in parts:
            ax.barh(labels, frame[column], left=start, color=COLOURS[column], edgecolor="white",
                    hatch="//" if column.endswith("_wait_ms") else None, label=column.removesuffix("_ms"))
            start = start + frame[column]
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=8)
    left.set_xlabel("mean ms per request")
    right.set_xlabel("share of the client's mean latency (%)")
    right.set_yticks(range(len(labels)), [""] * len(labels))
    handles, names = left.get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncols=len(parts), fontsize=7, frameon=False)
    fig.suptitle("Where a request's time goes (hatched: waiting)", fontsize=11)
    fig.tight_layout(rect=(0, 0.1 if len(rows) > 2 else 0.14, 1, 1))
    return fig


def bounding(df: pd.DataFrame, backend: str) -> dict[str, Any] | None:
    """How a request's parts grew from one client to the most clients measured (one process), and the part
    that grew most: the one a queue formed in front of. None without both stage breakdowns."""
    rows = staged(one_process(df))
    if rows.empty or "backend" not in rows or "mode" not in rows:
        return None
    rows = rows[rows["backend"] == backend]
    alone, loaded = rows[rows["mode"] == "sequential"], rows[rows["mode"] == "concurrent"]
    if alone.empty or loaded.empty:
        return None
    a, b = alone.iloc[-1], loaded.iloc[-1]
    growth = {part: sum(float(b.get(c) or 0) - float(a.get(c) or 0) for c in columns)
              for part, columns in PARTS.items()}
    part = max(growth, key=lambda p: growth[p])
    stage = max(PARTS[part], key=lambda c: float(b.get(c) or 0) - float(a.get(c) or 0))
    each = {c: float(b.get(c) or 0) - float(a.get(c) or 0) for columns in PARTS.values() for c in columns}
    return {"part": part, "growth": growth, "stage": stage, "stages": each,
            "alone_ms": float(a["mean_ms"]), "loaded_ms": float(b["mean_ms"]),
            "clients": int(b.get("concurrency") or 0), "device": str(a.get("device") or "")}


def _said(found: dict[str, Any]) -> str:
    """"51 ms alone → 370 ms with 16 clients (mean latency); preprocessing +253 ms (preprocess_wait
    +242, preprocess +12), …: preprocessing bounds throughput": each part's growth, and the stages of the
    stage table it sums (the same rows, the same numbers)."""
    def part(name: str) -> str:
        stages = ", ".join(f"{c.removesuffix('_ms')} {found['stages'][c]:+.0f}" for c in PARTS[name])
        return f"{name} {found['growth'][name]:+.0f} ms ({stages})"
    grew = "; ".join(part(name) for name in sorted(found["growth"], key=lambda p: -found["growth"][p]))
    return (f"{found['alone_ms']:.0f} ms alone → {found['loaded_ms']:.0f} ms with {found['clients']} clients "
            f"(mean latency); {grew}: {found['part']} bounds throughput")


def read_stages(df: pd.DataFrame) -> str:
    """One line per engine: where the time went alone and with many clients, and what bounds throughput."""
    parts = []
    for backend, engine in ENGINES.items():
        found = bounding(df, backend)
        if found:
            parts.append(f"{engine}: {_said(found)}")
    return "; ".join(parts) or "no stage breakdown in this run (the services sent no Server-Timing)"


def stage_checks(df: pd.DataFrame) -> list[Check]:
    """Per engine: with many clients the bound is inference on a CPU, preprocessing on a GPU (the issue's
    expectation; the evidence names the part that grew most)."""
    checks = []
    for backend, engine in ENGINES.items():
        found = bounding(df, backend)
        expected = EXPECTED_BOUND.get(found["device"]) if found else None
        checks.append(check(
            f"FastAPI stages ({backend}): with many clients, inference bounds throughput on a CPU, "
            "preprocessing on a GPU",
            (found["loaded_ms"] if found else None,),
            lambda _, f=found, e=expected: f is not None and f["part"] == e,
            lambda _, f=found, n=engine: f"{n} on the {'GPU' if f['device'] == 'cuda' else 'CPU'}: "
                                         f"{_said(f)}",
            figures=lambda _, f=found: tuple(Quantity(p, f["growth"][p], "ms", signed=True)
                                             for p in sorted(f["growth"], key=lambda p: -f["growth"][p]))))
    return checks


# ----------------------------------------------------------------------------- one process vs N

def processes_for(device: str | None, cores: int) -> int:
    """N of the "one process vs N" step: on a CPU one process per core (2 to 8), each with its core's share;
    on a GPU half the cores (2 to 8), so each process keeps two cores to preprocess on."""
    return max(2, min(8, cores if device != "cuda" else cores // 2))


def compare_processes(df: pd.DataFrame, backend: str = "pt") -> pd.DataFrame:
    """The many-client rows of ``backend``: one process and N, each with its share of the ceiling (measured
    in the N-process row's ``ceiling_rps``) and its stage breakdown."""
    if df.empty or "backend" not in df or "mode" not in df:
        return df.iloc[0:0]
    loaded = df[(df["backend"] == backend) & (df["mode"] == "concurrent")]
    rows = pd.concat([one_process(loaded).tail(1), several_processes(loaded).tail(1)])
    if rows.empty:
        return rows
    top = num(rows, "ceiling_rps").dropna()
    if len(top):  # measured on a GPU only (step03_fastapi.model_ceiling)
        rows = rows.assign(of_ceiling=num(rows, "throughput_rps") / float(top.iloc[-1]))
    return rows.assign(workers=num(rows, "workers").fillna(1).astype(int))


def _longest(row: pd.Series) -> str:
    """The stage a measurement's requests spent most of their time in."""
    return max(STAGE_COLUMNS, key=lambda column: float(row.get(column) or 0)).removesuffix("_ms")


def read_processes(df: pd.DataFrame, backend: str = "pt") -> str:
    """One process against N at many clients: throughput, the batches each process formed, the bound."""
    rows = compare_processes(df, backend)
    if len(rows) < 2:
        return "no 'one process vs N' measurement in this run"
    one, many = rows.iloc[0], rows.iloc[-1]
    ratio = float(many["throughput_rps"]) / float(one["throughput_rps"])
    said = (f"{ENGINES[backend]}, {int(many['concurrency'])} clients: 1 process "
            f"{one['throughput_rps']:.0f} req/s, {int(many['workers'])} processes "
            f"{many['throughput_rps']:.0f} req/s ({ratio:.2f}×)")
    if pd.notna(many.get("of_ceiling")):
        said += f"; {one['of_ceiling']:.2f} → {many['of_ceiling']:.2f} of the model alone's ceiling"
    if pd.notna(one.get(BATCH_COLUMN)) and pd.notna(many.get(BATCH_COLUMN)):
        said += f"; mean batch per forward pass {one[BATCH_COLUMN]:.1f} → {many[BATCH_COLUMN]:.1f}"
    longest = [_longest(one), _longest(many)]
    said += f"; the longest stage {longest[0]} → {longest[1]}"
    return said


def process_checks(df: pd.DataFrame, backend: str = "pt") -> list[Check]:
    """N processes beat one at many clients, and reach 0.6 of the ceiling: GPU effects (one Python process
    leaves the GPU waiting); on a CPU the processes split the same cores."""
    rows = compare_processes(df, backend)
    one = rows.iloc[0] if len(rows) >= 2 else None
    many = rows.iloc[-1] if len(rows) >= 2 else None
    thr = (float(one["throughput_rps"]) if one is not None else None,
           float(many["throughput_rps"]) if many is not None else None)
    n = int(many["workers"]) if many is not None else "N"
    share = float(many["of_ceiling"]) if many is not None and pd.notna(many.get("of_ceiling")) else None
    on_cpu = many is not None and str(many.get("device")) != "cuda"
    no_bound = ("the engine ran on the CPU, where the ceiling (the model alone on every core) is no bound: "
                "single-threaded passes side by side beat it")
    return [
        check(f"FastAPI worker processes ({backend}): with many clients N serve at least 1.2× the requests "
              "of one",
              thr, lambda a, b: b >= 1.2 * a, gpu_only=True,
              evidence=lambda a, b: f"1 process {a:.0f} req/s, {n} processes {b:.0f} req/s ({b / a:.2f}×)"),
        check(f"FastAPI worker processes ({backend}): with many clients N reach 0.6 of the model alone's "
              "ceiling",
              (share,), lambda s: s >= 0.6, lambda s: f"{n} processes: {s:.2f} of the ceiling", gpu_only=True,
              blocked=no_bound if on_cpu else None),
    ]
