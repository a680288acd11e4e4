"""What a notebook prints for each perf_analyzer run: once, short, copy-pasteable."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.triton.perf import perf_analyzer_argv, shown_command


def test_the_command_uses_paths_relative_to_the_checkout(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "results" / "run" / "perf-inputs" / "x.json"
    argv = perf_analyzer_argv("food_classifier", "localhost:8000", csv_path="/tmp/perf-1/a.csv",
                              binary="/opt/venv/bin/perf_analyzer", concurrency=8, input_data=str(data))
    line = shown_command(argv)
    assert line.startswith("$ perf_analyzer -m food_classifier -u localhost:8000 ")
    assert " --input-data results/run/perf-inputs/x.json " in line and str(tmp_path) not in line
    assert "/opt/venv" not in line and "-f /tmp/perf-1/a.csv" in line  # outside the checkout: kept whole


def test_a_warm_up_is_one_short_line() -> None:
    argv = perf_analyzer_argv("food_classifier", "localhost:8000", csv_path="/tmp/a.csv",
                              binary="perf_analyzer", concurrency=8, request_count=16)
    line = shown_command(argv, warm_up=True)
    assert line == "# warm-up first, not recorded: the same command with -b 1 --concurrency-range 8 " \
                   "--request-count 16"


def test_a_count_window_warm_up_says_its_window() -> None:
    argv = perf_analyzer_argv("food_classifier", "localhost:8000", csv_path="/tmp/a.csv",
                              binary="perf_analyzer", concurrency=16, measurement_request_count=32,
                              max_trials=1)
    assert shown_command(argv, warm_up=True) == ("# warm-up first, not recorded: the same command with -b 1 "
                                                 "--concurrency-range 16 --measurement-mode count_windows "
                                                 "--measurement-request-count 32 --max-trials 1")
