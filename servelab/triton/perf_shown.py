"""How the lab prints a perf_analyzer command: as a student would type it in the checkout
(``shown_command``), and, for the next levels of the same run within one notebook cell, only what
changed (``said``)."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

WARM_UP_FLAGS = ("-b", "--concurrency-range", "--request-rate-range", "--request-count", "--measurement-mode",
                 "--measurement-request-count", "--max-trials")


def shown_command(argv: Sequence[str], warm_up: bool = False) -> str:
    """The command as a student would type it in the checkout: ``perf_analyzer`` (on PATH in the venv
    and the images), paths relative to the working directory and no machine's absolute paths
    (``servelab.core.paths.shown``). A warm-up is one short line."""
    from servelab.core.paths import shown

    if warm_up:
        load = [f"{flag} {argv[i + 1]}" for i, flag in enumerate(argv[:-1]) if flag in WARM_UP_FLAGS]
        return f"# warm-up first, not recorded: the same command with {' '.join(load)}"
    cwd, run = Path.cwd(), os.environ.get("SERVELAB_RESULTS")
    words = []
    for word in argv[1:]:
        path = Path(word)
        if path.is_absolute() and path.is_relative_to(cwd) and not (run and path.is_relative_to(run)):
            word = str(path.relative_to(cwd))
        words.append(word)
    return "$ " + shown(shlex.join(["perf_analyzer", *words]))  # the run's folder, the checkout, venv, home


# what perf() printed last in this notebook cell (or process): a level of the same run prints only what
# changed; each cell starts afresh, so "as above" always points into the cell's own output
_SAID: dict[str, Any] = {"argv": None, "warm_up": False, "cell": None}
LEVEL_FLAGS = ("--concurrency-range", "--request-rate-range", "--request-count",
               "--measurement-request-count", "-f")


def said(argv: Sequence[str], warm_up: bool = False) -> str | None:
    """What ``perf`` prints before running ``argv``: the whole command the first time; for the next level
    of the same run (only the load, the window and the CSV differ) the flags that changed; the warm-up
    line once (every level has one, the same way). All of it once per notebook cell: a re-run cell, or the
    next cell, prints the whole command again. None: print nothing."""
    cell = _cell()
    if _SAID["cell"] != cell:
        _SAID.update(argv=None, warm_up=False, cell=cell)
    if warm_up:
        if _SAID["warm_up"]:
            return None
        _SAID["warm_up"] = True
        return shown_command(argv, warm_up=True) + " (before every level; said once)"
    before, _SAID["argv"] = _SAID["argv"], list(argv)
    if before is None or _other_flags(before) != _other_flags(argv):
        return shown_command(argv)
    old = {flag: before[i + 1] for i, flag in enumerate(before[:-1]) if flag in LEVEL_FLAGS[:-1]}
    changed = [f"{flag} {argv[i + 1]}" for i, flag in enumerate(argv[:-1])
               if flag in LEVEL_FLAGS[:-1] and old.get(flag) != argv[i + 1]]
    if not changed:
        return "$ perf_analyzer …  # the same command as above, its own -f CSV"
    return f"$ perf_analyzer … {' '.join(changed)}  # the rest as above, its own -f CSV"


def _cell() -> int | None:
    """The running notebook cell's execution count; None outside IPython (one script is one "cell")."""
    shell = sys.modules.get("IPython")
    get = getattr(shell, "get_ipython", None) if shell else None
    ip = get() if get else None
    return getattr(ip, "execution_count", None) if ip is not None else None


def _other_flags(argv: Sequence[str]) -> list[str]:
    """``argv`` without the flags (and their values) that change from level to level."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in LEVEL_FLAGS:
            skip = True
        else:
            out.append(word)
    return out
