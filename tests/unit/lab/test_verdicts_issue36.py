"""Issue 36's rules on recorded rows: a verdict whose precondition failed says "this run cannot show it,
because …" and counts as not measured; a comparison holds one thing fixed and names it; every spread
carries its unit; no verdict prints nan. Each test fails on the code before issue 36 (b3a2668)."""

from __future__ import annotations

import pandas as pd

from servelab.lab import step05_instance_scaling, step06_onnx_backend, step07_dynamic_batching
from servelab.report.effects import check
from servelab.report.figures import fig_breakdown
from servelab.report.readings import read_breakdown
from servelab.results.schema import RunData, normalise_triton

EMPTY = pd.DataFrame()


def data(triton: list[dict]) -> RunData:
    return RunData(EMPTY, EMPTY, pd.DataFrame(triton))


def one(checks: list, words: str):  # type: ignore[no-untyped-def]
    [found] = [c for c in checks if words in c.effect]
    return found


# ----------------------------------------------------------------------------- 05: an unsettled row
def instance_rows(default: dict, split: dict) -> list[dict]:
    """The instance steps (1, 2, 4 instances) and the threads lesson, as 05 records them."""
    rows = [{"step": "instance_scaling", "label": f"{n} on the CPU", "instances": f"{n}xKIND_CPU",
             "threads": 1, "throughput": t, "throughput_spread": 0.05, "settled": True}
            for n, t in ((1, 31.6), (2, 29.5), (4, 17.8))]
    rows += [{"step": "threads_lesson", "instances": "2xKIND_CPU", "throughput_spread": 0.05, **default},
             {"step": "threads_lesson", "instances": "2xKIND_CPU", "throughput_spread": 0.05, **split}]
    return rows


def test_an_unsettled_row_is_never_counted_and_the_verdict_says_why() -> None:
    """The run issue 36 read: "2 on the CPU, default threads (unsettled)" at 1.6/s with no p50/p99 was
    counted as 'default threads 1.6/s, split 25.3/s … observed'."""
    rows = instance_rows({"label": "2 on the CPU, default threads", "thread_setting": "default", "threads": 2,
                          "throughput": 1.6, "settled": False},
                         {"label": "2 on the CPU, split threads", "thread_setting": "split", "threads": 1,
                          "throughput": 25.3, "settled": True})
    verdict = one(step05_instance_scaling.rules(data(rows)), "one thread each")
    assert verdict.status == "cannot show here"
    assert verdict.evidence.startswith("this run cannot show it, because '2 on the CPU, default threads' "
                                       "never settled")


def test_a_configuration_measured_twice_counts_its_two_readings_as_noise() -> None:
    """Two instances with split threads read 29.5/s in the instance step and 25.3/s in the threads
    lesson: a 15 % repeat gap, wider than either level's windows, so 24 vs 25.3 is within noise."""
    rows = instance_rows({"label": "2 on the CPU, default threads", "thread_setting": "default", "threads": 2,
                          "throughput": 24.0, "settled": True},
                         {"label": "2 on the CPU, split threads", "thread_setting": "split", "threads": 1,
                          "throughput": 25.3, "settled": True})
    verdict = one(step05_instance_scaling.rules(data(rows)), "one thread each")
    assert verdict.status == "too noisy to call", verdict
    assert "the same configuration read 29.5/s in the instance step: repeats 15% apart" in verdict.evidence


# ----------------------------------------------------------------------------- 06: mixed concurrencies
def backends() -> list[dict]:
    """The Python backend's and the ONNX backend's sweeps, then two ONNX instances, at 1, 8 and 16."""
    rows = []
    sweeps = (("python_vs_onnx", "food_classifier", "1xKIND_CPU", (34.2, 30.0, 29.0)),
              ("onnx_backend", "food_classifier_onnx", "1xKIND_CPU", (9.9, 11.0, 11.5)),
              ("onnx_scaling", "food_classifier_onnx", "2xKIND_CPU", (9.8, 17.4, 17.9)))
    for step, model, instances, infer in sweeps:
        for c, ms in zip((1, 8, 16), infer, strict=True):
            rows.append({"step": step, "model": model, "instances": instances, "concurrency": c,
                         "label": f"{model} c={c}", "compute_infer_ms": ms, "queue_ms": 5.0 * c,
                         "throughput": 1000 / ms, "p50_ms": ms * c, "p99_ms": ms * c * 1.5})
    return rows


