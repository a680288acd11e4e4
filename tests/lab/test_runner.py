"""The headless runner: the venv's kernel, notebook selection, and a timeout that names the cell."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
import pytest

from servelab.lab import runner as lab
from servelab.lab.params import ParameterError


def test_kernel_runs_this_venvs_python() -> None:
    from jupyter_client.kernelspec import KernelSpecManager

    name = lab.ensure_kernel()
    spec = KernelSpecManager().get_kernel_spec(name)
    assert name == lab.KERNEL_NAME
    assert Path(spec.argv[0]) == Path(sys.executable)


def test_notebooks_in_lab_order() -> None:
    names = [p.stem for p in lab.notebook_paths()]
    assert names == sorted(names) and names[0].startswith("00_") and names[-1].startswith("09_")
    assert "08_teardown" in names  # 09 starts and stops its own engine: it may run after the teardown
    assert [p.stem for p in lab.notebook_paths(["3", "07"])] == ["03_fastapi", "07_dynamic_batching"]
    with pytest.raises(ParameterError, match="matches no notebook"):
        lab.notebook_paths(["42"])


def _servers() -> set[int]:
    """PIDs of FastAPI/Triton processes this session's children may have left."""
    found = set()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "fastapi_pt.app:app" in cmd or "fastapi_onnx.app:app" in cmd:
            found.add(proc.info["pid"])
    return found


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_notebook_timeout_names_the_cell_and_stops_its_services(tmp_path: Path) -> None:
    before = _servers()
    outcome = lab.run(preset="quick", only=["03"], results_base=tmp_path, notebook_timeout=4, report=False)
    failure = outcome.failure
    assert failure is not None and failure.name == "03_fastapi"
    assert "cell" in failure.error and "stopped by the runner's timeout" in failure.error
    assert failure.seconds < 120, "the notebook was stopped near its time limit"
    left = _servers() - before
    assert not left, f"processes left running after the timeout: {left}"
