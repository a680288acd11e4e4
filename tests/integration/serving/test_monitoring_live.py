"""The monitoring cell of notebook 03 against the real ONNX service: its /metrics scraped during a load."""

from __future__ import annotations

import math

from servelab.lab import monitoring
from servelab.lab.params import resolve
from servelab.lab.stack import Endpoint
from servelab.targets.services import Service


def test_series_show_the_load_with_a_positive_latency(onnx_service: Service) -> None:
    p = resolve("local", "quick", conc_requests=40, concurrency=4)
    mon = monitoring.monitor_fastapi(Endpoint("fastapi_onnx", onnx_service.url), p, interval_s=0.25)
    df, load = mon.frame, mon.load
    assert list(df.columns) == monitoring.COLUMNS
    # a scrape may time out on a loaded machine (the next interval then spans it); nothing else may fail
    assert (df["error"].eq("") | df["error"].str.contains("timed out")).all(), df[df["error"] != ""]
    df = df[df["error"] == ""]
    busy = df[df["requests_per_s"] > 0]
    assert len(busy) >= 2, df  # the load spans several intervals
    # every /predict the bench sent (its warm-up too) is in the series, none twice
    seen = (df["requests_per_s"] * df["interval_s"]).sum()
    assert math.isclose(seen, load["requests"] + 16, abs_tol=0.5), (seen, load)
    assert (busy["latency_ms"] > 0).all() and busy["latency_ms"].max() < 10_000
    assert (busy["batch_size"] >= 1).all() and (df["in_flight"] >= 0).all()
    assert df["in_flight"].max() >= 1  # the clients were seen waiting
    assert df["t_s"].is_monotonic_increasing and df["t_s"].iloc[-1] > df["t_s"].iloc[0]
    assert "fastapi_onnx" in mon.reading and "req/s" in mon.reading
    assert "<img" in mon._repr_html_()


def test_show_metrics_prints_the_raw_lines(onnx_service: Service, capsys) -> None:
    lines = monitoring.show_metrics(f"{onnx_service.url}/metrics", ["http_request_duration_seconds"],
                                    contains='path="/predict"')
    assert "# TYPE http_request_duration_seconds histogram" in lines
    assert any(line.startswith('http_request_duration_seconds_count{path="/predict"}') for line in lines)
    assert not any("_bucket" in line or "/health" in line for line in lines)
    assert "$ curl" in capsys.readouterr().out
