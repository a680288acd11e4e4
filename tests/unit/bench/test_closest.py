"""The ceiling a service is set against, and the closest configuration, as pure functions on made-up rows
(``python -m servelab.bench ceiling`` measures them: the decision note has its figures)."""

from __future__ import annotations

import pytest

from servelab.bench import ceiling
from servelab.bench.closest import best, label, parse_config, report, summarise_runs


def raw(engine_ms: dict[int, float], device: str = "cpu", pre_ms: float = 2.8,
        what: str = "onnxruntime") -> list[dict]:
    rows = [{"what": "preprocess", "batch": 1, "ms_per_image": pre_ms}]
    return rows + [{"what": what, "batch": batch, "ms_per_image": ms, "device": device}
                   for batch, ms in engine_ms.items()]


def test_on_a_cpu_the_model_and_preprocessing_share_the_cores() -> None:
    # the engine at its fastest batch (16 here), plus preprocessing spread over the 2 cores
    assert ceiling(raw({1: 6.8, 16: 4.6}), "onnx", cores=2) == pytest.approx(1000 / (4.6 + 1.4))


def test_on_a_gpu_the_lower_of_the_two_rates() -> None:
    rows = raw({1: 5.35, 16: 0.44}, device="cuda", pre_ms=5.84, what="pytorch")  # the H100 reference
    assert ceiling(rows, "pt", cores=16) == pytest.approx(1000 / 0.44)  # 2,273 < 16 / 5.84 ms = 2,740
    assert ceiling(rows, "pt", cores=2) == pytest.approx(2000 / 5.84)  # two cores cannot decode that fast


def test_the_closest_configuration_is_the_median_share_over_rounds() -> None:
    runs = [{"config": f"WORKERS={w}", "throughput_rps": rps, "ceiling_rps": 170.0, "mean_ms": 100.0,
             "batch_wait_ms": bw}
            for w, rps, bw in ((1, 146, 80), (2, 155, 60), (1, 150, 82), (2, 149, 61), (1, 141, 79),
                               (2, 158, 58))]
    summary = summarise_runs("onnx", runs)
    assert [row["config"] for row in summary] == ["WORKERS=1", "WORKERS=2"]
    one, two = summary
    assert one["of_ceiling"] == pytest.approx(146 / 170) and two["of_ceiling"] == pytest.approx(155 / 170)
    assert two["of_ceiling_min"] == pytest.approx(149 / 170)
    assert two["of_ceiling_max"] == pytest.approx(158 / 170)
    assert two["batch_wait_ms"] == pytest.approx(59.67, abs=0.01)
    assert best(summary)["config"] == "WORKERS=2"
    said = report({"summary": summary, "best": best(summary)})
    assert "closest to the ceiling: WORKERS=2, 0.91 of it (median of 3 rounds, 0.88-0.93)" in said


def test_a_configuration_is_key_value_settings() -> None:
    assert parse_config("WORKERS=1 PREPROCESS_WORKERS=2") == {"WORKERS": "1", "PREPROCESS_WORKERS": "2"}
    assert label({"WORKERS": "1", "PREPROCESS_WORKERS": "2"}) == "WORKERS=1 PREPROCESS_WORKERS=2"
    for bad in ("", "WORKERS", "=2"):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            parse_config(bad)
