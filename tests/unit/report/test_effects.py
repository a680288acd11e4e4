"""The pieces every rule is made of (``servelab.report.effects``): the noise band and relative spread,
too noisy to call measured against the test's threshold, a spread from the row its value came from, a
missing value never printed, a spread carrying its unit."""

from __future__ import annotations

import pandas as pd

from servelab.report.effects import check


def test_noise_band_and_relative_spread() -> None:
    from servelab.report.effects import check, noise_band, relative_spread

    assert relative_spread([90, 100, 110]) == 0.2 and relative_spread([5]) is None
    assert relative_spread([1, None, float("nan")]) is None
    assert noise_band(100, 50, 0.1, 0.4) == 20.0 and noise_band(100, 50, None, None) is None
    same = check("x", (100.0, 104.0), lambda a, b: b > a, lambda a, b: f"{a} {b}", noise=(0.05, None))
    apart = check("x", (100.0, 106.0), lambda a, b: b > a, lambda a, b: f"{a} {b}", noise=(0.05, None))
    unknown = check("x", (100.0, 101.0), lambda a, b: b > a, lambda a, b: f"{a} {b}", noise=(None, None))
    assert (same.status, apart.status, unknown.status) == ("too noisy to call", "observed", "observed")


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


def test_a_nan_is_not_measured_and_never_printed() -> None:
    verdict = check("x", (12.0, float("nan")), lambda a, b: b < a, lambda a, b: f"{a} then {b}")
    assert verdict.status == "cannot show here" and "nan" not in verdict.evidence


def test_a_spread_carries_its_unit_and_no_e_notation() -> None:
    """Lines ended "(spread 2.97e+03)" and "(spread 17.7)": no unit, a format a student cannot read."""
    verdict = check("x", (1000.0, 1200.0), lambda a, b: b > a, lambda a, b: f"{a:.0f} → {b:.0f} ms",
                    noise=(2.97, None), unit="ms")
    assert verdict.evidence == "1000 → 1200 ms"
    assert "noise band: 2970 ms (the larger of the two figures' own spreads)" in verdict.details()
