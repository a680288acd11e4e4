"""Notebook 04's expected effects on made-up Triton rows: queue vs compute as clients are added, the
client batch a GPU effect, and a top level that never settled."""

from __future__ import annotations

from servelab.lab import (
    step04_triton_python,
)
from tests.unit.lab.made_up_runs import data, one, status, sweep, triton_run


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


def test_04_says_it_cannot_show_the_queue_when_its_top_level_never_settled() -> None:
    """04 used to drop an unsettled concurrency 16 without a word and read concurrency 8 as "the highest
    concurrency": "observed … queue time exceeds compute time" from a level that was not the top."""
    from servelab.lab import step04_triton_python

    rows = [{"step": "python_concurrency", "label": f"c={c}", "concurrency": c, "p50_ms": p50,
             "compute_infer_ms": 30.0, "queue_ms": q, "throughput": 30.0, "settled": settled}
            for c, p50, q, settled in ((1, 35.0, 0.5, True), (8, 270.0, 240.0, True),
                                       (16, 520.0, 490.0, False))]
    checks = step04_triton_python.rules(triton_run(rows))
    for words in ("queue time exceeds compute", "latency at concurrency 16", "compute time stays flat"):
        verdict = one(checks, words)
        assert verdict.status == "cannot show here", (words, verdict)
        assert verdict.evidence.startswith("this run cannot show it, because 'c=16'"), verdict.evidence
    settled = [{**r, "settled": True} for r in rows]
    verdict = one(step04_triton_python.rules(triton_run(settled)), "queue time exceeds compute")
    assert verdict.status == "observed"
