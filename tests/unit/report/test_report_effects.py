"""The report's verdicts from made-up runs: counted and compared, the retried runs and skipped warm-ups
listed, laid out at a phone's width."""

from __future__ import annotations

from pathlib import Path

from servelab.lab import (
    run_report,
)
from servelab.results.schema import RunData
from tests.unit.lab.made_up_runs import fastapi_rows, sweep, write_run


def test_the_report_counts_and_compares(tmp_path: Path) -> None:
    cpu = write_run(tmp_path / "cpu", fastapi_rows(pt=(20, 200), onnx=(7, 20)),
                    sweep(p50=(20, 300), infer=(18, 20), queue_hi=250))
    gpu = write_run(tmp_path / "gpu", fastapi_rows(pt=(10, 60), onnx=(3, 30)),
                    sweep(p50=(12, 180), infer=(11, 12), queue_hi=160))
    checks = run_report.expected_effects(RunData.load(cpu))
    page = run_report.write_report(cpu, compare=gpu).read_text()
    observed = sum(c.status == "observed" for c in checks)
    assert f"{observed} of {len(checks)} expected effects observed" in page
    assert "the compared run gpu" in page
    # this run's verdict and figures, then the compared run's own, on one line
    assert ('<b class="not-observed" style="color:#a00">NOT observed</b>: FastAPI onnx: with many clients '
            "the median latency is ≥ 4× one client&#x27;s (queuing) — 1 client 7 ms, 16 clients 20 ms, 2.86× "
            "<small>(compared run: observed, 1 client 3 ms, 16 clients 30 ms, 10×)</small>") in page


def test_the_report_lists_retried_runs_and_skipped_warm_ups(tmp_path: Path) -> None:
    rows = sweep(p50=(20, 300), infer=(18, 20), queue_hi=250)
    rows[0]["retried"] = "perf_analyzer produced no measurement (exit 0)"
    rows[1]["warmup"] = "skipped: perf_analyzer ran past its timeout and was killed"
    page = run_report.write_report(write_run(tmp_path / "run", [], rows)).read_text()
    assert "What the runner recovered from" in page and "2 measurement(s)" in page
    assert "produced no measurement" in page and "skipped: perf_analyzer ran past its timeout" in page
    clean = run_report.write_report(write_run(tmp_path / "clean", [], sweep((20, 300), (18, 20), 250)))
    assert "What the runner recovered from" not in clean.read_text()


def test_the_report_lays_out_at_the_phones_width(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Without the viewport tag a phone lays report.html out at 980 px and shrinks it (finding 11)."""
    from servelab.report.html import render

    page = render(tmp_path, [])
    assert "<meta name='viewport' content='width=device-width, initial-scale=1'>" in page
