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
    from servelab.core.lab_steps import LAB_STEPS

    names = [p.stem for p in lab.notebook_paths()]
    assert names == sorted(names) == [s.name for s in LAB_STEPS]  # the registry's steps, in its order
    assert "08_teardown" in names  # the optional ones start and stop their own engines: they may follow it
    ran = [p.stem for p in lab.run_order(lab.notebook_paths())]
    assert ran[-1] == "08_teardown" and ran[:-1] == [n for n in names if n != "08_teardown"]
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


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_stopped_run_still_writes_its_record_and_stops_its_services(tmp_path: Path) -> None:
    """SIGTERM (`python -m servelab.lab stop`, the chameleon run's deadline) ends the notebook as
    stopped; run.json and the report are still written, so what ran is still fetched and read."""
    import json
    import signal
    import subprocess
    import time

    before = _servers()
    run_dir = tmp_path / "run"
    child = subprocess.Popen([sys.executable, "-m", "servelab.lab", "run", "--only", "03", "--run-dir",
                              str(run_dir)], cwd=lab.REPO_ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not (run_dir / "03_fastapi.ipynb").is_file() and time.monotonic() < deadline:
        time.sleep(0.5)  # papermill writes the notebook as its cells run
    time.sleep(3)
    child.send_signal(signal.SIGTERM)
    output, _ = child.communicate(timeout=120)
    assert child.returncode == 1, output
    record = json.loads((run_dir / "run.json").read_text())
    assert [n["name"] for n in record["notebooks"]] == ["03_fastapi"]
    assert "stopped from outside (SIGTERM or Ctrl-C)" in record["notebooks"][0]["error"]
    assert (run_dir / "report.html").is_file()
    left = _servers() - before
    assert not left, f"processes left running after the stop: {left}"


def test_stop_signals_only_lab_runs(tmp_path: Path) -> None:
    import signal
    import subprocess

    run_like = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "servelab.lab", "run"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "servelab.lab", "report"])
    try:
        proc = tmp_path / "proc"  # a /proc with just these two (the real one may hold a real run)
        for child in (run_like, other):
            (proc / str(child.pid)).mkdir(parents=True)
            argv = b"\0".join(str(a).encode() for a in child.args)
            (proc / str(child.pid) / "cmdline").write_bytes(argv + b"\0")
        from servelab.lab.stopping import stop_runs

        assert stop_runs(proc) == [run_like.pid]
        assert run_like.wait(timeout=10) == -signal.SIGTERM
        assert other.poll() is None
    finally:
        for child in (run_like, other):
            child.kill()
            child.wait()
