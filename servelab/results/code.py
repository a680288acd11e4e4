"""Which code a run ran: the checkout's commit and whether it had uncommitted changes, as ``run.json`` keeps
them (``code``), and the one line the report and the handout site show for them.

A copy without git (the upload a Chameleon node gets, a Trovi import, an unpacked zip) cannot tell its
commit: it records why, never a guess. Why and what each case records:
docs/decisions/2026-11-28-gpu-reference-and-site-third-pass.md
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from servelab.core.paths import REPO_ROOT

SHOWN_CHANGES = 20  # the changed files run.json names; it counts all of them


def _git(root: Path, *args: str) -> tuple[int, str, str]:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=20,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, "", f"git could not run ({exc})"
    return done.returncode, done.stdout, done.stderr


def code_facts(root: Path = REPO_ROOT) -> dict[str, Any]:
    """``{"commit": sha, "dirty": bool, "changed": [...], "changed_count": n}`` for the checkout at
    ``root``: dirty when a tracked file differs from the commit or a file git does not ignore is new (the
    run's own results/ are ignored). Without git, or outside a checkout of its own: commit and dirty None,
    and ``why``."""
    if shutil.which("git") is None:
        return {"commit": None, "dirty": None, "why": "git is not installed where it ran"}
    root = Path(root).resolve()
    code, top, err = _git(root, "rev-parse", "--show-toplevel")
    if code != 0 or Path(top.strip()).resolve() != root:  # a copy inside some other repository is not its own
        said = err.strip().splitlines()[-1] if err.strip() else ""
        return {"commit": None, "dirty": None,
                "why": "not a git checkout (a copy without its history: an upload, a Trovi import)"
                       + (f": {said}" if said and "not a git repository" not in said else "")}
    _, head, _ = _git(root, "rev-parse", "HEAD")
    code, status, err = _git(root, "status", "--porcelain=v1", "--untracked-files=normal")
    if code != 0:
        return {"commit": head.strip() or None, "dirty": None,
                "why": f"git status failed: {err.strip()[:200]}"}
    changed = [line[3:] for line in status.splitlines() if line.strip()]
    return {"commit": head.strip(), "dirty": bool(changed), "changed": changed[:SHOWN_CHANGES],
            "changed_count": len(changed)}


def describe_code(facts: Any) -> str:
    """run.json's ``code`` as one line: "commit e83ba46, no uncommitted changes", "commit e83ba46 with
    uncommitted changes (3 files)", "commit unknown: not a git checkout (...)", or "not recorded" for a run
    written before the runner recorded it."""
    if not isinstance(facts, dict) or not facts:
        return "not recorded"
    commit = facts.get("commit")
    if not commit:
        return f"commit unknown: {facts.get('why') or 'not recorded'}"
    short = str(commit)[:7]
    dirty = facts.get("dirty")
    if dirty is None:
        return f"commit {short}, uncommitted changes unknown ({facts.get('why', 'not recorded')})"
    if not dirty:
        return f"commit {short}, no uncommitted changes"
    count = facts.get("changed_count") or len(facts.get("changed") or [])
    return f"commit {short} with uncommitted changes ({count} file{'s' * (count != 1)})"
