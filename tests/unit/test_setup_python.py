"""Set-up checks the Python first (scripts/setup.sh): one line with the version needed and how to get it,
nothing made; the bound is pyproject.toml's requires-python and the README's. Fake pythons give a version."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import tomllib

from servelab.core.paths import REPO_ROOT

SETUP = REPO_ROOT / "scripts" / "setup.sh"


def fake_python(folder: Path, name: str, version: str) -> Path:
    """A stand-in that answers every call with ``version`` (all the check asks it)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(0o755)
    return path


def sourced(call: str, path: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``call`` after sourcing setup.sh (its functions only; main runs when it is executed)."""
    prefix = f'export PATH="{path}"; ' if path is not None else ""
    return subprocess.run(["bash", "-c", f'source "{SETUP}"; {prefix}{call}'], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", **env}, timeout=60)


@pytest.mark.parametrize(("version", "fits"), [
    ("3.10.12", False), ("3.11.0", True), ("3.11.2", True), ("3.12.9", True), ("3.13.0", False),
    ("3.9.18", False), ("4.0.0", False), ("", False), ("Python", False),
])
def test_the_bound(version: str, fits: bool) -> None:
    assert (sourced(f"python_fits '{version}'").returncode == 0) is fits


def test_a_python_that_does_not_fit_stops_set_up_with_one_line(tmp_path: Path) -> None:
    python = fake_python(tmp_path / "bin", "python3", "3.10.12")
    venv = tmp_path / "venv"
    done = subprocess.run(["bash", str(SETUP), "--controller"], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": str(python), "VENV": str(venv)})
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("error: the lab needs Python >=3.11,<3.13")
    assert f"{python} is 3.10.12" in line and "apt-get install python3.11 python3.11-venv" in line
    assert "PYTHON=" in line
    assert not venv.exists()


def test_the_first_candidate_that_fits_is_taken(tmp_path: Path) -> None:
    fake_python(tmp_path / "bin", "python3.11", "3.10.12")  # e.g. a wrong link: passed over
    fake_python(tmp_path / "bin", "python3", "3.12.3")
    done = sourced("pick_python", path=str(tmp_path / "bin"))
    assert done.returncode == 0 and done.stdout.strip() == "python3", done.stderr
    (tmp_path / "bin" / "python3").unlink()
    done = sourced("pick_python", path=str(tmp_path / "bin"))
    assert done.returncode == 1
    assert "(python3.11 is 3.10.12; no python3.12; no python3)" in done.stderr


def test_a_venv_made_with_another_python_is_named(tmp_path: Path) -> None:
    python = fake_python(tmp_path / "bin", "python3", "3.12.3")
    venv = tmp_path / "venv"
    fake_python(venv / "bin", "python", "3.10.12")
    done = subprocess.run(["bash", str(SETUP), "--controller"], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": str(python), "VENV": str(venv)})
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert f"{venv} has Python 3.10.12" in line and f"rm -rf {venv}" in line


def test_pyproject_and_readme_say_the_same_bound() -> None:
    script = SETUP.read_text()
    low = re.search(r"^PYTHON_MIN=(\S+)$", script, re.M)
    below = re.search(r"^PYTHON_BELOW=(\S+)$", script, re.M)
    assert low and below
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == f">={low[1]},<{below[1]}"
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"Python {low[1]} or 3.12" in readme and below[1] == "3.13"
