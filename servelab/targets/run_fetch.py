"""The instructor's run brings the node's run folder back: after the node run, and after a stop.

``fetch_run`` packs ``results/<run>/`` on the node (with the detached run's log), copies and unpacks it into
the run's folder, all within one deadline that includes the SSH connect, on a connection of its own that is
closed afterwards: a copy cut by the limit may still be reading on the last one, and paramiko's SFTP is not
thread-safe. ``tag`` names a later try's tarball apart (the cut first try's pack may still be writing its
own). Reasons: docs/decisions/2026-11-25-chameleon-robustness.md, 2026-12-01-class-day-fourth-pass.md.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from servelab.remote.fetch import NothingToFetch, fetch, pack_command, unpack
from servelab.remote.shell import NodeShell

FETCH_LIMIT_S = 10 * 60.0  # the fetch after the node run: connect, pack, copy, unpack (a few MB: seconds)
STOPPED_FETCH_S = 3 * 60.0  # the fetch after Ctrl-C/SIGTERM/SIGHUP, before the teardown: the connect too


def fetch_run(connect: Callable[[], NodeShell], remote_dir: str, run_dir: Path,
              limit_s: float = FETCH_LIMIT_S, tag: str = "") -> tuple[list[str], list[dict[str, Any]]]:
    """The names unpacked into ``run_dir`` and the node's notebooks (its ``run.json``, kept as
    ``node-run.json``). A RuntimeError when the node's run never made its folder."""
    name = run_dir.name
    tarball = f"{name}-{tag}.tar.gz" if tag else f"{name}.tar.gz"
    opened: list[NodeShell] = []

    def connected() -> NodeShell:
        opened.append(connect())
        return opened[-1]

    try:
        names = fetch(connected, pack_command(remote_dir, name, tarball), f"{remote_dir}/results/{tarball}",
                      lambda local: unpack(local, name, run_dir), limit_s, f"results/{name}")
    except NothingToFetch as exc:
        raise RuntimeError(f"{exc} to fetch (the node's run did not start)") from None
    finally:
        for shell in opened:  # ends a copy still running past its limit, or cut by a stop
            with contextlib.suppress(Exception):
                getattr(shell, "close", lambda: None)()
    notebooks: list[dict[str, Any]] = []
    node_summary = run_dir / "run.json"
    if node_summary.exists():
        notebooks = list(json.loads(node_summary.read_text()).get("notebooks", []))
        node_summary.rename(run_dir / "node-run.json")  # kept as the node wrote it
    return names, notebooks
