"""Every image's ``pip install`` resolves for the image's own Python and glibc, without Docker.

Each Dockerfile is read the way the builder reads it: ARG/ENV/WORKDIR are
followed, COPY'd files from the build context are placed in a sandbox at their
image paths, and a RUN's plain file commands (sed, grep, …: what turns
constraints.txt plus constraints-gpu.txt into the files pip gets) run there
with sh. Every ``pip install`` is then resolved with ``pip install --dry-run
--report`` for the base image's Python (x.y.z, so a ``Requires-Python
>=3.11.5`` is caught), its manylinux tags and binary wheels only, against PyPI
alone (the machine's pip configuration, find-links and extra indexes are
ignored). Each pip command is resolved on its own.

The images meant to run the engines on the GPU node must resolve no CUDA 13
package and only engine versions whose P100 (sm_60) kernels were checked
(docs/decisions/2026-11-22-gpu-image-pins.md says how). Needs PyPI (CI has it);
set SERVELAB_PYPI_INDEX to use a mirror.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
import venv
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from servelab.core.paths import REPO_ROOT

PYPI = os.environ.get("SERVELAB_PYPI_INDEX", "https://pypi.org/simple").rstrip("/")
PYPI_NAMES = {PYPI, "https://pypi.org/simple", "https://pypi.python.org/simple"}
DECISION = "docs/decisions/2026-11-22-gpu-image-pins.md"

# Every Dockerfile in the repository is one of these (a new one must be placed).
NODE_ENGINE_IMAGES = ("docker/Dockerfile.jupyter", "docker/Dockerfile.llm", "docker/Dockerfile.triton",
                      "fastapi_onnx/Dockerfile", "fastapi_pt/Dockerfile")  # Jupyter: notebook 10's replicas
OTHER_IMAGES = ("flask_app/Dockerfile",)
# Images for GPU hosts other than the P100 node, each installing from a lock of its own (not
# constraints.txt): vLLM needs compute capability 7.0 and transformers 4 (docs/decisions/2026-11-23-vllm.md).
OWN_LOCK_IMAGES = {"docker/Dockerfile.vllm": "constraints-vllm.txt"}
# A side environment's whole lock, which a pip line of any image may install from alone: notebook 11's
# Model Analyzer in the Jupyter image (/opt/model-analyzer), as .venv-ma on the local target.
SIDE_LOCKS = ("constraints-model-analyzer.txt",)
ALL_IMAGES = NODE_ENGINE_IMAGES + OTHER_IMAGES + tuple(OWN_LOCK_IMAGES)

# Base images whose tag does not say its Python: (Python x.y.z, glibc). tritonserver 24.10:
# Ubuntu 22.04 with Python 3.10 (NVIDIA's release notes), Ubuntu's python3.10 3.10.12, glibc 2.35.
KNOWN_BASES = {"nvcr.io/nvidia/tritonserver:24.10-py3": ("3.10.12", (2, 35))}
DEBIAN_GLIBC = {"bullseye": (2, 31), "bookworm": (2, 36), "trixie": (2, 41)}
PYTHON_IMAGE = re.compile(r"(?:docker\.io/)?(?:library/)?python:(\d+\.\d+\.\d+)-(?:slim-)?(\w+)"
                          r"(?:@sha256:\w+)?")

# Versions whose sm_60 kernels were seen in the wheel itself (cuobjdump / the fatbin headers of
# libtorch_cuda.so, torchvision/_C.so, libonnxruntime_providers_cuda.so, libcudnn*, libcublas*):
# see DECISION. A node image resolving another version of these fails until it is checked too.
SM60_CHECKED = {
    "torch": {"2.7.1"},
    "torchvision": {"0.22.1"},
    "onnxruntime-gpu": {"1.20.2"},
    "nvidia-cudnn-cu12": {"9.5.1.17"},
    "nvidia-cublas-cu12": {"12.6.4.1"},
}
ENGINES = ("torch", "onnxruntime-gpu")
# nvidia-* wheels that are no CUDA library
NOT_CUDA = {"nvidia-ml-py", "nvidia-pytriton"}
# pip install lines allowed to use another index: {(dockerfile, index URL): note that says how
# the line was checked}. None today: every image installs from PyPI.
OTHER_INDEX_LINES: dict[tuple[str, str], str] = {}
# base images bring these; pip keeps the installed one when it satisfies a requirement
BOOTSTRAP = {"pip", "setuptools", "wheel"}
# commands a RUN may use to prepare pip's files; they run in the sandbox
FILE_COMMANDS = {"sed", "grep", "cat", "cp", "mv", "mkdir", "touch", "echo", "printf", "sort", "rm"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ----------------------------------------------------------------------------- reading Dockerfiles
@dataclass
class PipLine:
    dockerfile: str
    lineno: int
    command: str                 # as written (continuations joined)
    base: str
    python: tuple[str, tuple[int, int]] | None
    args: list[str]              # pip install's arguments, expanded, files mapped into the sandbox
    pin_files: list[Path] = field(default_factory=list)      # the -c files (sandbox)
    requirement_files: list[Path] = field(default_factory=list)
    positional: list[str] = field(default_factory=list)
    indexes: list[str] = field(default_factory=list)


@dataclass
class Stage:
    base: str
    root: Path
    env: dict[str, str]
    workdir: str = "/"

    def path(self, image_path: str) -> Path:
        full = PurePosixPath(self.workdir, image_path)  # an absolute image_path wins
        if ".." in full.parts:
            raise ValueError(f"{image_path}: '..' in an image path")
        return self.root / str(full).lstrip("/")


@dataclass
class Image:
    dockerfile: str
    pip_lines: list[PipLine]
    envs: list[dict[str, str]]     # each stage's ENV at its end
    copies: list[tuple[str, str]]  # (context source, absolute image destination)
    runs: list[str]


def instructions(text: str) -> list[tuple[int, str, str]]:
    """(line number, INSTRUCTION, arguments), continuations joined, comment lines dropped."""
    out, current, start = [], "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        start = start or number
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        keyword, _, rest = (current + line).partition(" ")
        out.append((start, keyword.upper(), rest.strip()))
        current, start = "", 0
    return out


def substitute(text: str, values: dict[str, str]) -> str:
    """Dockerfile ``$VAR`` / ``${VAR}`` / ``${VAR:-default}`` in FROM, ENV, WORKDIR and COPY."""
    def value(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        return values.get(name) or (m.group(2) or "")
    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}|\$(\w+)", value, text)


def split_shell(text: str, separators: tuple[str, ...]) -> list[str]:
    """``text`` split at the given operators outside quotes (``&&``, ``;`` …)."""
    parts, current, quote, i = [], "", "", 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                current += text[i:i + 2]
                i += 2
                continue
            quote = "" if c == quote else quote
        elif c == "\\":
            current += text[i:i + 2]
            i += 2
            continue
        elif c in "'\"":
            quote = c
        else:
            sep = next((s for s in separators if text.startswith(s, i)), None)
            if sep:
                parts.append(current.strip())
                current, i = "", i + len(sep)
                continue
        current += c
        i += 1
    parts.append(current.strip())
    return [p for p in parts if p]


PIP_INSTALL = re.compile(r"^(?:\S*python[\d.]*\s+-m\s+pip|\S*pip[\d.]*)\s+install\b(.*)$", re.S)
TAKES_VALUE = {"-c", "--constraint", "-r", "--requirement", "-i", "--index-url", "--extra-index-url",
               "-f", "--find-links", "--progress-bar", "--root-user-action", "-t", "--target", "--prefix",
               "--root", "--upgrade-strategy", "--only-binary", "--no-binary"}
DROPPED = {"--no-cache-dir", "-U", "--upgrade", "-q", "--quiet", "-v", "--verbose", "--no-compile",
           "--compile", "--disable-pip-version-check", "--break-system-packages", "--user",
           "--no-warn-script-location", "--progress-bar", "--root-user-action", "-t", "--target",
           "--prefix", "--root", "--force-reinstall", "--ignore-installed", "-I"}
KEPT = {"--no-deps", "--pre", "--prefer-binary", "--upgrade-strategy", "--only-binary", "--no-binary"}


def shell_words(stage: Stage, text: str) -> list[str]:
    """``text`` expanded by sh as RUN would (the stage's ARG and ENV values set)."""
    done = subprocess.run(["sh", "-c", f"printf '%s\\0' {text}"], capture_output=True, text=True,
                          env={**stage.env, "PATH": os.environ["PATH"]}, timeout=30, check=True)
    return done.stdout.split("\0")[:-1]


def pip_line(dockerfile: str, lineno: int, stage: Stage, command: str, rest: str) -> PipLine:
    line = PipLine(dockerfile, lineno, command, stage.base, base_python(stage.base), [])
    words = shell_words(stage, rest)
    i = 0
    while i < len(words):
        word = words[i]
        option, has_value, value = word.partition("=") if word.startswith("--") else (word, "", "")
        if option in TAKES_VALUE and not has_value:
            i += 1
            value = words[i]
        i += 1
        if option in ("-c", "--constraint", "-r", "--requirement"):
            path = stage.path(value)
            assert path.is_file(), f"{dockerfile}:{lineno}: {value} is not in the image at that point"
            line.args += [option, str(path)]
            (line.pin_files if option in ("-c", "--constraint") else line.requirement_files).append(path)
        elif option in ("-i", "--index-url", "--extra-index-url", "-f", "--find-links"):
            line.indexes.append(value.rstrip("/"))
        elif option in KEPT:
            line.args += [option, value] if option in TAKES_VALUE else [option]
        elif option in DROPPED:
            pass
        elif option.startswith("-"):
            raise AssertionError(f"{dockerfile}:{lineno}: pip option {option} unknown to this test: "
                                 "say in it how to treat it")
        elif word.startswith((".", "/")) or ("/" in word and "://" not in word):
            raise AssertionError(f"{dockerfile}:{lineno}: {word}: a local path cannot be resolved from "
                                 "binary wheels; install the project another way (a .pth file)")
        else:
            line.positional.append(word)
            line.args.append(word)
    return line


def run_file_command(dockerfile: str, lineno: int, stage: Stage, command: str) -> None:
    """A RUN's file command (sed, grep …) on relative paths, run in the sandbox at the stage's WORKDIR."""
    if re.search(r"(^|[\s/<>'\"])\.\.(/|\s|$)", command):
        raise AssertionError(f"{dockerfile}:{lineno}: {command!r}: this test runs a RUN's file commands "
                             "in a sandbox; no '..' there")
    cwd = stage.path(".")
    cwd.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["sh", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=30,
                          env={**stage.env, "PATH": os.environ["PATH"]})
    assert done.returncode == 0, f"{dockerfile}:{lineno}: {command!r} failed: {done.stderr}"


def base_python(base: str) -> tuple[str, tuple[int, int]] | None:
    """(Python x.y.z, glibc) of a base image; None for one without Python (a stage that only copies)."""
    if base in KNOWN_BASES:
        return KNOWN_BASES[base]
    m = PYTHON_IMAGE.fullmatch(base)
    if m and m.group(2) in DEBIAN_GLIBC:
        return m.group(1), DEBIAN_GLIBC[m.group(2)]
    return None


def read_image(dockerfile: str, sandbox: Path) -> Image:
    text = (REPO_ROOT / dockerfile).read_text()
    image = Image(dockerfile, [], [], [], [])
    global_args: dict[str, str] = {}
    stages: dict[str, Stage] = {}
    stage: Stage | None = None
    for lineno, keyword, rest in instructions(text):
        if keyword == "ARG":
            name, _, default = rest.partition("=")
            if stage is None:
                global_args[name] = default
            else:
                stage.env[name] = default or global_args.get(name, "")
        elif keyword == "FROM":
            words = [w for w in rest.split() if not w.startswith("--")]
            base = substitute(words[0], global_args)
            root = sandbox / f"stage{len(stages)}"
            if base in stages:  # FROM an earlier stage
                parent = stages[base]
                shutil.copytree(parent.root, root, symlinks=True)
                stage = Stage(parent.base, root, dict(parent.env), parent.workdir)
            else:
                root.mkdir(parents=True)
                stage = Stage(base, root, {})
            stages[words[2] if len(words) > 2 and words[1].upper() == "AS" else str(len(stages))] = stage
            image.envs.append(stage.env)
        elif stage is None:
            continue
        elif keyword == "ENV":
            words = shlex.split(rest)
            pairs = ([w.partition("=") for w in words] if "=" in words[0]
                     else [(words[0], "=", " ".join(words[1:]))])
            for name, _, value in pairs:
                stage.env[name] = substitute(value, stage.env)
        elif keyword == "WORKDIR":
            stage.workdir = str(PurePosixPath(stage.workdir, substitute(rest, stage.env)))
            stage.path(".").mkdir(parents=True, exist_ok=True)
        elif keyword in ("COPY", "ADD"):
            words = json.loads(rest) if rest.startswith("[") else shlex.split(rest)
            if any(w.startswith("--from") for w in words):
                continue
            paths = [substitute(w, stage.env) for w in words if not w.startswith("--")]
            *sources, dest = paths
            for source in sources:
                image.copies.append((source, str(PurePosixPath(stage.workdir, dest))))
                matches = sorted(REPO_ROOT.glob(source.rstrip("/"))) or [REPO_ROOT / source]
                for src in matches:
                    assert src.exists(), f"{dockerfile}:{lineno}: COPY {source}: not in the build context"
                    into_dir = dest.endswith("/") or len(sources) > 1 or len(matches) > 1 or src.is_dir()
                    target = stage.path(dest) / (src.name if into_dir and src.is_file() else "")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if src.is_dir():
                        shutil.copytree(src, target, dirs_exist_ok=True,
                                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                    else:
                        shutil.copyfile(src, target)
        elif keyword == "RUN":
            while rest.startswith("--"):
                rest = rest.split(None, 1)[1]
            if rest.startswith("["):
                rest = shlex.join(json.loads(rest))
            image.runs.append(rest)
            for command in split_shell(rest, ("&&", "||", ";")):
                m = PIP_INSTALL.match(command)
                if m:
                    image.pip_lines.append(pip_line(dockerfile, lineno, stage, command, m.group(1)))
                elif all(shlex.split(part)[0] in FILE_COMMANDS for part in split_shell(command, ("|",))) \
                        and not re.search(r"(^|[\s<>'\"])/", command):
                    run_file_command(dockerfile, lineno, stage, command)
                # anything else (apt-get, useradd, absolute paths) is not run here
    return image


def dockerfiles() -> list[str]:
    found = []
    for folder, subfolders, files in os.walk(REPO_ROOT):
        subfolders[:] = [s for s in subfolders if not s.startswith((".", "__"))]  # .venv, .git
        found += [(Path(folder) / f).relative_to(REPO_ROOT).as_posix() for f in files
                  if f.startswith("Dockerfile") and not f.endswith(".dockerignore")]
    return sorted(found)


# ----------------------------------------------------------------------------- resolving
@dataclass
class Resolution:
    line: PipLine
    returncode: int
    output: str
    installs: list[dict[str, Any]]

    @property
    def versions(self) -> dict[str, str]:
        return {canonical(i["metadata"]["name"]): i["metadata"]["version"] for i in self.installs}


def platforms(glibc: tuple[int, int]) -> list[str]:
    tags = [f"manylinux_2_{minor}_x86_64" for minor in range(glibc[1], 4, -1)]
    tags += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
    return [arg for tag in tags for arg in ("--platform", tag)]


def pip_env() -> dict[str, str]:
    """This process's environment without pip settings (find-links, extra indexes, config files)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_") or k in ("PIP_CERT", "PIP_DEFAULT_TIMEOUT")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def resolve(args: list[str], python: str, glibc: tuple[int, int], report: Path,
            index: list[str] | None = None) -> tuple[int, str, list[dict[str, Any]]]:
    major, minor = python.split(".")[:2]
    # fast-deps: pip reads a wheel's METADATA with HTTP range requests where the index serves no
    # .metadata file (as for torch) instead of downloading the whole wheel for every image. The
    # same resolution, in half the time: docs/decisions/2026-11-23-suite-time.md
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--use-feature=fast-deps",
               "--report", str(report),
               "--ignore-installed", "--only-binary=:all:", "--python-version", python,
               "--implementation", "cp", "--abi", f"cp{major}{minor}", *platforms(glibc),
               *(index if index is not None else ["--index-url", PYPI]), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=pip_env())
    installs = json.loads(report.read_text())["install"] if done.returncode == 0 else []
    return done.returncode, done.stdout + done.stderr, installs


def resolve_line(line: PipLine, report: Path) -> Resolution:
    assert line.python, f"{line.dockerfile}:{line.lineno}: no Python known for {line.base}"
    code, output, installs = resolve(line.args, *line.python, report)
    return Resolution(line, code, output, installs)


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Image | Exception]:
    read: dict[str, Image | Exception] = {}
    for dockerfile in dockerfiles():
        try:
            read[dockerfile] = read_image(dockerfile, tmp_path_factory.mktemp("sandbox"))
        except (AssertionError, ValueError, subprocess.CalledProcessError) as exc:
            read[dockerfile] = exc
    return read


def image(images: dict[str, Image | Exception], dockerfile: str) -> Image:
    found = images[dockerfile]
    if isinstance(found, Exception):
        raise AssertionError(f"{dockerfile} cannot be read: {found}") from found
    return found


@pytest.fixture(scope="module")
def resolutions(images: dict[str, Image | Exception],
                tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Resolution]]:
    try:
        urllib.request.urlopen(f"{PYPI}/pip/", timeout=30).close()
    except OSError as exc:
        pytest.fail(f"{PYPI} cannot be reached ({exc}): resolving the images' installs needs PyPI "
                    "(or a mirror in SERVELAB_PYPI_INDEX)")
    lines = [line for found in images.values() if isinstance(found, Image) for line in found.pip_lines
             if line.python and not line.indexes]
    reports = tmp_path_factory.mktemp("reports")
    with ThreadPoolExecutor(max_workers=len(lines) or 1) as pool:
        done = list(pool.map(lambda i: resolve_line(lines[i], reports / f"{i}.json"), range(len(lines))))
    by_file: dict[str, list[Resolution]] = {}
    for resolution in done:
        by_file.setdefault(resolution.line.dockerfile, []).append(resolution)
    return by_file


# ----------------------------------------------------------------------------- what must hold
def pinned_names(paths: list[Path]) -> set[str]:
    names = set()
    for path in paths:
        for line in path.read_text().splitlines():
            m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==", line.strip())
            if m:
                names.add(canonical(m.group(1)))
    return names


def cuda13(name: str, version: str) -> bool:
    """A package of the CUDA 13 generation (no sm_60 kernels anywhere in it)."""
    if name.endswith("-cu13"):
        return True
    if name.startswith("nvidia-") and name not in NOT_CUDA and not re.search(r"-cu1[0-2]$", name):
        return True  # CUDA 13's libraries dropped the -cuXX suffix (nvidia-cublas 13.x, nvidia-cufft 12.x)
    return name in ("cuda-toolkit", "cuda-bindings", "cuda-python") and int(version.split(".")[0]) >= 13


def p100_problems(versions: dict[str, str]) -> list[str]:
    """Why an image with these packages would not run its engines on a P100 (empty: it would)."""
    problems = [f"{n}=={v} is a CUDA 13 package" for n, v in sorted(versions.items()) if cuda13(n, v)]
    problems += [f"{n}=={versions[n]}: sm_60 kernels not checked (checked: {sorted(ok)}; see {DECISION})"
                 for n, ok in SM60_CHECKED.items() if n in versions and versions[n] not in ok]
    if "onnxruntime" in versions and "onnxruntime-gpu" in versions:
        problems.append("onnxruntime and onnxruntime-gpu both install the onnxruntime module")
    return problems


def test_every_dockerfile_is_placed() -> None:
    assert dockerfiles() == sorted(ALL_IMAGES), ("a new Dockerfile: add it to NODE_ENGINE_IMAGES (runs "
                                                 "torch/onnxruntime on the node), OTHER_IMAGES or "
                                                 "OWN_LOCK_IMAGES")


@pytest.mark.parametrize("dockerfile", ALL_IMAGES)
def test_base_image_names_its_python_and_every_line_is_read(images: dict[str, Image | Exception],
                                                            dockerfile: str) -> None:
    found = image(images, dockerfile)
    assert found.pip_lines, f"{dockerfile} installs nothing with pip?"
    for line in found.pip_lines:
        assert line.python, (f"{dockerfile}:{line.lineno}: {line.base} does not say its Python x.y.z: pin "
                             "it (e.g. python:3.11.14-slim-bookworm) or add it to KNOWN_BASES")


@pytest.mark.slow
@pytest.mark.parametrize("dockerfile", ALL_IMAGES)
def test_every_pip_install_resolves_for_the_image_python(images: dict[str, Image | Exception],
                                                         resolutions: dict[str, list[Resolution]],
                                                         dockerfile: str) -> None:
    found = image(images, dockerfile)
    resolved = {id(r.line): r for r in resolutions.get(dockerfile, [])}
    for line in found.pip_lines:
        assert line.python, f"{dockerfile}:{line.lineno}: {line.base}: which Python?"
        where = f"{dockerfile}:{line.lineno} (Python {line.python[0]}, glibc {line.python[1]})"
        if line.indexes:
            continue  # test_other_indexes_are_named_and_noted
        result = resolved[id(line)]
        assert result.returncode == 0, f"{where}: {line.command}\n{result.output[-3000:]}"
        sdists = [i["download_info"]["url"] for i in result.installs
                  if not i["download_info"]["url"].endswith(".whl")]
        assert not sdists, f"{where}: not binary wheels: {sdists}"
        floating = sorted(set(result.versions) - pinned_names(line.pin_files) - BOOTSTRAP)
        assert not floating, f"{where}: resolved but pinned by none of its -c files: {floating}"
        assert not [f"{n}=={v}" for n, v in result.versions.items() if cuda13(n, v)], \
            f"{where}: CUDA 13 packages, which have no kernels for the node's P100s (nor for a V100)"


@pytest.mark.slow
@pytest.mark.parametrize("dockerfile", NODE_ENGINE_IMAGES)
def test_node_images_run_their_engines_on_the_p100(resolutions: dict[str, list[Resolution]],
                                                   dockerfile: str) -> None:
    done = resolutions.get(dockerfile, [])
    assert done and all(r.returncode == 0 for r in done), "unresolved: see test_every_pip_install_resolves"
    versions = {n: v for r in done for n, v in r.versions.items()}
    assert set(ENGINES) & set(versions), f"{dockerfile} is a node engine image without an engine?"
    assert p100_problems(versions) == [], dockerfile


def test_the_p100_check_fails_on_constraints_txt_engines() -> None:
    """What the FastAPI images resolved before (constraints.txt alone: CUDA 13 builds) is refused."""
    pins = {}
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonical(name)] = version.strip()
    problems = "\n".join(p100_problems({n: pins[n] for n in pins if n.startswith(("torch", "onnx", "nvidia",
                                                                                      "cuda"))}))
    for expected in ("torch==", "onnxruntime-gpu==", "nvidia-cublas==13", "nvidia-cudnn-cu13==",
                     "cuda-toolkit==13"):
        assert expected in problems
    assert "nvidia-cuda-runtime-cu12" not in problems and "nvidia-ml-py" not in problems


@pytest.mark.parametrize("dockerfile", ALL_IMAGES)
def test_versions_live_in_the_constraints_files(images: dict[str, Image | Exception],
                                                dockerfile: str) -> None:
    """No version in a Dockerfile or requirements file; the node images' GPU pins come from
    constraints-gpu.txt (the one place for pins that differ from constraints.txt)."""
    found = image(images, dockerfile)
    for line in found.pip_lines:
        specs = [p for p in line.positional if re.search(r"[=<>~!@;]", p)]
        for path in line.requirement_files:
            specs += [x for x in (y.split("#")[0].strip() for y in path.read_text().splitlines())
                      if re.search(r"[=<>~!@;]", x)]
        assert not specs, f"{dockerfile}:{line.lineno}: versions outside the constraints files: {specs}"
        pins = [p.read_text() for p in line.pin_files]
        if any(pins == [(REPO_ROOT / lock).read_text()] for lock in SIDE_LOCKS):
            continue
        if dockerfile in OWN_LOCK_IMAGES:
            assert pins == [(REPO_ROOT / OWN_LOCK_IMAGES[dockerfile]).read_text()], \
                f"{dockerfile}:{line.lineno}: -c {OWN_LOCK_IMAGES[dockerfile]} alone"
            continue
        assert (REPO_ROOT / "constraints.txt").read_text() in pins or dockerfile in NODE_ENGINE_IMAGES, \
            f"{dockerfile}:{line.lineno}: -c constraints.txt missing"
        if dockerfile in NODE_ENGINE_IMAGES:
            assert (REPO_ROOT / "constraints-gpu.txt").read_text() in pins, \
                f"{dockerfile}:{line.lineno}: -c constraints-gpu.txt missing"
            shared = pinned_names(line.pin_files) - pinned_names([REPO_ROOT / "constraints-gpu.txt"])
            assert shared <= pinned_names([REPO_ROOT / "constraints.txt"]), "a pin from neither file"
            assert len(shared) > 100, "the rest of constraints.txt must come along"


@pytest.mark.parametrize("dockerfile", ALL_IMAGES)
def test_other_indexes_are_named_and_noted(images: dict[str, Image | Exception], dockerfile: str) -> None:
    for line in image(images, dockerfile).pip_lines:
        for index in line.indexes:
            if index in PYPI_NAMES:
                continue
            note = OTHER_INDEX_LINES.get((dockerfile, index))
            assert note, (f"{dockerfile}:{line.lineno} installs from {index}, which this test cannot "
                          "resolve: name it in OTHER_INDEX_LINES with a note on how it was checked")
            assert index in (REPO_ROOT / note).read_text(), f"{note} does not mention {index}"


def test_pip_is_asked_for_the_full_python_version(tmp_path: Path) -> None:
    """A Requires-Python >=3.11.5 wheel is refused for 3.11.4 and taken for 3.11.14."""
    wheel = tmp_path / "needs_3115-1.0-py3-none-any.whl"
    info = "needs_3115-1.0.dist-info"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: needs-3115\nVersion: 1.0\n"
                                        "Requires-Python: >=3.11.5\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
                                     "Tag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    local = ["--no-index", "--find-links", str(tmp_path)]
    old, _, _ = resolve(["needs-3115"], "3.11.4", (2, 36), tmp_path / "old.json", local)
    new, output, installs = resolve(["needs-3115"], "3.11.14", (2, 36), tmp_path / "new.json", local)
    assert old != 0
    assert new == 0 and [i["metadata"]["version"] for i in installs] == ["1.0"], output


def test_onnx_image_puts_its_cuda_libraries_on_the_loader_path(
        images: dict[str, Image | Exception]) -> None:
    """onnxruntime-gpu 1.20 has no preload_dlls(): every nvidia-*-cu12 wheel the ONNX image installs
    must have its lib folder on LD_LIBRARY_PATH, in the image Python's site-packages."""
    found = image(images, "fastapi_onnx/Dockerfile")
    [line] = found.pip_lines
    assert line.python
    python = ".".join(line.python[0].split(".")[:2])
    wheels = [canonical(n) for path in line.requirement_files for n in re.findall(
        r"^(nvidia-[\w-]+-cu12)\s*$", path.read_text(), re.M)]
    assert {"nvidia-cublas-cu12", "nvidia-cudnn-cu12", "nvidia-cuda-runtime-cu12"} <= set(wheels)
    loader_path = found.envs[-1].get("LD_LIBRARY_PATH", "").split(":")
    for wheel in wheels:
        folder = wheel.removeprefix("nvidia-").removesuffix("-cu12").replace("-", "_")
        assert f"/usr/local/lib/python{python}/site-packages/nvidia/{folder}/lib" in loader_path, wheel


def test_triton_image_points_the_stub_at_servelab(images: dict[str, Image | Exception],
                                                   tmp_path: Path) -> None:
    """The Python backend's stub ignores PYTHONPATH; a .pth file in its Python's site-packages works.

    The image's own command runs here in a fresh venv (the image's folder swapped for this checkout),
    then ``python -I`` (which ignores PYTHONPATH too) must import this checkout's servelab."""
    found = image(images, "docker/Dockerfile.triton")
    [destination] = [dest for source, dest in found.copies if source.rstrip("/") == "servelab"]
    assert PurePosixPath(destination).name == "servelab", destination
    root = str(PurePosixPath(destination).parent)
    assert all("PYTHONPATH" not in env for env in found.envs), "the stub would not see it anyway"
    [run] = [r for r in found.runs if ".pth" in r]
    code = shlex.split(run)[shlex.split(run).index("-c") + 1]
    assert root in code
    venv.EnvBuilder(with_pip=False).create(tmp_path / "venv")
    python = tmp_path / "venv" / "bin" / "python"
    subprocess.run([str(python), "-c", code.replace(root, str(REPO_ROOT))], check=True, timeout=60)
    done = subprocess.run([str(python), "-I", "-c", "import servelab; print(servelab.__file__)"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).resolve() == (REPO_ROOT / "servelab" / "__init__.py").resolve()


@pytest.mark.slow
def test_vllm_image_gets_transformers_4_and_cuda_12(resolutions: dict[str, list[Resolution]]) -> None:
    """vLLM 0.10 runs on transformers 4 (the lab model is saved readable by it: servelab.llm.model) and
    on CUDA 12 builds, which keep the V100's sm_70 kernels (CUDA 13 dropped compute capability 7.0)."""
    [done] = resolutions["docker/Dockerfile.vllm"]
    assert done.returncode == 0, done.output[-3000:]
    versions = done.versions
    assert versions["vllm"] == "0.10.1.1" and versions["transformers"].startswith("4."), versions
    assert versions["torch"] == "2.7.1" and "nvidia-cublas-cu12" in versions
