"""Each figure's unit and basis, said at its first use in a notebook (one kernel) and once in the report:
what 100 % CPU is and the server's share beside it, what a spread spans, TPOT, queue and compute."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from servelab.lab.tables import Measured
from servelab.report import terms
from servelab.results.schema import TRITON_COLUMNS


@pytest.fixture(autouse=True)
def fresh() -> None:
    from servelab.report import verdicts

    terms.forget()
    verdicts.forget()


def table() -> Measured:
    return Measured.of(pd.DataFrame([{"label": "c=8", "throughput": 30.0, "p50_ms": 200.0, "p99_ms": 300.0,
                                      "queue_ms": 170.0, "compute_infer_ms": 30.0, "cpu_util_pct": 99.5,
                                      "server_cpu_pct": 40.0, "threads": 1}]), TRITON_COLUMNS)


def test_the_first_table_says_what_cpu_percent_is_and_later_ones_do_not(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(terms, "_cores", lambda: 2)
    first, second = table(), table()
    shown = repr(first)
    assert "CPU %: the whole machine's mean busy share" in shown and "100 % = all 2 cores busy" in shown
    assert "load generator" in shown and "server CPU %: the server's own processes alone" in shown
    assert "queue (ms), compute (ms)" in shown
    assert repr(first) == shown and "CPU %:" in (first._repr_html_() or "")  # the same display, twice
    assert "CPU %:" not in repr(second)  # defined once per notebook


def test_the_first_spread_says_what_it_spans(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from servelab.lab import common, step07_dynamic_batching

    run = tmp_path / "run"
    run.mkdir()
    rows = [{"step": "arrivals", "distribution": d, "latency_p99_ms": p, "latency_spread": 0.1, "rate": 30}
            for d, p in (("constant", 10.0), ("poisson", 40.0))]
    (run / "triton.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setenv("SERVELAB_RESULTS", str(run))
    [poisson] = common.what_this_run_shows(step07_dynamic_batching, "Poisson")
    assert poisson.band is not None and poisson.band.value == 4 and poisson.band.unit == "ms"
    out = capsys.readouterr().out
    assert "  noise band: 4 ms" in out
    assert "noise band: how far a comparison's figures could move by their own noise, in their unit" in out
    assert "perf_analyzer's last three windows of each level" in out
    common.what_this_run_shows(step07_dynamic_batching, "Poisson")
    assert "noise band: how far" not in capsys.readouterr().out  # the legend once per notebook


def test_the_report_says_what_every_figure_means() -> None:
    said = " ".join(terms.glossary(cores=2))
    for words in ("100 % = all 2 cores", "server CPU %", "noise band:", "queue (ms), compute (ms)",
                  "TPOT (tpot_ms): time per output token"):
        assert words in said


def test_the_glossary_page_holds_the_librarys_definitions() -> None:
    """docs/guides/glossary.md says what the notebooks print once each, in the library's own words (one
    source: ``python -m servelab.report.terms docs/guides/glossary.md`` writes its block)."""
    from servelab.core.paths import REPO_ROOT
    from servelab.site.guides import block

    page = (REPO_ROOT / "docs" / "guides" / "glossary.md").read_text(encoding="utf-8")
    assert block(page, terms.GLOSSARY_BLOCK) == terms.glossary_markdown()
    names = [line.split("**")[1] for line in terms.glossary_markdown().splitlines()]
    assert names == sorted(names, key=lambda n: n.lstrip("$(").lower()) and "verdict" in names
