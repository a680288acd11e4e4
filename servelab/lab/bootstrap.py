"""The lab in a Jupyter kernel that has none of it installed (Chameleon's Jupyter): 01, 02, 08's first cell.

That cell puts the checkout's root on ``sys.path`` and calls :func:`ensure`, which installs
``requirements/chameleon-jupyter.txt`` (python-chi, python-blazarclient) at constraints.txt's versions into
the running kernel's interpreter (``python -m pip``) and prints the command, what pip installed and the
versions. Nothing is installed when both are at those versions already (a second run makes no pip call),
nor where the lab is installed in the environment (``pip install -e .``: the local venv; ``PYTHONPATH``:
the node's Jupyter container): that environment's own set-up owns its packages. A failure is a
BootstrapError with one line that says what to do. Standard library only: nothing else is importable yet.
Why: docs/decisions/2026-11-23-chameleon-jupyter-bootstrap.md
"""

from __future__ import annotations

import importlib
import os
import re
import site
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = "requirements/chameleon-jupyter.txt"
CONSTRAINTS = "constraints.txt"
MODULES = {"python-chi": "chi", "python-blazarclient": "blazarclient"}  # what a kernel may have imported


class BootstrapError(RuntimeError):
    """The kernel could not be given the lab's packages; the message says what to do."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(root: Path = ROOT) -> dict[str, str]:
    """Each package named in the requirements file, with its version from constraints.txt."""
    try:
        names = [line.split("#")[0].strip() for line in (root / REQUIREMENTS).read_text().splitlines()]
        constraints = (root / CONSTRAINTS).read_text().splitlines()
    except OSError as exc:
        raise BootstrapError(f"{root} is not a whole checkout of the lab ({exc}): clone it again") from None
    pinned = {}
    for line in constraints:
        name, equals, version = line.split("#")[0].partition("==")
        if equals:
            pinned[canonical(name.strip())] = version.strip()
    missing = [name for name in names if name and canonical(name) not in pinned]
    if missing:
        raise BootstrapError(f"{CONSTRAINTS} pins no version of {', '.join(missing)}: add it there")
    return {name: pinned[canonical(name)] for name in names if name}


def installed(names: Iterable[str]) -> dict[str, str | None]:
    """The version of each distribution that this interpreter would import now (None: not installed)."""
    importlib.invalidate_caches()  # a folder pip just made is seen by the next import
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def lab_installed(root: Path = ROOT, environ: Mapping[str, str] = os.environ) -> bool:
    """The lab is part of this environment: ``pip install -e .`` (a venv) or on PYTHONPATH (a container).

    Metadata in the checkout itself (the ``servelab.egg-info`` an editable install leaves there) does not
    count: the notebook's first cell puts the checkout on sys.path, and that installs nothing.
    """
    elsewhere = [p for p in sys.path if Path(p or ".").resolve() != root]
    if any(True for _ in metadata.distributions(name="servelab", path=elsewhere)):
        return True
    entries = [e for e in environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    return any(Path(entry).resolve() == root for entry in entries)


def _versions(have: Mapping[str, str | None]) -> str:
    return ", ".join(f"{name} {version or '(not installed)'}" for name, version in have.items())


def _user_site_on_path() -> None:
    """pip installs into the user's site-packages when the kernel's own is read-only; Python puts that
    folder on sys.path at start-up only if it existed then, so a first install needs it added."""
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else ""
    if user and os.path.isdir(user) and user not in sys.path:
        first = next((i for i, p in enumerate(sys.path) if p.rstrip("/").endswith(("site-packages",
                                                                                   "dist-packages"))),
                     len(sys.path))
        sys.path.insert(first, user)


def where(root: Path) -> str:
    """The checkout as a notebook names it, never with the machine's absolute path: ``~/…`` under the home
    folder (Chameleon's hub: ``~/work/<folder>``), else the folder's own name."""
    home = Path(os.path.expanduser("~"))
    try:
        return f"~/{root.resolve().relative_to(home.resolve())}"
    except ValueError:
        return f"the folder {root.name!r}"


def ensure(root: Path = ROOT, run: Callable[..., Any] = subprocess.run,
           environ: Mapping[str, str] = os.environ) -> None:
    """Install the pinned python-chi and python-blazarclient into this kernel when needed; print what
    was done and their versions. ``run`` runs pip (``subprocess.run``'s signature)."""
    wanted = pins(root)
    have = installed(wanted)
    print(f"The lab's code: {where(root)}")
    if have == wanted:
        print(f"Already installed, nothing to do: {_versions(have)}")
        return
    if lab_installed(root, environ):
        print(f"The lab is installed in this environment, whose own set-up owns its packages: nothing "
              f"installed. Here: {_versions(have)}; provisioning needs {_versions(wanted)}.")
        return
    stale = [name for name, version in have.items() if version and MODULES.get(name) in sys.modules]
    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off",
               *[f"{name}=={version}" for name, version in wanted.items()]]
    print(f"Installing the versions the lab is tested with (about a minute, once):\n$ {' '.join(command)}",
          flush=True)
    start = time.monotonic()
    done = run(command, capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()
        reason = next((line for line in lines if line.startswith("ERROR:")), lines[-1])  # pip's first error
        raise BootstrapError(f"pip could not install {_versions(wanted)} into this kernel's Python "
                             f"{sys.version.split()[0]} ({sys.executable}): {reason}")
    print("\n".join(line for line in done.stdout.splitlines() if line.startswith("Successfully installed")))
    _user_site_on_path()
    have = installed(wanted)
    if have != wanted:
        raise BootstrapError(f"pip reported success, yet this kernel imports {_versions(have)}: "
                             "restart the kernel (Kernel > Restart Kernel) and run this cell again")
    if stale:
        raise BootstrapError(f"{', '.join(stale)} was imported in this kernel before the install: restart "
                             "the kernel (Kernel > Restart Kernel) and run the notebook again from the top")
    print(f"Installed in {time.monotonic() - start:.0f} s: {_versions(have)}")
