"""The node run's results, brought back: packed on the node, unpacked into this run's folder.

``pack_command`` packs ``results/<run>/`` and the detached run's log beside it; ``unpack`` keeps
only those (the log as ``node-run.log``) and refuses anything that would land outside the run's
folder: tarfile's ``data`` filter where Python has it, its own check where it does not (3.11.2,
Debian 12's own python3).
"""

from __future__ import annotations

import os
import shlex
import tarfile
from pathlib import Path

NO_RUN_FOLDER = 3  # pack_command's exit code when the node's run never made its folder


def pack_command(remote_dir: str, run_name: str) -> str:
    """Pack the node's run folder and its log (``<run>.log``, when there is one).

    Exits NO_RUN_FOLDER when the run never made its folder; tar's 1 (a file changed while it was
    read: a stopped run still writing its report) counts as packed."""
    name = shlex.quote(run_name)
    return (f"cd {shlex.quote(remote_dir)}/results && {{ test -d {name} || exit {NO_RUN_FOLDER}; }}; "
            f"tar -czf {shlex.quote(run_name + '.tar.gz')} --warning=no-file-changed {name} "
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
        if hasattr(tarfile, "data_filter"):
            tar.extractall(run_dir, members=members, filter="data")
        else:
            tar.extractall(run_dir, members=_check_members(members, tarball))
    return names


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
