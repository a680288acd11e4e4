"""What the node measured, brought back: packed on the node, copied here, unpacked, in a time limit.

Two packs, one way to bring them: ``pack_command`` packs the instructor's run (``results/<run>/`` and
the detached run's log beside it) and ``unpack`` keeps only those (the log as ``node-run.log``);
``pack_work_command`` packs a student's work (the code folder's ``results/`` and what is saved under
``notebooks/``, at any depth) and ``unpack_work`` keeps only those. ``fetch`` runs a pack, copies the tarball
and unpacks it within a time limit (``FetchTimeout`` past it): after an interrupt, or before a
teardown, waiting without end would lose more than it saves. Unpacking refuses anything that would
land outside its folder: tarfile's ``data`` filter where Python has it, its own check where it does
not (3.11.2, Debian 12's own python3).
"""

from __future__ import annotations

import os
import shlex
import tarfile
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from servelab.remote.shell import NodeShell

NO_RUN_FOLDER = 3  # a pack command's exit code when there is nothing to pack
WORK_TARBALL = "serve-system-lab-work.tar.gz"  # a student's work, packed in the login user's home
WORK_FOLDERS = ("results", "notebooks")  # what a student's work is, in the code folder
TOP_LEVEL = "top-level"  # under notebooks/ here: the notebooks saved at the top of the node's lab folder
WORK_SKIPPED = ("results/*.tar.gz", ".ipynb_checkpoints", "__pycache__")  # never fetched: packs, caches
T = TypeVar("T")


class NothingToFetch(RuntimeError):
    """The node has nothing of what was asked for (the run never made its folder)."""


class FetchTimeout(RuntimeError):
    """The fetch did not finish within its time limit."""


def pack_work_command(remote_dir: str, tarball: str = WORK_TARBALL) -> str:
    """Pack a student's work into ``~/<tarball>``: ``results/`` (without earlier packs), everything under
    ``notebooks/`` at any depth (a notebook saved in a sub-folder, its jupytext pair), and the ``*.ipynb``
    at the folder's top (where the node's Jupyter launcher saves a new notebook), those as
    ``notebooks/top-level/``; never Jupyter's ``.ipynb_checkpoints`` nor ``__pycache__`` (any name: the
    list goes to tar NUL-separated). Exits NO_RUN_FOLDER when neither folder exists; tar's 1 (a file
    changed while it was read: a notebook still saving) counts as packed."""
    names = ("{ for folder in results notebooks; do if test -d $folder; then printf '%s\\0' $folder; fi; "
             "done; find . -maxdepth 1 -name '*.ipynb' -printf '%P\\0'; }")
    there = f"cd {shlex.quote(remote_dir)} 2>/dev/null && {{ test -d results || test -d notebooks; }}"
    top = f"--transform 's,^\\([^/]*\\.ipynb\\)$,notebooks/{TOP_LEVEL}/\\1,'"
    skip = " ".join(f"--exclude={shlex.quote(pattern)}" for pattern in WORK_SKIPPED)
    return (f"{{ {there} || exit {NO_RUN_FOLDER}; }}; {names} | tar -czf \"$HOME\"/{shlex.quote(tarball)} "
            f"--warning=no-file-changed {skip} {top} --null -T -; [ $? -le 1 ]")


def pack_command(remote_dir: str, run_name: str, tarball: str | None = None) -> str:
    """Pack the node's run folder and its log (``<run>.log``, when there is one) into ``results/<tarball>``
    (default ``<run>.tar.gz``; a second try while the first may still be writing packs under another name).

    Exits NO_RUN_FOLDER when the run never made its folder; tar's 1 (a file changed while it was
    read: a stopped run still writing its report) counts as packed."""
    name = shlex.quote(run_name)
    return (f"cd {shlex.quote(remote_dir)}/results && {{ test -d {name} || exit {NO_RUN_FOLDER}; }}; "
            f"tar -czf {shlex.quote(tarball or run_name + '.tar.gz')} --warning=no-file-changed {name} "
            f"$(ls {shlex.quote(run_name + '.log')} 2>/dev/null); [ $? -le 1 ]")


