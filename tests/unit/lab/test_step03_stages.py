"""03's look inside a request, as pure functions on small hand-made rows: the bound named from how the
stages grew, the verdicts per device, one process against N, and the figure."""

from __future__ import annotations

import pandas as pd

from servelab.lab import step03_fastapi
from servelab.lab import step03_stages as stages
from servelab.results.schema import RunData

EMPTY = pd.DataFrame()


def row(backend: str, mode: str, device: str = "cpu", workers: int = 1, **stage_ms: float) -> dict:
    """A FastAPI measurement's row with a stage breakdown (every stage 1 ms unless given)."""
    parts = {column: stage_ms.get(column.removesuffix("_ms"), 1.0) for column in stages.STAGE_COLUMNS}
    outside = stage_ms.get("outside", 1.0)
    server = sum(parts.values())
    return {"backend": backend, "mode": mode, "device": device, "workers": workers,
            "concurrency": 16 if mode == "concurrent" else 1, "throughput_rps": stage_ms.get("rps", 100.0),
            "mean_ms": server + outside, "server_ms": server, "outside_ms": outside, **parts,
            "mean_batch": stage_ms.get("batch", 1.0), "median_ms": server + outside}


def status(checks: list, words: str) -> str:
    [found] = [c for c in checks if words in c.effect]
    return found.status


def test_the_bound_is_the_part_whose_time_grew_most() -> None:
    df = pd.DataFrame([row("onnx", "sequential", inference=6),
                       row("onnx", "concurrent", batch_wait=90, inference=7),
                       row("pt", "sequential", inference=20), row("pt", "concurrent", preprocess_wait=80)])
    onnx, pt = stages.bounding(df, "onnx"), stages.bounding(df, "pt")
    assert onnx is not None and onnx["part"] == "inference" and onnx["stage"] == "batch_wait_ms"
    assert pt is not None and pt["part"] == "preprocessing" and pt["stage"] == "preprocess_wait_ms"
    assert "inference bounds throughput" in stages.read_stages(df)
    checks = stages.stage_checks(df)
    assert status(checks, "FastAPI stages (onnx)") == "observed"  # inference, on a CPU: as expected
    assert status(checks, "FastAPI stages (pt)") == "not observed"  # preprocessing on a CPU
    assert "preprocessing bounds throughput" in next(c.evidence for c in checks if "(pt)" in c.effect)


def test_on_a_gpu_preprocessing_is_the_expected_bound() -> None:
    df = pd.DataFrame([row("pt", "sequential", "cuda", preprocess=6, inference=5),
                       row("pt", "concurrent", "cuda", preprocess=40, preprocess_wait=10, batch_wait=8)])
    assert status(stages.stage_checks(df), "FastAPI stages (pt)") == "observed"


def test_rows_without_stages_or_with_n_processes_only_are_not_read_as_one_process() -> None:
    old = pd.DataFrame([{"backend": "pt", "mode": mode, "median_ms": 10.0}
                        for mode in ("sequential", "concurrent")])
    assert stages.bounding(old, "pt") is None  # a reference run from before the stages
    assert {c.status for c in stages.stage_checks(old)} == {"cannot show here"}
    df = pd.DataFrame([row("pt", "sequential"), row("pt", "concurrent", workers=2, batch_wait=50)])
    assert stages.bounding(df, "pt") is None  # the N-process row is not the one-process load
    assert list(stages.one_process(df)["mode"]) == ["sequential"]


def test_n_processes_on_a_gpu_are_held_to_the_issue_s_goal() -> None:
    n_row = {**row("pt", "concurrent", "cuda", workers=8, rps=1400, batch=2.1), "ceiling_rps": 2284.0}
    one_row = row("pt", "concurrent", "cuda", rps=250, batch=4.7)
    df = pd.DataFrame([row("pt", "sequential", "cuda"), one_row, n_row])
    checks = stages.process_checks(df)
    assert status(checks, "N serve at least 1.2×") == "observed"
    assert status(checks, "N reach 0.6") == "observed"
    said = stages.read_processes(df)
    assert "1 process 250 req/s, 8 processes 1400 req/s (5.60×)" in said
    assert "0.11 → 0.61 of the model alone's ceiling" in said
    assert "mean batch per forward pass 4.7 → 2.1" in said
    table = stages.compare_processes(df)
    assert list(table["workers"]) == [1, 8] and round(float(table["of_ceiling"].iloc[0]), 2) == 0.11


def test_on_a_cpu_the_ceiling_is_no_bound_and_the_gain_is_a_gpu_effect() -> None:
    df = pd.DataFrame([row("pt", "concurrent", rps=60), row("pt", "concurrent", workers=2, rps=58)])
    checks = stages.process_checks(df)
    gain = next(c for c in checks if "1.2×" in c.effect)
    assert gain.status == "not observed" and gain.gpu_only
    ceiling = next(c for c in checks if "0.6" in c.effect)
    assert ceiling.status == "cannot show here" and "no bound" in ceiling.evidence
    assert "of_ceiling" not in stages.compare_processes(df)


def test_n_follows_the_device_and_the_cores() -> None:
    assert [stages.processes_for("cpu", c) for c in (1, 2, 4, 32)] == [2, 2, 4, 8]
    assert [stages.processes_for("cuda", c) for c in (2, 8, 16, 48)] == [2, 4, 8, 8]


def test_the_figure_and_the_report_section_draw_every_staged_row() -> None:
    df = pd.DataFrame([row("pt", "sequential"), row("pt", "concurrent", batch_wait=50),
                       row("pt", "concurrent", workers=2, batch_wait=30), row("onnx", "sequential")])
    fig = stages.fig_stages(df)
    left = fig.axes[0]
    assert [t.get_text() for t in left.get_yticklabels()] == [
        "pt · 1 client", "pt · 16 clients", "pt · 16 clients · 2 processes", "onnx · 1 client"]
    titles = [s.title for s in step03_fastapi.sections(RunData(df, EMPTY, EMPTY))]
    assert "FastAPI: where a request spends its time" in titles
    assert step03_fastapi.sections(RunData(EMPTY, EMPTY, EMPTY)) == []


def test_the_sentence_reads_the_table_it_stands_beside_and_the_table_reads_down() -> None:
    """Issue 52 (03, cell 41): "inference +84" beside a table whose inference column fell from 95.8 to
    49.5 ms: the sentence summed batch_wait and inference under the name of one of them. It now names each
    stage it sums, with the same numbers the table shows; the table holds the stages as rows (it was 14
    columns wide), one column per measurement."""
    df = pd.DataFrame([row("onnx", "sequential", inference=95.8, batch_wait=0.5),
                       row("onnx", "concurrent", inference=49.5, batch_wait=130.8)])
    said = stages.read_stages(df)
    assert "inference +84 ms (batch_wait +130, inference -46)" in said, said
    table = stages.stage_table(df)
    assert len(table.columns) + 1 <= 9  # the row names, then one column per measurement
    assert list(table.columns) == ["onnx · 1 client", "onnx · 16 clients"]
    assert table.loc["inference (ms)"].tolist() == [95.8, 49.5]
    assert table.loc["batch_wait (ms)"].tolist() == [0.5, 130.8]
    many = pd.DataFrame([row("pt", "concurrent", workers=w) for w in range(1, 13)])
    assert len(stages.stage_table(many).columns) == stages.MEASUREMENTS