def test_the_backends_are_compared_at_each_concurrency_never_across_them() -> None:
    """The old reading set the Python backend at concurrency 1 against ONNX at 16 ("34.2 -> 11.5")."""
    [section, _] = step06_onnx_backend.sections(data(backends()))
    caption = section.parts[0]
    assert "at concurrency 1: compute infer 34.2 → 9.9 ms" in caption
    assert "at concurrency 8: compute infer 30.0 → 11.0 ms" in caption
    assert "34.2 → 11.5" not in caption


def test_one_and_two_instances_are_compared_at_each_concurrency_with_one_series_each() -> None:
    """The old reading of 06's '1 vs 2 instances' said "9.9 → 17.9 ms" (one instance at concurrency 1,
    two at 16), and its plot joined both configurations with one line."""
    rows = pd.DataFrame([r for r in backends() if r["model"] == "food_classifier_onnx"])
    reading = read_breakdown(rows)
    assert "at concurrency 16: compute infer 11.5 → 17.9 ms" in reading and "9.9 → 17.9" not in reading
    fig = fig_breakdown(rows)
    lines = fig.axes[1].get_lines()
    assert len(lines) == 4  # p50 and p99 for each configuration
    assert all(list(line.get_xdata()) == [0, 1, 2] for line in lines)  # each over the three levels
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["1", "8", "16"]


def test_the_onnx_verdict_names_the_concurrency_it_holds_fixed() -> None:
    verdict = one(step06_onnx_backend.rules(data(backends())), "inference time")
    assert verdict.evidence.startswith("at concurrency 8: compute infer Python 30.0 ms, ONNX 11.0 ms")


# ----------------------------------------------------------------------------- 07: queue vs compute
def test_the_low_rate_cost_of_batching_is_split_into_queue_and_compute() -> None:
    """07's low-rate p99 rose while its queue fell: the evidence must show the compute that rose."""
    rows = [{"step": "dynamic_batching", "dynamic_batching": on, "rate": rate, "p99_ms": p99, "queue_ms": q,
             "compute_infer_ms": c}
            for on, rate, p99, q, c in ((False, 30.0, 82.9, 15.5, 15.0), (True, 30.0, 110.1, 9.1, 25.8),
                                        (False, 90.0, 300.0, 200.0, 15.0), (True, 90.0, 250.0, 60.0, 80.0))]
    verdict = one(step07_dynamic_batching.rules(data(rows)), "lowest rate")
    assert verdict.evidence == ("at 30/s: off 82.9 ms (queue 15.5 + compute 15.0 ms), on 110.1 ms "
                                "(queue 9.1 + compute 25.8 ms) (+33%)")


# ----------------------------------------------------------------------------- every rule
def test_a_nan_is_not_measured_and_never_printed() -> None:
    verdict = check("x", (12.0, float("nan")), lambda a, b: b < a, lambda a, b: f"{a} then {b}")
    assert verdict.status == "cannot show here" and "nan" not in verdict.evidence


def test_a_spread_carries_its_unit_and_no_e_notation() -> None:
    """Lines ended "(spread 2.97e+03)" and "(spread 17.7)": no unit, a format a student cannot read."""
    verdict = check("x", (1000.0, 1200.0), lambda a, b: b > a, lambda a, b: f"{a:.0f} → {b:.0f} ms",
                    noise=(2.97, None), unit="ms")
    assert verdict.evidence == "1000 → 1200 ms"
    assert "noise band: 2970 ms (the larger of the two figures' own spreads)" in verdict.details()


