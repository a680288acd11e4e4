"""A notebook executed as the headless runner executes it: the lab's warnings are plain lines in the
cell's output, and the kernel's start prints nothing on the instructor's terminal."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from servelab.lab import runner as lab
from tests.lab.notebook_noise import noise

pytestmark = pytest.mark.slow  # a kernel start


def test_lab_warnings_are_plain_lines_and_the_kernel_start_is_quiet(tmp_path: Path,
                                                                   capfd: pytest.CaptureFixture[str]) -> None:
    cells = [
        "import warnings\nfrom servelab.lab import params\n"
        "from servelab.triton.perf_csv import UnsettledWarning",
        "from ipykernel import get_connection_info\n"
        "print('channels encrypted:', 'curve_publickey' in get_connection_info(unpack=True))",
        "for _ in range(2):\n"
        "    warnings.warn('food_classifier at concurrency 16 did not settle', UnsettledWarning)",
        "warnings.warn('not the lab', UserWarning)",
    ]
    path = tmp_path / "99_check.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    kernel = lab.ensure_kernel()
    outcome = lab.run_notebook(path, run_dir, {}, kernel, cell_timeout=120, notebook_timeout=300)
    assert outcome.ok, outcome.error

    executed = nbformat.read(outcome.output, as_version=4)
    printed = [{name: "".join(o.text for o in c.outputs if o.get("name") == name)
                for name in ("stdout", "stderr")} for c in executed.cells]
    assert printed[1] == {"stdout": "channels encrypted: True\n", "stderr": ""}
    unsettled = "warning: food_classifier at concurrency 16 did not settle\n"
    assert printed[2] == {"stdout": unsettled * 2, "stderr": ""}
    found = noise(executed)  # the one warning that is not the lab's: Python's form, on stderr
    assert len(found) == 1 and found[0].startswith("cell 3: ") and "UserWarning: not the lab" in found[0]

    terminal = capfd.readouterr()  # the kernel writes its log to the runner's stderr, the terminal
    assert "without encryption" not in terminal.err and "plain text" not in terminal.err, terminal.err