def unpack(tarball: Path, run_name: str, run_dir: Path) -> list[str]:
    """The node's run folder's files into ``run_dir`` (its top folder dropped), and its log as
    ``node-run.log``; the names unpacked.

    tarfile's ``data`` filter refuses absolute paths, ``..`` and links out of ``run_dir``. Python
    releases without it (3.11.2, Debian 12's own python3) get ``_check_members`` instead: regular
    files and folders only, inside ``run_dir``; anything else refuses the whole tarball.
    """
    names = []
    with tarfile.open(tarball, "r:gz") as tar:
        members = []
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if member.name == f"{run_name}.log" and member.isfile():
                parts = (run_name, "node-run.log")  # the node run's whole output
            if len(parts) < 2 or parts[0] != run_name:
                continue  # only the run folder's content
            member.name = str(Path(*parts[1:]))
            members.append(member)
            names.append(member.name)
        _extract(tar, members, run_dir, tarball)
    return names


def unpack_work(tarball: Path, dest: Path) -> list[str]:
    """A student's work (``results/...``, ``notebooks/...``) into ``dest``, as on the node; the names
    unpacked. Anything else in the tarball is left out; a newer fetch replaces an older one."""
    with tarfile.open(tarball, "r:gz") as tar:
        members = [m for m in tar.getmembers() if Path(m.name).parts[:1] in [(f,) for f in WORK_FOLDERS]]
        _extract(tar, members, dest, tarball)
    return [m.name for m in members if not m.isdir()]


def _extract(tar: tarfile.TarFile, members: list[tarfile.TarInfo], dest: Path, tarball: Path) -> None:
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, members=members, filter="data")
    else:
        tar.extractall(dest, members=_check_members(members, tarball))


def within(seconds: float, what: str, action: Callable[[], T]) -> T:
    """``action()``, or ``FetchTimeout`` naming ``what`` once ``seconds`` have passed (it goes on in a
    daemon thread, which the end of the connection or of the process ends). Its exception is re-raised.
    The caller's thread only waits: a signal there (a stop) acts at once."""
    result: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            result.append(action())
        except BaseException as exc:  # handed to the caller
            failed.append(exc)

    worker = threading.Thread(target=run, name=f"fetch: {what}", daemon=True)
    worker.start()
    worker.join(max(0.0, seconds))
    if worker.is_alive():
        raise FetchTimeout(f"{what} did not finish within {seconds:g} s")
    if failed:
        raise failed[0]
    return result[0]


def fetch(connect: Callable[[], NodeShell], pack: str, remote_tarball: str,
          unpack_into: Callable[[Path], list[str]], limit_s: float, what: str) -> list[str]:
    """Connect (``connect()``: the node's shell, whose first command opens the SSH connection), run ``pack``
    on the node, copy ``remote_tarball`` here and unpack it with ``unpack_into``, all within one deadline of
    ``limit_s`` seconds, the connection included (an SSH connect to a dead node can hang for minutes on its
    own); the names unpacked. ``NothingToFetch`` when the pack found nothing, ``FetchTimeout`` past the
    limit, a RuntimeError naming the exit code when the pack failed. The caller closes the shell
    ``connect`` made (a copy cut by the limit may still be running on it)."""

    def whole() -> list[str]:
        shell = connect()
        packed = shell.run(pack, timeout=limit_s)
        if packed == NO_RUN_FOLDER:
            raise NothingToFetch(f"the node has no {what}")
        if packed != 0:
            raise RuntimeError(f"packing {what} on the node failed (exit {packed}; its output is above)")
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / Path(remote_tarball).name
            shell.get(remote_tarball, local)
            return unpack_into(local)

    return within(limit_s, f"copying {what} from the node", whole)


def _check_members(members: list[tarfile.TarInfo], tarball: Path) -> list[tarfile.TarInfo]:
    """``members`` when every one is a regular file or folder with a relative path and no ``..``, with
    the ``data`` filter's modes (no setuid/setgid/sticky bits, no write for group and others) and
    owned by whoever unpacks; else a ``tarfile.TarError`` naming the first bad one."""
    for member in members:
        path = Path(member.name)
        if not (member.isreg() or member.isdir()):
            why = "a link" if member.issym() or member.islnk() else "not a regular file or folder"
        elif path.is_absolute() or member.name.startswith(("/", "\\")):
            why = "an absolute path"
        elif ".." in path.parts:
            why = "a path with .."
        else:
            member.mode &= 0o755
            member.uid, member.gid, member.uname, member.gname = os.getuid(), os.getgid(), "", ""
            continue
        raise tarfile.TarError(f"{tarball.name}: {member.name!r} is {why}, which could land outside the "
                               "run's folder: nothing unpacked")
    return members
