"""The expected-effect rules as pure functions on small hand-made tables: each rule observed, not
observed and not measured; the report's effects table and ``--compare`` built from them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from servelab.lab import (
    run_report,
    step03_fastapi,
    step04_triton_python,
    step05_instance_scaling,
    step06_onnx_backend,
    step07_dynamic_batching,
)
from servelab.report.effects import Check
from servelab.results.schema import RunData

EMPTY = pd.DataFrame()


def data(fastapi: list[dict] | None = None, triton: list[dict] | None = None) -> RunData:
    return RunData(pd.DataFrame(fastapi or []), EMPTY, pd.DataFrame(triton or []))


def status(checks: list[Check], words: str) -> str:
    """The status of the one check whose effect mentions ``words``."""
    [found] = [c for c in checks if words in c.effect]
    return found.status


def fastapi_rows(pt: tuple[float, float], onnx: tuple[float, float]) -> list[dict]:
    return [{"backend": b, "mode": m, "median_ms": v, "concurrency": 16 if m == "concurrent" else 1}
            for b, (seq, conc) in (("pt", pt), ("onnx", onnx))
            for m, v in (("sequential", seq), ("concurrent", conc))]


# ----------------------------------------------------------------------------- 03 FastAPI
def test_fastapi_queuing_and_onnx_faster() -> None:
    checks = step03_fastapi.rules(data(fastapi_rows(pt=(20, 200), onnx=(7, 20))))
    assert status(checks, "FastAPI pt: with many clients") == "observed"  # 10× ≥ 4×
    assert status(checks, "FastAPI onnx: with many clients") == "not observed"  # 2.9× < 4×
    assert status(checks, "ONNX Runtime answers one client faster") == "observed"
    slower = step03_fastapi.rules(data(fastapi_rows(pt=(7, 200), onnx=(20, 200))))
    assert status(slower, "ONNX Runtime answers one client faster") == "not observed"
    assert {c.status for c in step03_fastapi.rules(data())} == {"cannot show here"}


def test_a_rule_names_its_numbers() -> None:
    pt, _, faster = step03_fastapi.rules(data(fastapi_rows(pt=(20, 200), onnx=(7, 20))))[:3]
    assert pt.evidence == "20 ms → 200 ms (10.0×)"
    assert faster.evidence == "PyTorch 20 ms, ONNX 7 ms (medians)"
    # the verdict's own figures, each with its unit, as its one line shows them
    assert [str(q) for q in pt.figures] == ["1 client 20 ms", "16 clients 200 ms", "10×"]
    assert faster.line() == ("observed: FastAPI: ONNX Runtime answers one client faster than PyTorch — "
                             "PyTorch 20 ms, ONNX Runtime 7 ms")


# ----------------------------------------------------------------------------- 04 Python backend
def sweep(p50: tuple[float, float], infer: tuple[float, float], queue_hi: float,
          step: str = "python_concurrency") -> list[dict]:
    return [{"step": step, "concurrency": c, "p50_ms": p, "compute_infer_ms": i, "queue_ms": q,
             "throughput": 50.0, "model": "food_classifier"}
            for c, p, i, q in ((1, p50[0], infer[0], 0.5), (16, p50[1], infer[1], queue_hi))]


def test_python_backend_queuing_rules() -> None:
    queued = step04_triton_python.rules(data(triton=sweep(p50=(20, 300), infer=(18, 20), queue_hi=250)))
    assert status(queued, "latency at concurrency 16 > 4×") == "observed"
    assert status(queued, "compute time stays flat") == "observed"
    assert status(queued, "queue time exceeds compute") == "observed"
    assert status(queued, "Client batch 16") == "cannot show here"  # no client-batch rows
    flat = step04_triton_python.rules(data(triton=sweep(p50=(20, 30), infer=(18, 60), queue_hi=5)))
    assert {c.status for c in flat if "Client batch" not in c.effect} == {"not observed"}
    assert {c.status for c in step04_triton_python.rules(data())} == {"cannot show here"}


def test_client_batch_is_a_gpu_effect() -> None:
    rows = [*sweep(p50=(20, 300), infer=(18, 20), queue_hi=250),
            {"step": "python_client_batch", "concurrency": 1, "batch": 16, "throughput": 160.0}]
    [batch] = [c for c in step04_triton_python.rules(data(triton=rows)) if "Client batch" in c.effect]
    assert batch.gpu_only and batch.status == "observed"  # 160 ≥ 1.5 × 50


# ----------------------------------------------------------------------------- 05 instances
def scaling(throughputs: list[float], threads: tuple[float, float] | None = None) -> list[dict]:
    rows = [{"step": "instance_scaling", "label": f"{i} instances", "throughput": t, "p50_ms": 10,
             "p99_ms": 20} for i, t in enumerate(throughputs, 1)]
    if threads:
        rows += [{"step": "threads_lesson", "thread_setting": name, "throughput": t}
                 for name, t in zip(("default", "split"), threads, strict=True)]
    return rows


def test_instance_rules() -> None:
    checks = step05_instance_scaling.rules(data(triton=scaling([50, 90, 92], threads=(5, 60))))
    assert status(checks, "More instances raise throughput") == "observed"
    assert status(checks, "largest instance count is no better") == "observed"  # 92 ≤ 1.05 × 90
    assert status(checks, "one thread each beats") == "observed"
    worse = step05_instance_scaling.rules(data(triton=scaling([50, 52, 150], threads=(60, 5))))
    assert status(worse, "More instances raise throughput") == "observed"
    assert status(worse, "largest instance count is no better") == "not observed"
    assert status(worse, "one thread each beats") == "not observed"
    none = step05_instance_scaling.rules(data())
    assert [c.status for c in none] == ["cannot show here"] * 3  # every check listed, whatever is missing


def test_instance_rules_never_count_a_level_without_its_warm_up() -> None:
    """The 1-instance level measured cold: the comparison with it is not measured (never 2 vs 2); the
    largest-vs-middle check stays in the list."""
    rows = scaling([50, 90, 92], threads=(5, 60))
    rows[0]["warmup"] = "skipped: perf_analyzer ran past its 60 s timeout"
    checks = step05_instance_scaling.rules(data(triton=rows))
    assert status(checks, "More instances raise throughput") == "cannot show here"
    assert status(checks, "largest instance count is no better") == "observed"
    rows[1]["warmup"] = "skipped: timeout"
    checks = step05_instance_scaling.rules(data(triton=rows))
    assert len(checks) == 3 and status(checks, "largest instance count is no better") == "cannot show here"


# ----------------------------------------------------------------------------- 06 ONNX backend
def test_onnx_backend_rules() -> None:
    rows = [{"step": "python_vs_onnx", "model": "food_classifier", "concurrency": 8, "compute_infer_ms": 20,
             "throughput": 50},
            {"step": "onnx_backend", "model": "food_classifier_onnx", "concurrency": 8, "compute_infer_ms": 5,
             "throughput": 150},
            {"step": "onnx_scaling", "model": "food_classifier_onnx", "concurrency": 8, "compute_infer_ms": 5,
             "throughput": 280}]
    checks = step06_onnx_backend.rules(data(triton=rows))
    assert status(checks, "inference time is lower") == "observed"
    assert status(checks, "two instances serve more") == "observed"
    rows[2]["throughput"] = 150
    assert status(step06_onnx_backend.rules(data(triton=rows)), "two instances serve more") == "not observed"
    assert {c.status for c in step06_onnx_backend.rules(data())} == {"cannot show here"}


# ----------------------------------------------------------------------------- 07 dynamic batching
def batching(constant: float, poisson: float, off: float, on: float, counts: dict[int, int],
             low: tuple[float, float] = (20, 30), spread: float | None = None) -> list[dict]:
    """Arrivals at rate 30, then batching off/on at rates 20 (p99 ``low``) and 60 (p99 ``off``/``on``)."""
    noise = {"latency_spread": spread}
    return [{"step": "arrivals", "distribution": "constant", "p99_ms": constant, "rate": 30, **noise},
            {"step": "arrivals", "distribution": "poisson", "p99_ms": poisson, "rate": 30, **noise},
            {"step": "dynamic_batching", "dynamic_batching": False, "rate": 20, "p99_ms": low[0], **noise},
            {"step": "dynamic_batching", "dynamic_batching": False, "rate": 60, "p99_ms": off,
             "batch_counts": json.dumps({"1": 100}), **noise},
            {"step": "dynamic_batching", "dynamic_batching": True, "rate": 20, "p99_ms": low[1], **noise},
            {"step": "dynamic_batching", "dynamic_batching": True, "rate": 60, "p99_ms": on,
             "batch_counts": json.dumps({str(k): v for k, v in counts.items()}), **noise}]


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


def test_noise_band_and_relative_spread() -> None:
    from servelab.report.effects import check, noise_band, relative_spread

    assert relative_spread([90, 100, 110]) == 0.2 and relative_spread([5]) is None
    assert relative_spread([1, None, float("nan")]) is None
    assert noise_band(100, 50, 0.1, 0.4) == 20.0 and noise_band(100, 50, None, None) is None
    same = check("x", (100.0, 104.0), lambda a, b: b > a, lambda a, b: f"{a} {b}", noise=(0.05, None))
    apart = check("x", (100.0, 106.0), lambda a, b: b > a, lambda a, b: f"{a} {b}", noise=(0.05, None))
    unknown = check("x", (100.0, 101.0), lambda a, b: b > a, lambda a, b: f"{a} {b}", noise=(None, None))
    assert (same.status, apart.status, unknown.status) == ("too noisy to call", "observed", "observed")


# ----------------------------------------------------------------------------- the report's table
def write_run(folder: Path, fastapi: list[dict], triton: list[dict]) -> Path:
    folder.mkdir(parents=True)
    for name, rows in (("fastapi", fastapi), ("triton", triton)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


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


@pytest.mark.parametrize("step", run_report.STEPS)
def test_every_step_draws_nothing_from_an_empty_run(step) -> None:
    assert step.sections(data()) == []
    assert all(c.status == "cannot show here" for c in step.rules(data()))


def test_the_report_lists_retried_runs_and_skipped_warm_ups(tmp_path: Path) -> None:
    rows = sweep(p50=(20, 300), infer=(18, 20), queue_hi=250)
    rows[0]["retried"] = "perf_analyzer produced no measurement (exit 0)"
    rows[1]["warmup"] = "skipped: perf_analyzer ran past its timeout and was killed"
    page = run_report.write_report(write_run(tmp_path / "run", [], rows)).read_text()
    assert "What the runner recovered from" in page and "2 measurement(s)" in page
    assert "produced no measurement" in page and "skipped: perf_analyzer ran past its timeout" in page
    clean = run_report.write_report(write_run(tmp_path / "clean", [], sweep((20, 300), (18, 20), 250)))
    assert "What the runner recovered from" not in clean.read_text()


def test_what_this_run_shows_reads_this_runs_data(tmp_path: Path, monkeypatch, capsys) -> None:
    from servelab.lab import common

    run = write_run(tmp_path / "run", fastapi_rows(pt=(20, 200), onnx=(7, 20)), [])
    monkeypatch.setenv("SERVELAB_RESULTS", str(run))
    from servelab.report import verdicts

    verdicts.forget()
    lines = common.what_this_run_shows(step03_fastapi, "FastAPI onnx", "ONNX Runtime answers").lines()
    assert lines == [
        "NOT observed: FastAPI onnx: with many clients the median latency is ≥ 4× one client's "
        "(queuing) — 1 client 7 ms, 16 clients 20 ms, 2.86×",
        "observed: FastAPI: ONNX Runtime answers one client faster than PyTorch — "
        "PyTorch 20 ms, ONNX Runtime 7 ms"]
    printed = capsys.readouterr().out.splitlines()
    assert [line for line in printed if not line.startswith(("  ", "How to read"))] == lines
    [gpu] = common.what_this_run_shows(step04_triton_python, "Client batch")
    assert gpu.status == "cannot show here" and "a GPU effect: expect it on the GPU node" in gpu.details()


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


def test_within_noise_is_about_the_tests_threshold_not_zero() -> None:
    """A 4× rule at 20 → 25 ms is far from 4× whatever the noise; "no better" at 100 vs 60 is plain;
    only a threshold inside the band makes a verdict "too noisy to call"."""
    from servelab.report.effects import check

    def said(a: float, b: float) -> str:
        return f"{a} {b}"

    four = check("x", (20.0, 25.0), lambda a, b: b >= 4 * a, said, noise=(0.5, 0.5))
    assert four.status == "not observed"
    near = check("x", (20.0, 75.0), lambda a, b: b >= 4 * a, said, noise=(0.1, 0.1))
    assert near.status == "too noisy to call"  # band 7.5 reaches 80
    plain = check("x", (100.0, 60.0), lambda mid, top: top <= 1.05 * mid, said, noise=(0.2, 0.2))
    assert plain.status == "observed"


def test_a_spread_comes_from_the_row_its_value_came_from() -> None:
    from servelab.report.effects import row, spread

    rows = pd.DataFrame([{"p99_ms": 10.0, "latency_spread": 0.3}, {"p99_ms": 12.0, "latency_spread": None}])
    assert row(rows, "p99_ms") == 12.0 and spread(rows, "p99_ms") is None
    assert row(rows, "p99_ms", "min") == 10.0 and spread(rows, "p99_ms", "min") == 0.3
