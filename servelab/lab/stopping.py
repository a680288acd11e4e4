"""Stopping a headless lab run from outside (``python -m servelab.lab stop``, the chameleon deadline).

A run's SIGTERM becomes a KeyboardInterrupt (:func:`interrupt`): the running notebook ends as
"stopped from outside" and the run still writes run.json and its report, so what finished is kept.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any


def interrupt(signum: int, frame: Any) -> None:
    """A SIGTERM handler: the run goes on as after Ctrl-C (its notebook ends as stopped)."""
    raise KeyboardInterrupt(f"signal {signum}")


def stop_runs(proc: Path = Path("/proc"), me: int | None = None, wait: float = 0.0) -> list[int]:
    """SIGTERM every other ``python -m servelab.lab run`` on this machine (or container); their pids.

    Each then ends its notebook as stopped and still writes run.json and its report; ``wait`` seconds
    at most are waited for them to finish that (so that a fetch right after finds it written)."""
    me = os.getpid() if me is None else me
    stopped = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone, or not ours to read
        if b"servelab.lab" in argv and b"run" in argv[argv.index(b"servelab.lab"):]:
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGTERM)
                stopped.append(int(entry.name))
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and any((proc / str(pid)).exists() for pid in stopped):
        time.sleep(0.5)
    return stopped
