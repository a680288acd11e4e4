"""What a notebook shows of a measurement table: at most nine columns, every column still in the frame;
the thread count each instance runs with, as a number, by one rule for both Triton runners."""

from __future__ import annotations

import pandas as pd

from servelab.lab.tables import Measured, concat, show_columns
from servelab.results.schema import FASTAPI_COLUMNS, TRITON_COLUMNS
from servelab.triton.instances import instance_threads


def triton_rows(label: str, threads: int) -> pd.DataFrame:
    row = {c: 1.0 for c in TRITON_COLUMNS}
    row.update(step="s", model="m", label=label, threads=threads, batch_counts="{}", settled=True,
               gpu_util_pct=None)  # a CPU run: the machine's CPU and the server's share of it
    return pd.DataFrame([row])


def test_a_triton_table_shows_nine_columns_and_keeps_all() -> None:
    table = concat(show_columns(triton_rows("one", 1), TRITON_COLUMNS),
                   show_columns(triton_rows("two", 2), TRITON_COLUMNS))
    assert isinstance(table, Measured) and list(table.columns) == TRITON_COLUMNS
    html = table._repr_html_() or ""
    assert html.count("<th>") <= 9 and "threads" in html and "more columns" in html
    assert "<th>CPU %</th>" in html and "<th>server CPU %</th>" in html
    assert "compute_output_ms" not in repr(table) and "p99 (ms)" in repr(table)
    assert isinstance(table[table["threads"] > 1], Measured)  # a selection keeps the short display
    assert "dynamic_batching" in table.columns  # the data is all there


def test_a_fastapi_table_shows_max_batch_when_the_services_differ() -> None:
    rows = pd.DataFrame([{"backend": "pt", "device": "cpu", "max_batch": 2, "mode": "sequential",
                          "concurrency": 1, "requests": 10, "errors": 0, "median_ms": 30.0, "p95_ms": 31.0,
                          "p99_ms": 32.0, "throughput_rps": 30.0, "cpu_util_pct": 50.0, "gpu_util_pct": None},
                         {"backend": "onnx", "device": "cpu", "max_batch": 1, "mode": "sequential",
                          "concurrency": 1, "requests": 10, "errors": 0, "median_ms": 20.0, "p95_ms": 21.0,
                          "p99_ms": 22.0, "throughput_rps": 45.0, "cpu_util_pct": 50.0,
                          "gpu_util_pct": None}])
    html = show_columns(rows, FASTAPI_COLUMNS)._repr_html_() or ""
    assert html.count("<th>") <= 8 and "max batch" in html.lower()


def test_one_thread_rule_for_both_runners() -> None:
    """2 cores: the Python backend's auto rule leaves one core free and splits the rest; Triton's
    onnxruntime backend takes intra_op_thread_count, and its own default (every core) without it."""
    assert instance_threads("python", {"CPU_THREADS": "auto"}, 1, False, 2) == 1
    assert instance_threads("python", {"CPU_THREADS": "default"}, 2, False, 2) == 2
    assert instance_threads("python", {}, 1, False, 8) == 7  # the local ONNX runner has no parameter
    assert instance_threads("onnxruntime", {"intra_op_thread_count": "3"}, 1, False, 8) == 3
    assert instance_threads("onnxruntime", {}, 1, False, 8) == 8
    assert instance_threads("onnxruntime", {}, 1, True, 8) is None  # on a GPU: not the comparison's change
    assert instance_threads("python", {"CPU_THREADS": "auto"}, 2, True, 8) is None


def test_the_onnxruntime_backend_on_a_cpu_follows_the_same_rule(tmp_path, monkeypatch) -> None:
    """Deployed to a CPU host whose Triton has the onnxruntime backend (docker without a GPU), the ONNX
    model gets intra_op_thread_count by the CPU_THREADS=auto rule instead of every core."""
    import shutil

    from servelab.core.paths import REPO_ROOT
    from servelab.triton.config import read_config
    from servelab.triton.repository import deploy_model

    staged = tmp_path / "staging" / "food_classifier_onnx"
    (staged / "1").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "models_staging/food_classifier_onnx/config.pbtxt", staged)
    (staged / "1" / "model.onnx").write_bytes(b"onnx")
    monkeypatch.setattr("servelab.core.cpu.cpu_cores", lambda: 4)
    folder = deploy_model("food_classifier_onnx", tmp_path / "models", gpu=False,
                          staging_dir=tmp_path / "staging", onnx_backend=True, quiet=True)
    cfg = read_config(folder)
    assert cfg.backend == "onnxruntime" and cfg.parameters["intra_op_thread_count"].string_value == "3"


def test_a_frame_derived_with_other_columns_is_shown_whole() -> None:
    """Asking for columns (or reshaping) shows what was asked for, never the short view's choice."""
    table = concat(show_columns(triton_rows("one", 1), TRITON_COLUMNS),
                   show_columns(triton_rows("two", 2), TRITON_COLUMNS))
    asked = table[["label", "batch_counts"]]
    assert "batch_counts" in repr(asked) and "batch_counts" in (asked._repr_html_() or "")
    plain = repr(table.set_index("label"))
    assert f"{len(TRITON_COLUMNS) - 1} columns" in plain  # the plain frame, not the short view
    assert "p99 (ms)" in repr(table[table["threads"] > 1])  # a row selection keeps the short view


def test_the_stubs_a_config_asks_for_count_each_listed_gpu() -> None:
    from servelab.lab.triton_views import expected_stubs
    from servelab.triton.config import parse_config, set_instance_groups

    cfg = parse_config('name: "m"\nbackend: "python"\n')
    assert expected_stubs(set_instance_groups(cfg, [(2, "KIND_GPU", [0, 1])])) == 4
    assert expected_stubs(set_instance_groups(cfg, [(3, "KIND_CPU", [])])) == 3
    assert expected_stubs(set_instance_groups(cfg, [(1, "KIND_GPU", [0]), (2, "KIND_CPU", [])])) == 3
    assert expected_stubs(set_instance_groups(cfg, [(2, "KIND_GPU", [])])) is None


def test_a_figure_is_rounded_once_the_same_in_the_notebook_and_the_report() -> None:
    """28.6549 read 28.6 in a notebook's table (rounded to 2 decimals, then shown to 1: 28.65 → 28.6) and
    28.7 in the report and the verdict; a table now rounds the row's full value once."""
    from servelab.report.effects import amount
    from servelab.report.figures import table_html

    rows = pd.DataFrame([{"backend": "onnx", "device": "cpu", "max_batch": 1, "mode": "sequential",
                          "concurrency": 1, "requests": 20, "errors": 0, "median_ms": 28.6549,
                          "p95_ms": None, "p99_ms": 30.0, "throughput_rps": 34.9, "cpu_util_pct": 50.0}])
    shown = show_columns(rows, FASTAPI_COLUMNS)
    assert "28.7" in repr(shown) and "28.7" in (shown._repr_html_() or "")
    assert "28.7" in table_html(rows, FASTAPI_COLUMNS) and amount(28.6549) == "28.7"
    assert "throughput (requests/s)" in repr(shown) and "None" not in repr(shown)
    assert shown["median_ms"].iloc[0] == 28.6549  # the frame keeps the full value
