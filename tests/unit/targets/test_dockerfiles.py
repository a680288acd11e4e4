"""The service images, checked statically (no Docker engine in CI): lint, inputs, what they run."""

from __future__ import annotations

import glob
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from servelab.core.paths import REPO_ROOT

SERVICES = ["fastapi_pt", "fastapi_onnx"]
HADOLINT = Path(sys.executable).parent / "hadolint"


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            pairs.append((keyword.upper(), rest.strip()))
    return pairs


def _requirement_names(path: Path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            names.add(re.split(r"[\[=<>~ ]", line)[0].lower().replace("_", "-"))
    return names


@pytest.mark.parametrize("service", SERVICES)
def test_hadolint_clean(service: str) -> None:
    result = subprocess.run([str(HADOLINT), str(REPO_ROOT / service / "Dockerfile")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("service", SERVICES)
def test_every_copy_source_exists_in_the_repo_root_context(service: str) -> None:
    instructions = _instructions(REPO_ROOT / service / "Dockerfile")
    copies = [args for keyword, args in instructions if keyword == "COPY"]
    assert copies, "the image copies nothing?"
    for args in copies:
        parts = [p for p in shlex.split(args) if not p.startswith("--")]
        for source in parts[:-1]:
            assert glob.glob(str(REPO_ROOT / source)), f"COPY source {source} not found in the repo root"
    sources = {p for args in copies for p in shlex.split(args)[:-1]}
    assert {"servelab/", f"{service}/", "constraints.txt", "constraints-gpu.txt"} <= sources, \
        "shared code and pins must go in"


@pytest.mark.parametrize("service", SERVICES)
def test_image_runs_the_same_app_as_the_local_target(service: str) -> None:
    instructions = _instructions(REPO_ROOT / service / "Dockerfile")
    cmd = [args for keyword, args in instructions if keyword == "CMD"][-1]
    command = " ".join(shlex.split(cmd.replace("[", "").replace("]", "").replace(",", " ")))
    assert f"-m servelab.serving.serve {service}.app:app" in command and "--port 8000" in command
    installs = [args for keyword, args in instructions if keyword == "RUN" and "pip install" in args]
    # constraints-gpu.txt over the rest of constraints.txt; tests/unit/targets/test_image_resolution.py
    # resolves exactly what these lines install
    assert installs and all("constraints.txt" in args and re.search(r"-c \S*constraints-gpu\.txt", args)
                            for args in installs)


@pytest.mark.parametrize("service", SERVICES)
def test_requirements_are_pinned_in_constraints(service: str) -> None:
    pinned = {re.split(r"==", line)[0].lower().replace("_", "-")
              for name in ("constraints.txt", "constraints-gpu.txt")
              for line in (REPO_ROOT / name).read_text().splitlines() if "==" in line}
    missing = _requirement_names(REPO_ROOT / service / "requirements.txt") - pinned
    assert not missing, f"not pinned in constraints.txt or constraints-gpu.txt: {missing}"


def test_onnx_image_has_no_torch() -> None:
    names = _requirement_names(REPO_ROOT / "fastapi_onnx" / "requirements.txt")
    assert not {n for n in names if n.startswith("torch")}, names


@pytest.mark.parametrize("service", SERVICES)
def test_build_context_is_kept_small(service: str) -> None:
    lines = (REPO_ROOT / service / "Dockerfile.dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    # a later "*" would exclude again everything allowed before it
    assert patterns[:1] == ["*"] and patterns.count("*") == 1, "allow-list: ignore everything first, once"
    assert not [p for p in patterns if p.startswith("!") and p[1:].strip("/") in (".venv", ".git")]