# ----------------------------------------------------------------------------- CPU %: the server's share
def test_the_servers_own_cpu_is_on_the_machines_scale_beside_it() -> None:
    """psutil counts a process's CPU per core (100 = one core); the machine's mean counts all cores."""
    rows = normalise_triton(pd.DataFrame([{"cpu_mean_pct": 99.5, "proc_cpu_mean_pct": 80.0, "cpu_count": 2}]))
    assert rows.loc[0, "server_cpu_pct"] == 40.0 and rows.loc[0, "cpu_util_pct"] == 99.5


# ----------------------------------------------------------------------------- readings of unsettled rows
def test_a_reading_marks_an_unsettled_end_and_never_prints_nan() -> None:
    """04's reading printed "queue 0.5 → nan ms … p99 40 → nan ms" for an unsettled top level."""
    rows = pd.DataFrame([
        {"model": "food_classifier", "concurrency": 1, "queue_ms": 0.5, "compute_infer_ms": 30.0,
         "p99_ms": 40.0, "settled": True},
        {"model": "food_classifier", "concurrency": 16, "queue_ms": float("nan"), "compute_infer_ms": None,
         "p99_ms": float("nan"), "settled": False}])
    reading = read_breakdown(rows)
    assert "nan" not in reading
    assert "to 16 (unsettled): queue 0.5 → ? ms" in reading


def test_the_scaling_reading_never_names_an_unsettled_row_best_and_says_its_load() -> None:
    """05's reading printed "default threads: 1.6/s, p99 nan ms" for the row issue 36 found unsettled."""
    from servelab.report.readings import read_scaling

    rows = pd.DataFrame([
        {"label": "2 instances on the CPU, default threads", "concurrency": 8, "throughput": 90.0,
         "p99_ms": float("nan"), "settled": False},
        {"label": "2 instances on the CPU, split threads", "concurrency": 8, "throughput": 25.3,
         "p99_ms": 300.0, "settled": True}])
    reading = read_scaling(rows)
    assert reading.startswith("at concurrency 8: best throughput 25.3/s with 2 instances on the CPU, split")
    assert "default threads (unsettled): 90.0/s, p99 ? ms" in reading and "nan" not in reading


# ----------------------------------------------------------------------------- 04: an unsettled top level
def test_04_says_it_cannot_show_the_queue_when_its_top_level_never_settled() -> None:
    """04 used to drop an unsettled concurrency 16 without a word and read concurrency 8 as "the highest
    concurrency": "observed … queue time exceeds compute time" from a level that was not the top."""
    from servelab.lab import step04_triton_python

    rows = [{"step": "python_concurrency", "label": f"c={c}", "concurrency": c, "p50_ms": p50,
             "compute_infer_ms": 30.0, "queue_ms": q, "throughput": 30.0, "settled": settled}
            for c, p50, q, settled in ((1, 35.0, 0.5, True), (8, 270.0, 240.0, True),
                                       (16, 520.0, 490.0, False))]
    checks = step04_triton_python.rules(data(rows))
    for words in ("queue time exceeds compute", "latency at concurrency 16", "compute time stays flat"):
        verdict = one(checks, words)
        assert verdict.status == "cannot show here", (words, verdict)
        assert verdict.evidence.startswith("this run cannot show it, because 'c=16'"), verdict.evidence
    settled = [{**r, "settled": True} for r in rows]
    assert one(step04_triton_python.rules(data(settled)), "queue time exceeds compute").status == "observed"


# ----------------------------------------------------------------------------- 08 last; the report on a phone
def test_the_headless_run_executes_the_teardown_last() -> None:
    """08 summarises everything measured, so it runs after 09 and 10 (issue 36, finding 10)."""
    from pathlib import Path

    from servelab.lab.runner import run_order

    stems = ["00_intro", "03_fastapi", "08_teardown", "09_llm_serving", "10_scaling_out"]
    assert [p.stem for p in run_order([Path(f"{s}.ipynb") for s in stems])] == [
        "00_intro", "03_fastapi", "09_llm_serving", "10_scaling_out", "08_teardown"]


def test_the_report_lays_out_at_the_phones_width(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Without the viewport tag a phone lays report.html out at 980 px and shrinks it (finding 11)."""
    from servelab.report.html import render

    page = render(tmp_path, [])
    assert "<meta name='viewport' content='width=device-width, initial-scale=1'>" in page
