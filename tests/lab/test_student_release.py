"""The student release, generated and executed headless as a student who changed nothing would run it
(issue 51's first "must hold"): every check fails there with one line saying what to do, and nothing
else in the notebook breaks. 04 and 07 hold the typed commands and the config text the checks judge;
their measurements run at the smallest sizes the parameters allow, so this costs about two minutes
(docs/decisions/2026-12-01-exercise-layer.md). The instructor version is the whole headless run's.
"""

from __future__ import annotations

import contextlib
import re
import time
from typing import Any

import nbformat
import pytest

from servelab.core.progress import HEADLESS
from servelab.lab import classwork
from servelab.lab.kernel import ensure_kernel, kernel_config
from servelab.results.store import RESULTS_VARIABLE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CHEAP = {"window_requests": 8, "max_trials": 3, "stability_pct": 1000}
STUDENT_RUN: dict[str, dict[str, Any]] = {
    "04_triton_python": {**CHEAP, "flask_requests": 2},
    "07_dynamic_batching": {**CHEAP, "capacity_concurrency": 2, "rate_fractions": [0.5],
                            "rate_stability_pct": 1000},
}
CHECK_CALL = re.compile(r"^(?:triton_edits\.check_\w+|exercise\.check(?:_predictions)?)\(", re.M)


@pytest.fixture(scope="module")
def student_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import papermill as pm

    release = tmp_path_factory.mktemp("release") / "lab"
    classwork.make_release(release)
    run_dir = tmp_path_factory.mktemp("student-run")
    kernel = ensure_kernel()
    seconds: dict[str, float] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(RESULTS_VARIABLE, str(run_dir))
        patch.setenv(HEADLESS, "1")
        for name, parameters in STUDENT_RUN.items():
            started = time.monotonic()
            # every cell runs (allow_errors); papermill then raises for the errors, judged below
            with contextlib.suppress(pm.PapermillExecutionError):
                pm.execute_notebook(str(release / "notebooks" / f"{name}.ipynb"),
                                    str(run_dir / f"{name}.ipynb"),
                                    parameters={"target": "local", "preset": "quick", **parameters},
                                    kernel_name=kernel, cwd=str(release / "notebooks"), progress_bar=False,
                                    start_timeout=120, execution_timeout=300, allow_errors=True,
                                    config=kernel_config())
            seconds[name] = time.monotonic() - started
    print(f"student release executed: {', '.join(f'{n} {s:.0f} s' for n, s in seconds.items())}")
    return {"dir": run_dir, "seconds": seconds}


@pytest.mark.parametrize("name", sorted(STUDENT_RUN))
def test_each_check_fails_with_a_line_saying_what_to_do_and_nothing_else_breaks(
        student_run: dict[str, Any], name: str) -> None:
    nb = nbformat.read(student_run["dir"] / f"{name}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code), "every cell ran"
    for index, cell in enumerate(code):
        for error in (o for o in cell.outputs if o.output_type == "error"):
            first = cell.source.splitlines()[0][:60]
            said = f"{name}, code cell {index} ({first!r}): {error.ename}: {error.evalue}"
            assert error.ename in ("CheckFailed", "StudentError"), f"broke unexpectedly: {said}"
            assert error.traceback[0].startswith("✗ "), f"a traceback instead of what to do: {said}"
            if error.ename == "CheckFailed":
                assert len(error.traceback) == 1 and ": " in error.traceback[0], said
    checks = [c for c in code if CHECK_CALL.search(c.source)]
    assert checks, f"{name} has no check"
    for cell in checks:
        failed = [o for o in cell.outputs if o.output_type == "error" and o.ename == "CheckFailed"]
        assert failed, f"a check passed on the student's untouched work: {cell.source[:80]}"
        line = failed[0].traceback[0]
        assert re.match(r"✗ check “[^”]+”: .+: (?:add|write|turn) ", line), line
    printed = "".join(o.get("text", "") for c in code for o in c.outputs)
    assert "you predicted nothing (no guess recorded)" in printed, "the comparison says no guess was made"
    assert "no prediction recorded for “" in printed and "Model answer" not in printed


def test_the_student_run_lands_in_its_own_data(student_run: dict[str, Any]) -> None:
    from servelab.lab.exercise import EXERCISE
    from servelab.results.store import read_rows

    rows = read_rows(EXERCISE, student_run["dir"])
    failed = {r["key"] for r in rows if r["kind"] == "check" and not r["passed"]}
    assert {"your command sent poisson arrivals", "your config.pbtxt has a dynamic_batching block",
            "your run formed executions of more than one request"} <= failed
    assert any(r["kind"] == "command" for r in rows), "the typed commands are recorded"
