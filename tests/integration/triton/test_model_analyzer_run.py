"""A real Model Analyzer search stopped by its budget: one line that says so, and nothing left behind (its
Triton runs in a session of its own, found by its shared-memory prefix). The whole search, its rows and
its report are the headless run's (tests/lab/test_headless_run.py)."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from servelab.triton import model_analyzer as ma
from servelab.triton import model_analyzer_env
from servelab.triton.repository import deploy_model

pytestmark = pytest.mark.slow


def test_a_search_past_its_budget_stops_in_one_line_and_leaves_no_triton(tmp_path: Path) -> None:
    model_analyzer_env.ensure_installed(say=lambda _line: None)
    work = ma.Workspace.new(tmp_path)
    deploy_model("food_classifier_onnx", work.repository, gpu=False, quiet=True)
    search = ma.Search("food_classifier_onnx", 8, 500, 2, 2, window_requests=24, budget_s=12.0)
    launch = ma.Launch.local()
    ma.write_config(ma.launch_config(search, launch, work), work)
    with pytest.raises(ma.ModelAnalyzerError) as raised:
        ma.run_profile(ma.profile_argv(search, work), search, work, launch, progress=False)
    said = str(raised.value)
    assert "\n" not in said and said.startswith("Model Analyzer ran past its 12 s budget and was stopped")
    assert "model-analyzer.log" in said
    left = [p.pid for p in psutil.process_iter(["cmdline"])
            if any(launch.shm_prefix in part for part in p.info.get("cmdline") or ())]
    assert not left, f"Model Analyzer's Triton outlived it: {left}"
    assert not list(Path("/dev/shm").glob(f"{launch.shm_prefix}*"))
    assert work.log.is_file() and "Starting a local Triton Server" in work.log.read_text()
