"""Notebooks 01, 02 and 08 run in a kernel like Chameleon's Jupyter: started in notebooks/, nothing of the lab
installed, only python-chi's own requirements (the hub's packages); their first cell installs the rest.

The hub's packages are a folder cached under test-artifacts/ (keyed by constraints.txt, python-chi's
requirements and the Python version; about 13 s to build). Each run makes a fresh venv that sees that folder
through a ``.pth`` file, so the first cell really installs python-chi every time, into the fresh venv only.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import papermill as pm
import pytest

from servelab.core.lab_steps import LAB_STEPS
from servelab.core.paths import REPO_ROOT
from servelab.lab import bootstrap

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # first run about 27 s, later ones 15 s

NOTEBOOKS = tuple(s.name for s in LAB_STEPS if s.where == "hub")  # the registry's: 01, 02 and 08
CACHE = REPO_ROOT / "test-artifacts" / "venvs"


def hub_requirements() -> list[str]:
    """What the pinned python-chi requires (names only), plus a kernel and pip: what a hub's kernel has."""
    requires = importlib.metadata.requires("python-chi") or []
    names = {r.split(";")[0].split("[")[0].strip() for r in requires if "extra ==" not in r}
    return sorted(names | {"ipykernel", "pip"})


@pytest.fixture(scope="module")
def hub_packages() -> Path:
    """python-chi's own requirements at constraints.txt's versions, installed in a folder (pip --target)."""
    requirements = hub_requirements()
    parts = [(REPO_ROOT / "constraints.txt").read_bytes(), " ".join(requirements).encode(),
             sys.version.encode()]
    key = hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]
    folder = CACHE / f"chameleon-hub-{key}"
    if (folder / ".complete").is_file():
        return folder
    CACHE.mkdir(parents=True, exist_ok=True)
    for stale in CACHE.glob("chameleon-hub-*"):
        if stale != folder:
            shutil.rmtree(stale, ignore_errors=True)
    building = CACHE / f".building-{key}-{os.getpid()}"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check"]
    done = subprocess.run([*pip, "--target", str(building), "-c", "constraints.txt", *requirements],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=480)
    assert done.returncode == 0, done.stderr[-3000:]
    (building / ".complete").write_text(" ".join(requirements) + "\n")
    try:
        building.rename(folder)
    except OSError:  # another run finished the same folder first
        shutil.rmtree(building, ignore_errors=True)
    return folder


@pytest.fixture
def hub_kernel(hub_packages: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh venv that sees the hub's packages, registered as the Jupyter kernel "hub"; its python."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "hub.pth").write_text(f"{hub_packages}\n")  # pip itself comes from there, like ipykernel
    spec = tmp_path / "jupyter" / "kernels" / "hub"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps(
        {"argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
         "display_name": "hub", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("SERVELAB_RESULTS", str(tmp_path / "results"))
    for variable in ("PYTHONPATH", "SERVELAB_ROOT", "SERVELAB_TARGET", "VIRTUAL_ENV"):
        monkeypatch.delenv(variable, raising=False)
    return python


def first_cell_output(executed: Path) -> str:
    nb = nbformat.read(executed, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert "bootstrap.ensure()" in first.source
    return "".join(o.get("text", "") for o in first.outputs)


def site_packages(python: Path) -> list[str]:
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return sorted(p.name for p in Path(purelib).iterdir() if p.name != "__pycache__")


def test_provisioning_notebooks_run_where_nothing_of_the_lab_is_installed(hub_kernel: Path,
                                                                          tmp_path: Path) -> None:
    pins = bootstrap.pins()
    before = site_packages(hub_kernel)
    assert before == ["hub.pth"]
    outputs, seconds = {}, {}
    for name in NOTEBOOKS:  # as ./lab run does: papermill, the target passed, plan mode
        start = time.monotonic()
        pm.execute_notebook(str(REPO_ROOT / "notebooks" / f"{name}.ipynb"), str(tmp_path / f"{name}.ipynb"),
                            parameters={"target": "local", "preset": "quick"}, kernel_name="hub",
                            cwd=str(REPO_ROOT / "notebooks"), progress_bar=False, start_timeout=120)
        seconds[name] = time.monotonic() - start
        outputs[name] = first_cell_output(tmp_path / f"{name}.ipynb")
        if name == NOTEBOOKS[0]:
            after_install = site_packages(hub_kernel)
    first = outputs[NOTEBOOKS[0]]
    assert f"$ {hub_kernel} -m pip install" in first, first
    assert "Successfully installed" in first and f"python-chi-{pins['python-chi']}" in first, first
    versions = ", ".join(f"{name} {version}" for name, version in pins.items())
    assert "Installed in" in first and versions in first, first
    for name in NOTEBOOKS[1:]:  # later runs only check: no pip, nothing changed
        assert f"Already installed, nothing to do: {versions}" in outputs[name], outputs[name]
        assert seconds[name] < 60
    assert site_packages(hub_kernel) == after_install
    assert {f"python_chi-{pins['python-chi']}.dist-info", "chi", "blazarclient"} <= set(after_install)
    assert not list(hub_kernel.parents[1].glob("**/servelab*")), "the lab itself is never installed"
    # the installed python-chi imports as provisioning uses it (it needs python-blazarclient)
    probe = "import sys; sys.path.insert(0, '..'); from provisioning.chi_api import real_chi; real_chi()"
    done = subprocess.run([str(hub_kernel), "-c", probe], cwd=REPO_ROOT / "notebooks", capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
