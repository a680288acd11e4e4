"""Issue 52's rules, each on the numbers the issue read (a fresh quick run at 0f654ec, 2-core CPU): a band on
medians that one slow third cannot set, a measured result never counted "not measured", each legend and
reason printed once per notebook. Each test fails on the code of 0f654ec."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from servelab.bench.client import summarise
from servelab.lab import step03_fastapi, step07_dynamic_batching, step09_llm_serving
from servelab.lab import step10_report as step10
from servelab.report import html
from servelab.results.schema import RunData

EMPTY = pd.DataFrame()


def sequential(backend: str, latencies_ms: list[float]) -> dict:
    """A FastAPI benchmark's row as the client summarises it (``servelab.bench.client.summarise``)."""
    return {"backend": backend, "mode": "sequential", "concurrency": 1, "device": "cpu",
            **summarise([ms / 1000 for ms in latencies_ms], wall_s=10.0)}


def test_medians_four_times_apart_with_one_slow_third_are_not_within_noise() -> None:
    """03, cell 52: PyTorch 35 ms and ONNX 9 ms (medians, "4.0× faster" two cells above) read "within
    noise": PyTorch's last third was slow (its p99 504 ms) and widened the median's band to 41.7 ms."""
    rng = np.random.default_rng(52)
    pt = [*(35 + rng.normal(0, 1, 27)), *(300 + rng.normal(0, 60, 13))]  # the last third slow
    onnx = list(9 + rng.normal(0, 0.3, 40))
    fastapi = pd.DataFrame([sequential("pt", pt), sequential("onnx", onnx)])
    [faster] = [c for c in step03_fastapi.rules(RunData(fastapi, EMPTY, EMPTY))
                if "ONNX Runtime answers one client faster" in c.effect]
    assert faster.status == "observed", faster
    assert fastapi.loc[0, "median_ms"] == pytest.approx(36, abs=2)  # the median itself barely moved


def test_a_measured_result_is_never_counted_not_measured() -> None:
    """07, cell 27: a p99 measured and printed beside its verdict (+68 %) read "not measured" because its
    band came from windows accepted at any spread; 09, cell 29: "static overtook continuous", measured,
    read "not measured" too. The report counted both with the unmeasured."""
    rows = [{"step": "dynamic_batching", "rate": r, "dynamic_batching": on, "p99_ms": p, "latency_spread": s,
             "stability_pct": 1000, "settled": True}
            for r in (50.0, 100.0) for on, p, s in ((False, 142.9, 0.1), (True, 240.0, 0.6))]
    top = next(c for c in step07_dynamic_batching.rules(RunData(EMPTY, EMPTY, pd.DataFrame(rows)))
               if "highest rate" in c.effect)
    assert top.status == "too noisy to call", top
    assert "rate_stability_pct = 30" in top.settle  # what would settle it, from the run
    load = [{"step": step, "batching": batching, "rate": 4.0, "output_tokens_s": tokens, "ttft_p99_ms": 100.0,
             "max_running": 8, "max_waiting": 0}
            for step, batching, tokens in (("mixed", "continuous", 100.0), ("mixed", "static", 118.0),
                                           ("equal", "continuous", 100.0), ("equal", "static", 140.0))]
    closes = next(c for c in step09_llm_serving.rules(RunData(EMPTY, EMPTY, EMPTY, pd.DataFrame(load)))
                  if "equal output lengths" in c.effect)
    assert closes.status == "observed", closes
    summary = html.effects_summary([top, closes])
    assert "not measured" not in summary and "1 too noisy to call" in summary


def _issue_run(folder: Path) -> Path:
    """Notebook 10's step loads as issue 52 read them: two fixed replicas beat one (220 against 396 in
    flight), the autoscaled runs did not, the CPU at 100 % while their replicas started."""
    from tests.unit.lab.made_up_runs import step_load_run

    data = step_load_run(cpu=100.0)
    folder.mkdir()
    for name, frame in (("scaling", data.scaling), ("scaling_series", data.scaling_series)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in frame.to_dict("records")))
    return folder


def test_a_notebook_prints_each_legend_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The 400-character reason under 10's verdicts was printed 8 times, the band's legend under every
    notebook's verdicts: in one notebook (one process here) no explanatory line is printed twice."""
    import contextlib
    import importlib

    from servelab.lab import common
    from servelab.report import terms

    terms.forget()  # a fresh notebook: nothing said yet (the verdicts' memory too, where there is one)
    with contextlib.suppress(ModuleNotFoundError):
        importlib.import_module("servelab.report.verdicts").forget()
    monkeypatch.setenv("SERVELAB_RESULTS", str(_issue_run(tmp_path / "run")))
    printed = []
    for effects in (("starts a replica within", "the backlog grows more slowly", "Autoscaled on queue depth"),
                    ("CPU utilisation",), ("replica-seconds",)):  # 10's cells
        common.what_this_run_shows(step10, *effects)
        printed += capsys.readouterr().out.splitlines()
    long = [line.strip() for line in printed if len(line.strip()) >= 100]
    repeated = {line for line in long if long.count(line) > 1}
    assert not repeated, repeated
    assert sum("noise band: how far" in line for line in printed) == 1  # the band's legend, once
