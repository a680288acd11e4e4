"""Where things live in a checkout; every location can be overridden by env."""

from __future__ import annotations

import os
from pathlib import Path

from servelab.core.lab_steps import core_on_the_node, on_the_node

REPO_ROOT: Path = Path(os.environ.get("SERVELAB_ROOT", Path(__file__).resolve().parents[2]))
ARTIFACTS_DIR: Path = Path(os.environ.get("SERVELAB_ARTIFACTS", REPO_ROOT / "artifacts"))
RESULTS_DIR: Path = REPO_ROOT / "results"  # runs go here unless $SERVELAB_RESULTS (results.store) says
STAGING_DIR: Path = REPO_ROOT / "models_staging"
SAMPLES_DIR: Path = REPO_ROOT / "data" / "samples"

PT_WEIGHTS_NAME = "food11.pth"
ONNX_NAME = "food11.onnx"
MANIFEST_NAME = "food11.json"

BUILD_COMMAND = "python -m servelab.core.model build"

# Where each notebook runs on Chameleon, said the same way everywhere, from the registry of the lab's steps
# (servelab.core.lab_steps): these in the node's Jupyter, the rest in the hub's
# (docs/decisions/2026-11-22-gpu-node-where-things-run.md); the core a lease must hold, the rest optional
ON_THE_NODE = on_the_node()
CORE_ON_THE_NODE = core_on_the_node()


def notebook_numbers(text: str) -> list[str]:
    """The notebook numbers a range text names, in order (``lab_steps.ranges`` reversed)."""
    import re

    numbers: list[str] = []
    for first, last in re.findall(r"(\d{2})(?:\s*[–-]\s*(\d{2}))?", text):
        numbers += [f"{n:02d}" for n in range(int(first), int(last or first) + 1)]
    return numbers


def shown(text: str) -> str:
    """``text`` (a command, a path) as a notebook prints it: no machine's absolute paths. The run's
    results folder (``$SERVELAB_RESULTS``) reads ``$SERVELAB_RESULTS``, the interpreter's virtual
    environment ``.venv`` (a system Python's prefix, /usr say, stays as it is: its paths are real), the
    checkout's files relative to it (the checkout itself ``.``), the home folder ``~``."""
    import re
    import sys

    venv = [(sys.prefix, ".venv"), (os.path.realpath(sys.prefix), ".venv")] if sys.prefix != sys.base_prefix \
        else []
    prefixes = [(os.environ.get("SERVELAB_RESULTS") or "", "$SERVELAB_RESULTS"), *venv, (str(REPO_ROOT), "."),
                (os.path.expanduser("~"), "~")]
    for prefix, short in sorted({p for p in prefixes if len(p[0]) > 1}, key=lambda p: -len(p[0])):
        start = r"(?<![\w./~$-])" + re.escape(prefix.rstrip("/"))
        text = re.sub(start + "/", "" if short == "." else short + "/", text)  # a path under it
        text = re.sub(start + r"(?![\w./-])", short, text)  # the folder itself
    return text
