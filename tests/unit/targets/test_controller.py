"""The instructor's machine for ``./lab run --target chameleon`` needs only the controller's packages
(requirements/controller.txt: python-chi and the report), no torch, Triton or browser: the lab runs on
the node. Checked in a fresh venv made from those requirements alone, and in the ``lab`` script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from servelab.core.paths import REPO_ROOT
from tests.unit.lab_script import stubbed_lab

pytestmark = pytest.mark.slow  # builds a small venv (about 30 s)


@pytest.fixture(scope="module")
def controller_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("controller") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # --no-compile: byte-compiling every installed module was a third of this fixture's time
    pip = [str(python), "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check"]
    for extra in (["-c", "constraints.txt", "-r", "requirements/controller.txt"], ["--no-deps", "-e", "."]):
        done = subprocess.run([*pip, *extra], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    return python


def test_the_chameleon_run_needs_only_the_controller_packages(controller_python: Path,
                                                               tmp_path: Path) -> None:
    heavy = ["torch", "onnxruntime", "tritonclient", "fastapi", "flask", "papermill", "playwright"]
    probe = ("import importlib.util as u, json; "
             f"print(json.dumps([m for m in {heavy!r} if u.find_spec(m)]))")
    found = subprocess.run([str(controller_python), "-c", probe], capture_output=True, text=True, timeout=60)
    assert json.loads(found.stdout) == [], "the controller venv must not carry the lab's heavy parts"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "SERVELAB_RESULTS": str(tmp_path / "runs"),
           "CHI_PROJECT": "CHI-123456"}  # no OS_* credentials: the preflight stops, nothing is created
    done = subprocess.run([str(controller_python), "-m", "servelab.lab", "run", "--target", "chameleon"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED: preflight: no Chameleon credentials in the environment" in done.stderr
    assert "Traceback" not in done.stderr
    [run_dir] = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "run.json").read_text())
    assert [s["phase"] for s in summary["phases"]] == ["preflight"] and summary["ok"] is False
    assert "preflight" in (run_dir / "report.html").read_text()  # the report is drawn here, without torch


def test_lab_sets_up_only_the_controller_for_chameleon(tmp_path: Path) -> None:
    lab, log, env = stubbed_lab(tmp_path)
    for args, setup in ((["--target", "chameleon", "--keep-node"], "setup --controller"),
                        (["--target=chameleon"], "setup --controller"), (["--preset", "quick"], "setup ")):
        log.write_text("")
        done = subprocess.run(["bash", str(lab), "run", *args], env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        lines = [line.rstrip() for line in log.read_text().splitlines()]
        assert lines == [setup.rstrip(), f"python -m servelab.lab run {' '.join(args)}"]
