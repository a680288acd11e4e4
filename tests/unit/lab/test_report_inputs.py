"""What the lab hands the report: each notebook's steps and Triton rows, GourmetGram's upload times
(the cold first upload apart, no p95 from a handful) and the parameters table (no NaN for an unset value)."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest

from servelab.core.lab_steps import LAB_STEPS
from servelab.core.paths import REPO_ROOT
from servelab.lab import gourmetgram, params, run_report

QUICK_RUN = REPO_ROOT / "tests" / "integration" / "report" / "quick-run"  # a whole run's rows, recorded


def test_each_notebook_reads_only_the_rows_the_registry_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verdict counts a notebook's warnings and recoveries by the rows the registry names for it: its
    report modules, run on a whole run's data (sections and rules), ask ``step_rows`` for those alone."""
    import servelab.lab
    from servelab.results.schema import RunData

    asked: dict[str, set[str]] = {}
    current = [""]
    for module in [m for name, m in sys.modules.items() if name.startswith("servelab.lab.")]:
        if getattr(module, "step_rows", None) is not None:
            original = module.step_rows

            def spy(df: Any, *names: str, _original: Any = original) -> Any:
                asked.setdefault(current[0], set()).update(names)
                return _original(df, *names)

            monkeypatch.setattr(module, "step_rows", spy)
    data = RunData.load(QUICK_RUN)
    for notebook in run_report.NOTEBOOKS:
        current[0] = notebook.name
        for module in notebook.steps:
            module.rules(data)
            module.sections(data)
    assert servelab.lab is not None
    for step in LAB_STEPS:
        if not step.report:
            continue
        read, named = asked.get(step.name, set()), {n for names in step.rows.values() for n in names}
        assert read <= named, f"{step.name}: its report also reads {sorted(read - named)}: register them"
        assert bool(read) == bool(named), f"{step.name}: rows named but none read, or the reverse"
    assert [n.name for n in run_report.NOTEBOOKS] == [s.name for s in LAB_STEPS if s.report]
    assert tuple(s for n in run_report.NOTEBOOKS for s in n.steps) == run_report.STEPS


def test_a_handful_of_uploads_gives_the_cold_one_apart_and_no_p95() -> None:
    times = [213.9, 25.0, 31.0, 24.0, 27.0, 26.0]
    got = gourmetgram.upload_times(times)
    assert got == {"cold_ms": 213.9, "median_ms": 26.0, "max_ms": 31.0, "p95_ms": None}
    line = gourmetgram.read_uploads({"backend": "flask (fastapi)", "requests": 6, **got})
    assert "first upload 213.9 ms (cold" in line and "the other 5: median 26.0 ms, max 31.0 ms" in line
    assert "no p95 from fewer than 20" in line


def test_enough_uploads_give_a_p95_of_the_warm_ones() -> None:
    times = [500.0, *[float(t) for t in range(1, 21)]]
    got = gourmetgram.upload_times(times)
    assert got["cold_ms"] == 500.0 and got["max_ms"] == 20.0
    assert got["p95_ms"] == pytest.approx(19.05)  # the cold 500 ms is not in it
    assert "p95 19.1 ms" in gourmetgram.read_uploads({"backend": "b", "requests": 21, **got})
    assert gourmetgram.upload_times([80.0]) == {"cold_ms": 80.0, "median_ms": None, "max_ms": None,
                                                "p95_ms": None}
    assert len(gourmetgram.FLASK_COLUMNS) <= 8


def test_unset_parameters_read_not_set() -> None:
    p = params.resolve("local", "quick", project=None, site=None, lease_name=None, lease_id=None,
                       delete_adopted=False)
    table = p._repr_html_()
    cells = re.findall(r"<tr>\s*<td>(\w+)</td>\s*<td>([^<]*)</td>", table)
    assert ("project", "not set") in cells and ("lease_id", "not set") in cells
    assert "NaN" not in table and "<td>None</td>" not in table
    assert ("delete_adopted", "False") in cells
