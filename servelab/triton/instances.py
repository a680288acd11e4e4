"""Helpers for code that runs INSIDE a Triton Python-backend stub (the lab's model.py
files): how many instances share this CPU, so each can size its thread pool.

Kept free of tritonclient and torch imports: the stub imports this module.
"""

from __future__ import annotations

import os
from typing import Any


def cpu_instances(model_config: dict[str, Any]) -> int:
    """Instances of kind CPU that the model's config asks for (at least 1)."""
    groups = model_config.get("instance_group", [])
    return sum(int(g.get("count", 1)) for g in groups if g.get("kind", "KIND_CPU") == "KIND_CPU") or 1


def running_instances(model_file: str) -> int:
    """How many stub processes of this model the server runs right now (this one included).

    Triton adds or removes instances in place when only the instance count
    changes, so the count an instance saw at start-up goes stale; the live
    count is read from /proc (siblings under the same server running this model file).
    """
    parent, wanted, count = os.getppid(), model_file.encode(), 0
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return 1
    for pid in entries:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                ppid = int(handle.read().rsplit(b")", 1)[1].split()[1])
            if ppid != parent:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if wanted in handle.read():
                    count += 1
        except (OSError, ValueError, IndexError):
            continue
    return max(count, 1)
