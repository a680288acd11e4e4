"""A student's work on the node, brought to the hub: the node's ``results/`` and the notebooks saved there.

The node's notebooks (``servelab.core.lab_steps``) run in its Jupyter: their measurements go to
``results/`` in the lab's folder on the node, and the student saves the notebooks there. Both go with
the server, at 08's teardown or when the lease ends mid-lab, unless copied here first.
``fetch_node_work`` packs them on the node, copies the tarball and unpacks it into
``results/from-node/`` here (``results/`` and ``notebooks/`` as on the node; a later fetch overwrites
the files it brings again, and a file deleted on the node stays here), all within a time limit, and
prints what it brought. 08 runs it before anything is deleted; any of the lab's notebooks here can run
``FETCH_LINE`` while the lease runs (02 prints it). The packing and the time limit are the instructor's
fetch's (``servelab.remote.fetch``).
Reasons: docs/decisions/2026-11-25-class-day-provisioning.md.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provisioning import messages as msg
from provisioning.chi_api import ChiApi
from provisioning.config import ChameleonConfig, ProvisioningError
from provisioning.errors import describe, step
from provisioning.server import find_server
from servelab.core.paths import shown
from servelab.remote.fetch import (
    WORK_FOLDERS,
    WORK_TARBALL,
    NothingToFetch,
    fetch,
    pack_work_command,
    unpack_work,
)
from servelab.remote.shell import FabricShell, NodeShell
from servelab.results.store import results_dir

FETCH_LIMIT_S = 5 * 60.0  # pack, copy, unpack: a class's results and notebooks are tens of MB at most
FROM_NODE = "from-node"  # under the hub's results/
FETCH_LINE = "import provisioning; provisioning.fetch_work()"  # with the defaults (fetch_line: 02's settings)
SKIP_FETCH = "fetch_first = False in notebook 08's parameters"  # the way past a fetch that cannot succeed


def fetch_line(config: Any = None) -> str:
    """The line 02 prints, which any of the lab's notebooks here can run while the lease runs: with 02's
    project, site and server (a ``ChameleonConfig``), so that it finds the same node whatever the
    notebook's own settings; ``FETCH_LINE`` without one."""
    if config is None:
        return FETCH_LINE
    settings = ", ".join(f"{key}={value!r}" for key, value in (
        ("project", config.project), ("site", config.site), ("server_name", config.server_name)) if value)
    return f"import provisioning; provisioning.fetch_work(provisioning.configure({settings}, show=False))"
ShellFor = Callable[[Any], NodeShell]  # the python-chi server → its shell (the tests' stand-in node)


@dataclass
class Fetched:
    """What one fetch brought: where it is, the files (relative to ``folder``), how long it took."""

    folder: Path
    files: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def results(self) -> Path:
        return self.folder / "results"

    @property
    def notebooks(self) -> Path:
        return self.folder / "notebooks"

    def line(self) -> str:
        saved = [f for f in self.files if f.startswith("notebooks/")]
        notebooks = [f for f in saved if f.endswith(".ipynb")]
        results = len(self.files) - len(saved)
        return (f"Copied from the node in {self.seconds:.0f} s: {results} files of results/ → "
                f"{shown(str(self.results))}, "
                f"{len(saved)} files of notebooks/ ({len(notebooks)} notebooks) → "
                f"{shown(str(self.notebooks))}")


def default_folder() -> Path:
    """``results/from-node`` here (``$SERVELAB_RESULTS/from-node`` when set)."""
    return results_dir() / FROM_NODE


def _fabric(config: ChameleonConfig) -> ShellFor:
    return lambda server: FabricShell(server.ssh_connection(user=config.ssh_user))


def fetch_node_work(config: ChameleonConfig, chi: ChiApi, folder: Path | None = None,
                    limit_s: float = FETCH_LIMIT_S, shell_for: ShellFor | None = None) -> Fetched | None:
    """Copy the node's ``results/`` and ``notebooks/`` (at any depth) into ``folder`` (project and site
    already selected); None when there is no server (nothing left to fetch). Any failure, the time limit
    included, is a ProvisioningError in one line that names ``SKIP_FETCH``; nothing is deleted here."""
    folder = Path(folder) if folder is not None else default_folder()
    with step(f"looking up server {config.server_name}"):
        server = find_server(config, chi)
    if server is None:
        print(f"No server named {config.server_name} in project {config.project} at {config.site}: nothing "
              "to fetch (it was deleted, or its lease ended)", flush=True)
        return None
    what = f"{' and '.join(f'{name}/' for name in WORK_FOLDERS)} of ~/{config.remote_dir}"
    print(f"Copying {what} from server {config.server_name} to {shown(str(folder))} "
          f"(up to {limit_s / 60:.0f} min)",
          flush=True)
    started = time.monotonic()
    opened: list[NodeShell] = []  # made inside the time limit (the SSH connect counts), closed here

    def connect() -> NodeShell:
        opened.append((shell_for or _fabric(config))(server))
        return opened[-1]

    try:
        files = fetch(connect, pack_work_command(config.remote_dir), WORK_TARBALL,
                      lambda tarball: unpack_work(tarball, folder), limit_s, what)
    except NothingToFetch:
        print(f"The node has no {what} yet: nothing to fetch", flush=True)
        return Fetched(folder)
    except Exception as exc:  # Fabric, paramiko, tar, the time limit: one line, nothing deleted
        raise ProvisioningError(msg.FETCH_FAILED(what=what, error=describe(exc), skip=SKIP_FETCH)) from exc
    finally:
        for shell in opened:  # a connection per fetch: a kernel keeps running
            with contextlib.suppress(Exception):
                getattr(shell, "close", lambda: None)()
    fetched = Fetched(folder, files, time.monotonic() - started)
    print(fetched.line(), flush=True)
    return fetched
