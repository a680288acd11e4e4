"""Triton Model Analyzer's own environment: a side venv (``.venv-ma``, ``MA_VENV``; made by
``scripts/setup.sh --model-analyzer-venv``, ``ensure_installed``) or the Jupyter image's /opt/model-analyzer,
built from the same pins (constraints-model-analyzer.txt). The search and its run:
``servelab.triton.model_analyzer``. Versions and costs: docs/decisions/2026-11-28-model-analyzer.md
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from servelab.core.notices import SaidPlainly
from servelab.core.paths import REPO_ROOT

VERSION = "1.44.0"  # constraints-model-analyzer.txt; a test holds them equal


class ModelAnalyzerError(SaidPlainly, RuntimeError):
    """Model Analyzer could not be installed or did not finish; the message is one line that says why."""


def venv_dir() -> Path:
    """The side environment: ``$MA_VENV``, else ``.venv-ma`` in the checkout (as scripts/setup.sh)."""
    return Path(os.environ.get("MA_VENV") or REPO_ROOT / ".venv-ma")


def executable() -> Path:
    return venv_dir() / "bin" / "model-analyzer"


def pins_digest() -> str:
    """What the environment was made from: the SHA-256 of constraints-model-analyzer.txt then
    requirements/model-analyzer.txt, as scripts/setup.sh and docker/Dockerfile.jupyter write it in the
    environment's stamp (a test holds the three equal)."""
    import hashlib

    return hashlib.sha256(b"".join((REPO_ROOT / name).read_bytes() for name in
                                   ("constraints-model-analyzer.txt", "requirements/model-analyzer.txt")))\
        .hexdigest()


def ensure_installed(say: Callable[[str], None] = print, timeout: float = 900.0) -> Path:
    """Make the side environment when it is missing or its pins changed (``scripts/setup.sh
    --model-analyzer-venv``: one line while it installs, one when ready); returns ``executable()``.
    An environment this user cannot write (the Jupyter image's) is used as built when its stamp matches
    the pins, else one line says to rebuild the image. One process at a time (a lock beside it); a
    failure is one ``ModelAnalyzerError`` line."""
    import fcntl

    venv = venv_dir()
    if venv.is_dir() and not os.access(venv, os.W_OK):  # an image's (/opt/model-analyzer), made at its build
        stamp = venv / ".servelab-stamp"
        if executable().is_file() and stamp.is_file() and stamp.read_text().strip() == pins_digest():
            say(f"[setup] Model Analyzer {VERSION} ready ({venv}, built into this image)")
            return executable()
        raise ModelAnalyzerError(f"{venv} holds no Model Analyzer made from this checkout's "
                                 "constraints-model-analyzer.txt and this user cannot install one there: "
                                 "rebuild the image (./lab images)")
    venv.parent.mkdir(parents=True, exist_ok=True)
    output: list[str] = []
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.Popen(["bash", str(REPO_ROOT / "scripts" / "setup.sh"), "--model-analyzer-venv"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "MA_VENV": str(venv)}, start_new_session=True)
        killed = threading.Event()

        def kill() -> None:  # bash and the pip it runs: pip holds the output pipe the loop reads
            killed.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:  # "[setup] installing …" shows while it installs
                output.append(line.rstrip())
                if line.startswith("[setup]"):
                    say(line.rstrip())
            proc.wait()
        except BaseException:  # a notebook's interrupt: no pip left installing behind it
            kill()
            killed.clear()
            raise
        finally:
            timer.cancel()
    if killed.is_set():
        raise ModelAnalyzerError(f"installing Model Analyzer took over {timeout:.0f} s and was stopped: "
                                 "run ./lab setup --model-analyzer in a terminal to see why")
    if proc.returncode != 0 or not executable().is_file():
        last = next((ln for ln in reversed(output) if ln.strip()), "")
        raise ModelAnalyzerError(f"installing Model Analyzer {VERSION} failed ({last.strip()[:200]}): run "
                                 "./lab setup --model-analyzer in a terminal to see the whole output")
    return executable()
