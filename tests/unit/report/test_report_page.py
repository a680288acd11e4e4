"""The report's page from small hand-made runs: the verdict leads (one row per notebook, effects by
status with 'within noise' its own, warnings and recoveries), Triton and FastAPI tables are short,
and the utilisation chart writes its names level."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from servelab.report import html
from servelab.report.effects import STATUSES, Check
from servelab.report.figures import MAX_COLUMNS, fig_utilisation, short_view, table_html
from servelab.results.schema import FASTAPI_COLUMNS, TRITON_COLUMNS, RunData


class Step:
    """A lab step with fixed checks and no sections."""

    def __init__(self, *statuses: str) -> None:
        self.checks = [Check(f"effect {i} ({s})", s, f"numbers {i}") for i, s in enumerate(statuses)]

    def sections(self, data: RunData) -> list:
        return []

    def rules(self, data: RunData) -> list[Check]:
        return list(self.checks)


LAB = (html.Notebook("03_fastapi", (Step("observed", "too noisy to call"),)),
       html.Notebook("04_triton_python", (Step("observed", "not observed", "cannot show here"),),
                     ("python_concurrency",)))


def write_run(folder: Path, triton: list[dict], notebooks: list[dict] | None) -> Path:
    folder.mkdir(parents=True)
    (folder / "triton.jsonl").write_text("".join(json.dumps(r) + "\n" for r in triton))
    if notebooks is not None:
        (folder / "run.json").write_text(json.dumps(
            {"ok": all(n["ok"] for n in notebooks), "seconds": 99.0, "notebooks": notebooks}))
    return folder


def verdict_rows(page: str) -> dict[str, list[str]]:
    """The verdict table's rows: first cell → the cells' text."""
    table = re.search(r'<table class="data verdict">(.*?)</table>', page, re.S)
    assert table, "no verdict table"
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(1), re.S)
    cells = [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)] for r in rows]
    return {c[0]: c[1:] for c in cells if c}


def test_the_verdict_comes_first_with_each_notebooks_effects_by_status(tmp_path: Path) -> None:
    rows = [{"step": "python_concurrency", "label": "c=1", "warnings": "did not settle", "retried": ""},
            {"step": "python_concurrency", "label": "c=8", "warnings": "", "retried": "no measurement"}]
    run = write_run(tmp_path / "run", rows, [
        {"name": "00_introduction", "seconds": 1.0, "ok": True, "error": ""},
        {"name": "03_fastapi", "seconds": 17.2, "ok": True, "error": ""},
        {"name": "04_triton_python", "seconds": 37.7, "ok": False, "error": "cell 9 raised <Boom>"}])
    page = html.render(run, LAB)
    assert re.search(r"<body><h1>[^<]*</h1><section id=\"verdict\"><h2>Verdict</h2>", page), "verdict first"
    got = verdict_rows(page)
    assert list(got) == ["00_introduction", "03_fastapi", "04_triton_python", "the whole run"]
    # ran, seconds, then one count per status, then warnings and recoveries
    assert got["00_introduction"] == ["ok", "1.0", "", "", "", "", "none"]
    # observed, not observed, too noisy to call, cannot show here
    assert got["03_fastapi"] == ["ok", "17.2", "1", "0", "1", "0", "none"]
    failed = got["04_triton_python"]
    assert failed[:6] == ["FAILED", "37.7", "1", "1", "0", "1"]
    assert "cell 9 raised &lt;Boom&gt;" in failed[6], "the error, escaped"
    assert "1 measurement(s) with a perf_analyzer warning" in failed[6]
    assert "1 measurement(s) recovered" in failed[6]
    assert got["the whole run"][:6] == ["FAILED", "99.0", "2", "1", "1", "1"]
    assert ("2 of 5 expected effects observed in this run (1 not observed, 1 too noisy to call, 1 cannot "
            "show here)" in page)
    # the first screen: one line per notebook, from its verdicts, before the tally
    first = page[:page.index('<table class="data verdict">')]
    assert "<li><b>03_fastapi</b>: observed: effect 0 (observed) — numbers 0</li>" in first
    assert first.index('<ul class="headlines">') < first.index("2 of 5 expected effects")
    assert "Notebook 04_triton_python FAILED." in page
    assert 'href="#warnings"' in page and '<section id="warnings">' in page
    assert 'href="#recovered"' in page and '<section id="recovered">' in page


def test_a_notebook_that_never_ran_says_so_and_a_run_without_its_summary_still_counts(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", [], [{"name": "03_fastapi", "seconds": 3.0, "ok": True, "error": ""}])
    assert verdict_rows(html.render(run, LAB))["04_triton_python"][:2] == ["not run", ""]
    stopped = write_run(tmp_path / "stopped", [], [])
    (stopped / "run.json").write_text(json.dumps({"ok": False, "error": "provisioning: <no lease>"}))
    assert "The run FAILED. provisioning: &lt;no lease&gt;</strong>" in html.render(stopped, LAB)
    bare = write_run(tmp_path / "bare", [], None)  # no run.json: the effects alone
    got = verdict_rows(html.render(bare, LAB))
    assert list(got) == ["03_fastapi", "04_triton_python", "the whole run"]
    assert got["the whole run"][:6] == ["", "", "2", "1", "1", "1"]


def test_each_outcome_is_its_own_count_and_each_verdict_one_line(tmp_path: Path) -> None:
    page = html.render(write_run(tmp_path / "run", [], None), LAB)
    assert ('<p class="verdict"><b class="too-noisy" style="color:#a60">too noisy to call</b>: '
            "effect 1 (too noisy to call) — numbers 1</p>") in page
    assert all(f"<th>{s}</th>" in page for s in STATUSES)
    # the definitions come last, after every verdict
    assert page.index('id="glossary"') > page.index('id="effects"') > page.index("What the figures mean: ")


def triton_rows(**varying: list) -> pd.DataFrame:
    n = len(next(iter(varying.values())))
    base = {column: [1.0] * n for column in TRITON_COLUMNS}
    base.update({"step": ["s"] * n, "label": [f"row {i}" for i in range(n)], "threads": ["split"] * n,
                 "batch": [1] * n, "mean_batch_size": [1.0] * n, "gpu_util_pct": [None] * n})
    return pd.DataFrame({**base, **varying})


def test_triton_tables_show_the_short_set_and_the_setting_that_varies() -> None:
    plain = short_view(triton_rows(throughput=[10.0, 20.0]), TRITON_COLUMNS)
    assert plain is not None
    assert list(plain) == ["measurement", "throughput (images/s)", "p50 (ms)", "p99 (ms)", "queue (ms)",
                           "compute (ms)", "CPU %", "server CPU %"]
    threads = short_view(triton_rows(threads=["default", "split"]), TRITON_COLUMNS)
    assert threads is not None and list(threads)[-1] == "threads"
    batching = short_view(triton_rows(mean_batch_size=[1.0, 5.5]), TRITON_COLUMNS)
    assert batching is not None and list(batching)[-1] == "mean batch"
    gpu = short_view(triton_rows(gpu_util_pct=[50.0, 60.0], batch=[1, 16]), TRITON_COLUMNS)
    assert gpu is not None and list(gpu)[-3:] == ["GPU %", "CPU %", "client batch"]
    assert len(gpu.columns) == MAX_COLUMNS  # the server's own CPU gives way on a GPU run
    assert len(short_view(triton_rows(gpu_util_pct=[5.0, 6.0]), TRITON_COLUMNS).columns) <= MAX_COLUMNS


def test_fastapi_tables_name_each_run_in_one_column() -> None:
    df = pd.DataFrame([{c: 1.0 for c in FASTAPI_COLUMNS} | {"backend": "pt", "mode": "concurrent",
                                                             "concurrency": 16, "errors": 0}])
    view = short_view(df, FASTAPI_COLUMNS)
    assert view is not None and len(view.columns) <= MAX_COLUMNS
    assert view.iloc[0]["measurement"] == "pt concurrent c=16" and "errors" not in view
    assert "errors" in short_view(df.assign(errors=2), FASTAPI_COLUMNS)


def test_other_tables_keep_their_columns_and_scroll_in_their_own_box() -> None:
    df = pd.DataFrame([{"a": 1.234, "b": "x", "p95_ms": None}])
    view = short_view(df, ["a", "b", "p95_ms"])
    assert view is not None and list(view) == ["a", "b", "p95 (ms)"]
    assert short_view(df, ["missing"]) is None
    page = table_html(df, ["a", "b", "p95_ms", "missing"])
    assert page.startswith('<div class="table">') and "<th>a</th>" in page and "1.2" in page
    assert "1.23" not in page and "None" not in page and "NaN" not in page
    assert table_html(pd.DataFrame(), TRITON_COLUMNS) == "<p><em>no rows</em></p>"


def test_the_utilisation_chart_writes_every_name_level_and_grows_with_them() -> None:
    rows = pd.DataFrame({"step": [f"step{i // 4}" for i in range(40)], "label": [f"c={i}" for i in range(40)],
                         "cpu_util_pct": [float(i) for i in range(40)]})
    fig = fig_utilisation(rows)
    [ax] = fig.axes
    labels = ax.get_yticklabels()
    assert [t.get_text() for t in labels][:2] == ["step0 · c=0", "step0 · c=1"]
    assert {t.get_rotation() for t in labels} == {0.0} and min(t.get_fontsize() for t in labels) >= 8
    width, height = fig.get_size_inches() * fig.dpi
    assert width <= 1000, "drawn no wider than the page, so it is never shrunk"
    assert height >= 40 * 20, "at least 20 px a row"
    few = fig_utilisation(rows.head(4).assign(label="capacity", step="capacity"))
    assert [t.get_text() for t in few.axes[0].get_yticklabels()] == ["capacity"] * 4


def test_counts_print_as_whole_numbers() -> None:
    """Issue 36: a column of counts with a missing value printed 501.0."""
    html = table_html(pd.DataFrame([{"label": "a", "sent": 501.0, "ok": None, "p99_ms": 12.5},
                                    {"label": "b", "sent": 3.0, "ok": 2.0, "p99_ms": 1.0}]),
                      ["label", "sent", "ok", "p99_ms"])
    assert "<td>501</td>" in html and "501.0" not in html and "<td>2</td>" in html and "<td>12.5</td>" in html
