"""The lab's warnings as plain lines: what a notebook cell shows of a LabWarning, and of any other."""

from __future__ import annotations

import subprocess
import sys

import nbformat

from servelab.core.notices import LabWarning, plain_line
from servelab.core.paths import REPO_ROOT
from tests.lab.notebook_noise import noise


def _cell(code: str, plainly: bool = True) -> nbformat.NotebookNode:
    """A notebook whose one code cell shows what ``code`` printed in a fresh Python, as a kernel streams
    it (stdout, then stderr), after ``show_plainly`` as every notebook has it (``plainly``)."""
    setup = "from servelab.core.notices import show_plainly; show_plainly(); show_plainly()\n"  # idempotent
    done = subprocess.run([sys.executable, "-c", (setup if plainly else "") + code], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    outputs = [nbformat.v4.new_output("stream", name=name, text=text)
               for name, text in (("stdout", done.stdout), ("stderr", done.stderr)) if text]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code, outputs=outputs)])


def _printed(nb: nbformat.NotebookNode, stream: str) -> str:
    return "".join(o.text for o in nb.cells[0].outputs if o.get("name") == stream)


UNSETTLED = """
import warnings
import pandas as pd
from servelab.triton.perf_csv import UnsettledWarning, unsettled_message

frame = pd.DataFrame([{"model": "food_classifier", "load_mode": "concurrency", "load_value": 16.0,
                       "settled": False}])
def measure():
    warnings.warn(unsettled_message(frame), UnsettledWarning, stacklevel=2)
for _ in range(2):  # the same level unsettled in two steps: said twice
    measure()
"""


def test_a_lab_warning_is_one_plain_line_on_stdout_every_time() -> None:
    nb = _cell(UNSETTLED)
    assert _printed(nb, "stderr") == ""
    lines = _printed(nb, "stdout").splitlines()
    assert len(lines) == 2 and lines[0] == lines[1]
    line = lines[0]
    assert line.startswith("warning: perf_analyzer did not obtain a stable measurement for "
                           "food_classifier at concurrency 16: its row carries settled=False")
    assert "settle='fixed'" in line and "stability_pct" in line  # what to do, by the notebook's parameters
    assert ".py" not in line and "Warning" not in line and "warnings.warn" not in line
    assert noise(nb) == []


def test_the_quietness_check_fails_a_lab_warning_shown_as_python_shows_it() -> None:
    """Without show_plainly (a notebook that never imported servelab.lab) the check catches it."""
    found = noise(_cell(UNSETTLED, plainly=False))
    assert len(found) == 1 and "<string>:" in found[0] and "UnsettledWarning: perf_analyzer" in found[0]


def test_other_warnings_are_shown_as_python_shows_them() -> None:
    """Only the lab's own become plain lines: anything else stays a warning, and the check catches it."""
    nb = _cell("import warnings\n"
               "from servelab.core.notices import LabWarning\n"
               "warnings.warn('warm-up of food_classifier skipped: timed out', LabWarning)\n"
               "warnings.warn('something else', UserWarning)\n")
    assert _printed(nb, "stdout") == "warning: warm-up of food_classifier skipped: timed out\n"
    found = noise(nb)
    assert len(found) == 1 and "UserWarning: something else" in found[0]


def test_plain_line_is_one_line() -> None:
    assert plain_line(LabWarning("two\n  lines")) == "warning: two lines"


def test_the_quietness_check_on_crafted_outputs() -> None:
    """The issue's case, a Python warning line kept on stdout, a warning in a result; plain text passes."""
    issue = ("/work/main/servelab/triton/perf.py:343: UnsettledWarning: perf_analyzer did not obtain a "
             "stable measurement for concurrency 16\n  warnings.warn(note, UnsettledWarning, stacklevel=2)\n")
    stream = nbformat.v4.new_output
    cells = [
        nbformat.v4.new_code_cell("a()", outputs=[stream("stream", name="stderr", text=issue)]),
        nbformat.v4.new_code_cell("b()", outputs=[stream("stream", name="stdout", text=issue)]),
        nbformat.v4.new_code_cell("c()", outputs=[nbformat.v4.new_output(
            "execute_result", data={"text/plain": "x.py:1: FutureWarning: old"}, execution_count=1)]),
        nbformat.v4.new_code_cell("d()", outputs=[nbformat.v4.new_output(
            "stream", name="stdout", text="warning: perf_analyzer did not obtain a stable measurement\n"
                                          "see servelab/triton/perf.py: the parser\n")]),
        nbformat.v4.new_markdown_cell("perf.py:3: UserWarning: in prose is not output"),
    ]
    found = noise(nbformat.v4.new_notebook(cells=cells))
    assert [f.split(":")[0] for f in found] == ["cell 0", "cell 1", "cell 2"]


def test_an_error_that_is_a_persons_to_fix_shows_its_message_not_a_traceback(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A wrong parameter, target, config or lease is shown in Jupyter as its message, marked ✗, with no
    traceback (IPython's own ``showtraceback``, as a kernel calls it); ``SERVELAB_DEBUG=1`` shows the
    traceback, its cause included."""
    from IPython.core.interactiveshell import InteractiveShell

    from provisioning.errors import ProvisioningError
    from servelab.lab.params import ParameterError
    from servelab.scaling.cluster import ScalingError
    from servelab.scaling.config import ScalingConfigError
    from servelab.targets.base import TargetError
    from servelab.triton.config import ConfigError
    from servelab.triton.model_analyzer_env import ModelAnalyzerError

    shell = InteractiveShell.instance()
    shown: list[str] = []
    monkeypatch.setattr(shell, "_showtraceback", lambda etype, evalue, stb: shown.extend(stb))
    monkeypatch.delenv("SERVELAB_DEBUG", raising=False)
    for kind in (ParameterError, TargetError, ConfigError, ScalingConfigError, ScalingError,
                 ModelAnalyzerError, ProvisioningError):
        shown.clear()
        try:
            raise kind("set lease_minutes to 1-10080\n(it was 0)")
        except kind:
            shell.showtraceback()
        assert shown == ["✗ set lease_minutes to 1-10080", "  (it was 0)"], (kind, shown)
    monkeypatch.setenv("SERVELAB_DEBUG", "1")
    shown.clear()
    try:
        try:
            raise OSError("connection refused")
        except OSError as exc:
            raise ProvisioningError("could not reach the site") from exc
    except ProvisioningError:
        shell.showtraceback()
    text = "\n".join(shown)
    assert "Traceback" in text and "OSError: connection refused" in text and "could not reach" in text
