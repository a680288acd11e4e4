"""The LLM client's metric definitions: TTFT, ITL, TPOT, tokens/s, and Poisson arrivals."""

from __future__ import annotations

import statistics
from itertools import pairwise

import pytest

from servelab.llm.client import Record, arrival_times, output_lengths, percentile, summarise


def test_ttft_is_sent_to_first_token_and_itl_the_gaps_after_it() -> None:
    r = Record(prompt_tokens=10, max_tokens=4, sent=1.0, tokens=[1.5, 1.6, 1.8, 2.1])
    assert r.ttft == pytest.approx(0.5)
    assert r.gaps == pytest.approx([0.1, 0.2, 0.3])


def test_summary_pools_gaps_and_spans_first_send_to_last_token() -> None:
    records = [Record(8, 3, 0.0, [0.2, 0.3, 0.4]), Record(8, 2, 1.0, [1.4, 1.6]),
               Record(8, 2, 1.5, [], status=400, error="bad")]
    s = summarise(records)
    assert (s["requests"], s["completed"], s["errors"], s["output_tokens"]) == (3, 2, 1, 5)
    assert s["seconds"] == pytest.approx(1.6)
    assert s["output_tokens_s"] == pytest.approx(5 / 1.6, abs=0.1)
    assert s["requests_s"] == pytest.approx(2 / 1.6, abs=0.01)
    assert s["ttft_p50_ms"] == pytest.approx(300.0)  # 200 and 400 ms
    assert s["itl_p50_ms"] == pytest.approx(100.0)  # gaps 100, 100, 200 ms
    assert s["tpot_mean_ms"] == pytest.approx((100 + 200) / 2)
    assert s["e2e_p99_ms"] == pytest.approx(598.0)  # 400 and 600 ms


def test_summary_of_nothing_has_no_rates() -> None:
    s = summarise([Record(1, 1, 0.0, error="refused")])
    assert s["completed"] == 0 and s["output_tokens_s"] is None and s["ttft_p99_ms"] is None


def test_percentile_interpolates() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 99) == 5
    assert percentile([], 50) is None
    assert percentile(list(range(101)), 99) == 99


def test_poisson_arrivals_have_the_asked_mean_rate_and_repeat_with_the_seed() -> None:
    times = arrival_times(4000, rate=8.0, seed=3)
    gaps = [b - a for a, b in pairwise(times)]
    assert times[0] == 0 and all(g > 0 for g in gaps)
    assert statistics.mean(gaps) == pytest.approx(1 / 8, rel=0.05)
    assert statistics.stdev(gaps) == pytest.approx(1 / 8, rel=0.1)  # exponential: sd = mean
    assert arrival_times(10, 8.0, 3) == times[:10]


def test_output_lengths_within_bounds_and_equal_when_asked() -> None:
    lengths = output_lengths(200, 8, 256, seed=1)
    assert min(lengths) >= 8 and max(lengths) <= 256 and len(set(lengths)) > 50
    assert set(output_lengths(5, 64, 64, seed=1)) == {64}


def test_the_noise_is_the_gap_between_the_runs_interleaved_halves() -> None:
    """Requests 1, 3, … and 2, 4, … summarised alone: their TTFT p99s 100 and 300 ms are 1.0 apart
    relative to their mean; equal halves have no spread; a half with nothing has none to give."""
    records = [Record(8, 2, 0.0, [0.1, 0.2]), Record(8, 2, 0.0, [0.3, 0.4])]
    s = summarise(records)
    assert s["ttft_p99_spread"] == pytest.approx(1.0)
    assert s["output_tokens_s_spread"] == pytest.approx((10 - 5) / 7.5, abs=1e-3)  # 10 and 5 tokens/s
    assert summarise([Record(8, 2, 0.0, [0.1, 0.2])] * 4)["ttft_p99_spread"] == 0
    assert summarise([Record(8, 2, 0.0, [0.1, 0.2])])["ttft_p99_spread"] is None
