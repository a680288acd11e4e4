"""The benchmark CLI and functions, against the real ONNX service (small counts: not a timing test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from servelab.bench import format_table, run_concurrent, run_raw, run_sequential, speed_targets
from servelab.core.paths import REPO_ROOT
from servelab.results.store import append_rows, read_rows
from servelab.targets.services import Service

FIGURES = {"requests", "errors", "median_ms", "p95_ms", "p99_ms", "throughput_rps"}


def test_sequential_and_concurrent_report_the_figures(onnx_service: Service) -> None:
    sequential = run_sequential(onnx_service.url, 5, warmup=1, progress=False)
    concurrent = run_concurrent(onnx_service.url, 24, concurrency=4, warmup=1, progress=False)
    assert (sequential["requests"], concurrent["requests"]) == (5, 24)  # each its own, warm-ups not counted
    for result in (sequential, concurrent):
        assert set(result) >= FIGURES and result["errors"] == 0
        assert 0 < result["median_ms"] <= result["p95_ms"] <= result["p99_ms"]
        assert result["throughput_rps"] > 0
    assert concurrent["concurrency"] == 4
    append_rows("bench_test", [sequential, concurrent])
    assert len(read_rows("bench_test")) == 2


def test_errors_are_counted_not_timed(onnx_service: Service) -> None:
    result = run_sequential(onnx_service.url, 4, images=[b"not an image", REPO_ROOT.joinpath(
        "data", "samples", "food_00.jpg").read_bytes()], warmup=0, progress=False)
    assert result["errors"] == 2 and result["requests"] == 4


def test_cli_prints_a_table_and_writes_json(onnx_service: Service, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, "-m", "servelab.bench", "fastapi", "--url", onnx_service.url,
         "--sequential", "3", "--concurrent", "8", "--concurrency", "2", "--json", str(out)],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "p99_ms" in result.stdout and "throughput_rps" in result.stdout
    data = json.loads(out.read_text())
    assert data["sequential"]["requests"] == 3 and data["concurrent"]["requests"] == 8


def test_raw_times_both_engines() -> None:
    raw = run_raw(batch_sizes=(1, 2), min_seconds=0.05)
    whats = {(r["what"], r["batch"]) for r in raw}
    assert whats == {("preprocess", 1), ("onnxruntime", 1), ("onnxruntime", 2),
                     ("pytorch", 1), ("pytorch", 2)}
    assert all(r["ms_per_image"] > 0 and r["images_per_s"] > 0 for r in raw)


def test_speed_targets_follow_the_issue_formulas() -> None:
    raw = [{"what": "preprocess", "batch": 1, "ms_per_image": 2.0},
           {"what": "onnxruntime", "batch": 1, "ms_per_image": 5.0},
           {"what": "onnxruntime", "batch": 16, "ms_per_image": 4.0},
           {"what": "pytorch", "batch": 1, "ms_per_image": 20.0}]
    onnx = {"sequential": {"median_ms": 9.0},
            "concurrent": {"throughput_rps": 190.0, "p99_ms": 120.0, "concurrency": 16}}
    pt = {"sequential": {"median_ms": 30.0},
          "concurrent": {"throughput_rps": 44.0, "p99_ms": 500.0, "concurrency": 16}}
    targets = speed_targets(raw, onnx, pt, cores=2)
    ceiling = targets[-1]["measured"]
    assert ceiling == 200.0  # 1 / (4 ms + 2 ms / 2 cores)
    assert [round(t["bound"], 3) for t in targets[:5]] == [180.0, 126.316, 45.0, 9.1, 28.6]
    assert [t["pass"] for t in targets[:5]] == [True, True, False, True, False]
    table = format_table(targets, ("target", "measured", "bound", "pass"))
    assert table.count("PASS") == 3 and table.count("FAIL") == 2


def test_bounds_use_the_model_speed_around_the_services() -> None:
    from servelab.bench import bracket_raw

    before = [{"what": "pytorch", "batch": 1, "ms_per_image": 12.0, "images_per_s": 83.3}]
    after = [{"what": "pytorch", "batch": 1, "ms_per_image": 16.0, "images_per_s": 62.5}]
    (row,) = bracket_raw(before, after)
    assert row["ms_per_image"] == 14.0 and abs(row["images_per_s"] - 1000 / 14) < 1e-9
    assert (row["ms_before"], row["ms_after"]) == (12.0, 16.0)
