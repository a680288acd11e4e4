"""Notebook 07's expected effects on made-up rows: arrivals and dynamic batching, a gap inside the
spread, a level without its warm-up, the low-rate cost split into queue and compute, a band from an
any-spread preset, and the metrics port agreeing with the statistics."""

from __future__ import annotations

import pandas as pd

from servelab.lab import (
    step07_dynamic_batching,
)
from servelab.results.schema import RunData
from tests.unit.lab.made_up_runs import EMPTY, batching, data, one, status, triton_run


def test_batching_rules() -> None:
    checks = step07_dynamic_batching.rules(data(triton=batching(10, 40, 120, 90, {1: 50, 3: 10})))
    assert status(checks, "Poisson arrivals queue more") == "observed"
    assert status(checks, "some executions carry more than one") == "observed"
    assert status(checks, "At the lowest rate, dynamic batching costs latency") == "observed"  # 20 → 30 ms
    assert status(checks, "p99 with dynamic batching ≤") == "observed"
    none = step07_dynamic_batching.rules(data(triton=batching(40, 10, 90, 120, {1: 60}, low=(30, 20))))
    assert [c.status for c in none] == ["not observed"] * 4
    assert {c.status for c in step07_dynamic_batching.rules(data())} == {"cannot show here"}


def test_a_gap_inside_the_spread_is_within_noise() -> None:
    """Windows 50 % apart cannot tell 10 ms from 40 ms... (band 0.5 × 40 = 20 < 30: still observed);
    but they cannot tell 90 ms from 120 ms (band 60 ≥ 30): neither observed nor not observed."""
    checks = step07_dynamic_batching.rules(data(triton=batching(10, 40, 120, 90, {1: 50, 3: 10}, spread=0.5)))
    assert status(checks, "Poisson arrivals queue more") == "observed"
    assert status(checks, "p99 with dynamic batching ≤") == "too noisy to call"
    assert status(checks, "some executions carry more than one") == "observed"  # a count, no spread
    [lowest] = [c for c in checks if "lowest rate" in c.effect]
    assert lowest.status == "too noisy to call" and lowest.band is not None and lowest.band.value == 15
    assert "noise band: 15 ms" in "\n".join(lowest.details())


def test_a_level_measured_without_its_warm_up_is_never_counted() -> None:
    """A skipped warm-up leaves a row that is shown (marked) but that no rule may count as observed."""
    from servelab.report.figures import short_view
    from servelab.results.schema import TRITON_COLUMNS

    rows = batching(10, 40, 120, 90, {1: 50, 3: 10})
    rows[1]["warmup"] = "skipped: perf_analyzer ran past its 60 s timeout and was killed"
    checks = step07_dynamic_batching.rules(data(triton=rows))
    assert status(checks, "Poisson arrivals queue more") == "cannot show here"
    shown = short_view(pd.DataFrame([{**r, "label": r.get("distribution", "x")}
                                     for r in rows]), TRITON_COLUMNS)
    assert shown is not None and "poisson (no warm-up)" in shown.iloc[:, 0].tolist()


def test_the_low_rate_cost_of_batching_is_split_into_queue_and_compute() -> None:
    """07's low-rate p99 rose while its queue fell: the evidence must show the compute that rose."""
    rows = [{"step": "dynamic_batching", "dynamic_batching": on, "rate": rate, "p99_ms": p99, "queue_ms": q,
             "compute_infer_ms": c}
            for on, rate, p99, q, c in ((False, 30.0, 82.9, 15.5, 15.0), (True, 30.0, 110.1, 9.1, 25.8),
                                        (False, 90.0, 300.0, 200.0, 15.0), (True, 90.0, 250.0, 60.0, 80.0))]
    verdict = one(step07_dynamic_batching.rules(triton_run(rows)), "lowest rate")
    assert verdict.evidence == ("at 30/s: off 82.9 ms (queue 15.5 + compute 15.0 ms), on 110.1 ms "
                                "(queue 9.1 + compute 25.8 ms) (+33%)")


def test_a_band_from_an_any_spread_preset_cannot_clear_a_difference() -> None:
    """Issue 41 (07): "too noisy to call" hid a 44 % rise of p99 (142.9 → 205.9 ms) behind a band of 85 ms
    that came from windows the quick preset accepted at any spread (rate_stability_pct 1000). Such a band
    cannot clear a difference: issue 52 calls it too noisy to call (it was measured), with what would settle
    it: a real criterion. A gap wider than the band keeps its verdict."""
    def run(stability: int, on_p99: float = 205.9) -> RunData:
        rows = [{"step": "dynamic_batching", "rate": r, "dynamic_batching": on, "p99_ms": p,
                 "latency_spread": s, "stability_pct": stability, "settled": True}
                for r in (50.0, 100.0) for on, p, s in ((False, 142.9, 0.1), (True, on_p99, 85 / on_p99))]
        return RunData(EMPTY, EMPTY, pd.DataFrame(rows))

    [top] = [c for c in step07_dynamic_batching.rules(run(1000)) if "highest rate" in c.effect]
    # issue 52: measured, so never "not measured": too noisy to call, and what would settle it
    assert top.status == "too noisy to call" and top.band is not None and round(top.band.value) == 85
    assert top.settle.startswith("perf_analyzer accepted this level's windows at any spread (stability "
                                 "criterion 1000 %")
    assert "rerun with rate_stability_pct = 30" in top.settle
    assert top.evidence.startswith("at 100/s: off 142.9 ms, on 205.9 ms (+44%)")
    [settled] = [c for c in step07_dynamic_batching.rules(run(30)) if "highest rate" in c.effect]
    assert settled.status == "too noisy to call" and "rate_stability_pct" not in settled.settle
    [wide] = [c for c in step07_dynamic_batching.rules(run(1000, on_p99=400.0)) if "highest rate" in c.effect]
    assert wide.status == "not observed" and not wide.settle


def test_the_metrics_port_and_the_statistics_agree_from_one_origin(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """Issue 41 (07): the metrics showed nv_inference_count 3939 where the statistics read 1,303 after the
    reload. The metrics port counts from the server's start, the statistics from the model's load: read
    at the reload and now, the two agree, and the line says why they differ otherwise."""
    from types import SimpleNamespace

    from servelab.lab import monitoring, triton_stats

    pages = iter(['nv_inference_count{model="m",version="1"} 2636\n'
                  'nv_inference_exec_count{model="m",version="1"} 2636\n',
                  'nv_inference_count{model="m",version="1"} 3939\n'
                  'nv_inference_exec_count{model="m",version="1"} 2888\n'])
    monkeypatch.setattr(monitoring, "scrape_once", lambda url, timeout_s=2.0: next(pages))
    monkeypatch.setattr(triton_stats, "stats_json", lambda triton, name: {"inference_count": 1303,
                                                                          "execution_count": 252})
    triton = SimpleNamespace(metrics_url="http://127.0.0.1:8002/metrics")
    before = step07_dynamic_batching.metrics_counts(triton, "m")
    step07_dynamic_batching.counts_since(triton, "m", before)
    out = capsys.readouterr().out
    assert "nv_inference_count 2636, nv_inference_exec_count 2636" in out
    assert ("the metrics port counted 3939 − 2636 = 1303 inferences in 252 executions, the statistics 1303 "
            "in 252: the same count from the same origin") in out
