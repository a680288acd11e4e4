"""What a notebook prints for each perf_analyzer run: once, short, copy-pasteable."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from servelab.triton.perf import perf_analyzer_argv
from servelab.triton.perf_shown import shown_command


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


def test_a_sweep_prints_its_command_once_and_then_what_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36: a warm-up line and a whole perf_analyzer line for every level were noise."""
    from servelab.triton import perf_shown as perf

    monkeypatch.setattr(perf, "_SAID", {"argv": None, "warm_up": False, "cell": None})

    def argv(c: int, window: int = 24) -> list[str]:
        return perf_analyzer_argv("food_classifier", "localhost:8000", csv_path=f"/tmp/a{c}.csv",
                                  binary="perf_analyzer", concurrency=c, measurement_request_count=window)

    assert perf.said(argv(1), warm_up=True) is not None and perf.said(argv(8), warm_up=True) is None
    assert perf.said(argv(1)).startswith("$ perf_analyzer -m food_classifier")
    assert perf.said(argv(8)) == ("$ perf_analyzer … --concurrency-range 8"
                                  "  # the rest as above, its own -f CSV")
    assert perf.said(argv(16, 32)) == ("$ perf_analyzer … --concurrency-range 16 "
                                       "--measurement-request-count 32  # the rest as above, its own -f CSV")
    other = perf_analyzer_argv("food_classifier_onnx", "localhost:8000", csv_path="/tmp/b.csv",
                               binary="perf_analyzer", concurrency=16, measurement_request_count=32)
    assert perf.said(other).startswith("$ perf_analyzer -m food_classifier_onnx")  # another model: whole


def test_each_notebook_cell_prints_its_whole_command_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """"As above" must point into the cell's own output: a re-run or the next cell says it all again."""
    import types

    from servelab.triton import perf_shown as perf

    monkeypatch.setattr(perf, "_SAID", {"argv": None, "warm_up": False, "cell": None})
    shell = types.SimpleNamespace(execution_count=7)
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    argv = perf_analyzer_argv("food_classifier", "localhost:8000", csv_path="/tmp/a.csv",
                              binary="perf_analyzer", concurrency=8)
    assert perf.said(argv, warm_up=True) and perf.said(argv).startswith("$ perf_analyzer -m")
    assert perf.said(argv, warm_up=True) is None and perf.said(argv).startswith("$ perf_analyzer …")
    shell.execution_count = 8  # the next cell, or this one run again
    assert perf.said(argv, warm_up=True) and perf.said(argv).startswith("$ perf_analyzer -m")


def test_no_machines_absolute_path_in_a_shown_command(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    from servelab.core.paths import REPO_ROOT

    run = tmp_path / "run"
    monkeypatch.setenv("SERVELAB_RESULTS", str(run))
    monkeypatch.chdir(tmp_path)
    argv = perf_analyzer_argv("food_classifier", "localhost:8000", csv_path=str(run / "perf" / "a.csv"),
                              binary="perf_analyzer", concurrency=8,
                              input_data=str(REPO_ROOT / "models_staging" / "x.json"))
    line = shown_command(argv)
    assert "-f $SERVELAB_RESULTS/perf/a.csv" in line and "--input-data models_staging/x.json" in line
    assert str(tmp_path) not in line and str(REPO_ROOT) not in line


def test_an_unsettled_levels_warning_names_the_notebooks_own_parameter() -> None:
    """Issue 36: 05's warning named rate_stability_pct, which 05 does not have."""
    import pandas as pd

    from servelab.triton.perf_csv import unsettled_message

    def level(mode: str) -> pd.DataFrame:
        return pd.DataFrame([{"model": "m", "load_mode": mode, "load_value": 8.0, "settled": False}])

    concurrency, rate = unsettled_message(level("concurrency")), unsettled_message(level("request_rate"))
    assert concurrency is not None and rate is not None
    assert "stability_pct," in concurrency and "rate_stability_pct" not in concurrency
    assert "rate_stability_pct," in rate
