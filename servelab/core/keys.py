"""A secret the lab makes for itself and keeps in a file only its owner reads (mode 600): the key that
opens Triton's model control (servelab/triton/access.py) and vLLM's API key (servelab/llm/vllm.py). A
secret is read from its file by whoever needs it and never printed, logged or put in an environment; a
shown command names its file. Why: docs/decisions/2026-12-01-exposure.md
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def key_in(path: Path) -> str:
    """The secret in ``path``, made (48 hex digits, mode 600) when the file is missing or empty."""
    path = Path(path)
    try:
        key = path.read_text().strip()
    except FileNotFoundError:
        key = ""
    if key:
        return key
    path.parent.mkdir(parents=True, exist_ok=True)
    made = secrets.token_hex(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(made)
    return made
