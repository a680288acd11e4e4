"""The monitoring cell of notebooks 04/07 against the real local Triton: its metrics port scraped while
perf_analyzer runs."""

from __future__ import annotations

import math
from typing import Any

from servelab.lab import monitoring
from servelab.lab.params import resolve
from servelab.lab.triton_steps import Triton
from servelab.targets.local import LocalStack

MODEL = "food_classifier_onnx"


def local_stack(server: Any) -> LocalStack:
    """A LocalStack holding the session's server, as its ``up("triton")`` keeps one (nothing started)."""
    stack = LocalStack()
    stack._services["triton_server"] = server
    return stack


def test_series_show_inferences_queue_and_compute(triton, capsys) -> None:
    p = resolve("local", "quick", window_requests=8)
    mon = monitoring.monitor_triton(Triton(local_stack(triton), triton.url), MODEL, p, concurrency=4,
                                    interval_s=0.25)
    df = mon.frame
    assert "$ perf_analyzer -m food_classifier_onnx" in capsys.readouterr().out
    # a scrape may time out on a loaded machine (the next interval then spans it); nothing else may fail
    assert (df["error"].eq("") | df["error"].str.contains("timed out")).all(), df[df["error"] != ""]
    df = df[df["error"] == ""]
    assert set(df["model"]) == {MODEL}
    busy = df[df["requests_per_s"] > 0]
    # how many intervals the load spans depends on the machine's speed (a quiet one served all 32
    # requests within one 0.25 s interval): the count below is what must hold in every case
    assert len(busy) >= 1, df
    requests = int(mon.load.argv[mon.load.argv.index("--request-count") + 1])
    assert requests == 32
    seen = (df["requests_per_s"] * df["interval_s"]).sum()
    assert math.isclose(seen, requests, abs_tol=0.5), (seen, df)  # perf_analyzer's, none missed or twice
    assert (busy["latency_ms"] > 0).all() and (busy["compute_ms"] > 0).all() and (busy["queue_ms"] >= 0).all()
    assert (busy["latency_ms"] >= busy["compute_ms"]).all()
    assert (busy["batch_size"] >= 1).all() and (df["pending"] >= 0).all()
    assert MODEL in mon.reading


def test_show_metrics_prints_triton_lines(triton) -> None:
    lines = monitoring.show_metrics(triton.metrics_url, ["nv_inference_queue_duration_us"], contains=MODEL)
    assert "# TYPE nv_inference_queue_duration_us counter" in lines
    assert any(line.startswith(f'nv_inference_queue_duration_us{{model="{MODEL}"') for line in lines)


def test_an_expected_rate_sizes_the_load_to_last_several_scrapes(triton, capsys) -> None:
    """Given the rate it will see, the load is about LOAD_SECONDS long, so a fast machine still gets
    several intervals (without it, 32 requests fitted in one 0.25 s interval)."""
    p = resolve("local", "quick", window_requests=8)
    rate = 40.0
    mon = monitoring.monitor_triton(Triton(local_stack(triton), triton.url), MODEL, p, concurrency=4,
                                    interval_s=0.25, expected_rate=rate)
    requests = int(mon.load.argv[mon.load.argv.index("--request-count") + 1])
    assert requests == math.ceil(rate * monitoring.LOAD_SECONDS)
    df = mon.frame[mon.frame["error"] == ""]
    assert math.isclose((df["requests_per_s"] * df["interval_s"]).sum(), requests, abs_tol=0.5)
    assert "$ perf_analyzer" in capsys.readouterr().out
