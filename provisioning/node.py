"""Node set-up over SSH: the one idempotent script, the lab's code, and the student's Jupyter.

The script (``node_setup.sh`` beside this file) is uploaded and run with its
settings in the environment; the code reaches the node either as an upload of
this folder's own files, built model artefacts included (``code_source="upload"``,
the default: it also carries changes not pushed anywhere; a git clone, or a
folder without ``.git`` — a Trovi import, an unpacked zip, a copy — through the
lab's file list) or as a git clone (``code_source="git"``). Then ``./lab jupyter``
runs in the code directory as the login user: it creates ``models/`` and ``results/``, builds the model
artefacts when none came along, and starts the student's Jupyter server,
printing ``jupyter: <url>`` as its last line. It runs under ``sg docker``
because the SSH session that ran the script may predate the user's new
``docker`` group membership.
"""

from __future__ import annotations

import gzip
import re
import shlex
import subprocess
import tarfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from provisioning import messages as msg
from provisioning import times  # times.sleep is looked up at call time (the tests' fake clock)
from provisioning.config import ChameleonConfig, ProvisioningError
from provisioning.errors import describe
from servelab.core.paths import REPO_ROOT

NODE_SETUP_SCRIPT = Path(__file__).with_name("node_setup.sh")
REMOTE_SCRIPT = "node_setup.sh"
REMOTE_TARBALL = "serve-system-lab.tar.gz"
# built, gitignored files the images and the model repository need: sent whenever present, listed or not
ARTIFACT_GLOBS = ("artifacts/food11.*", "fastapi_pt/food11.pth", "fastapi_onnx/food11.onnx",
                  "models_staging/*/1/food11.pth", "models_staging/*/1/model.onnx",
                  "models_staging/*/1/*.json")
# compose's settings file: the class's registry when the instructor commits it, else this machine's own
# (MAX_BATCH, FLASK_PORT, SERVELAB_LLM...), which must not change the node's measurements
LOCAL_SETTINGS = "docker/.env"
# the lab's files in a copy without git (a Trovi import, a zip): `git ls-files > provisioning/lab-files.txt`
MANIFEST = "provisioning/lab-files.txt"
# run in the code directory after node_setup.sh; its last stdout line is "jupyter: <url>"
JUPYTER_COMMAND = "sg docker -c './lab jupyter'"
JUPYTER_LINE = re.compile(r"^jupyter: (https?://\S+)$")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "0.0.0.0")
# an upload is the first SSH login: sshd may accept TCP before cloud-init has installed the key
UPLOAD_ATTEMPTS = 5
UPLOAD_RETRY_S = 15.0
TRANSIENT_SSH_ERRORS = ("SSHException", "AuthenticationException", "NoValidConnectionsError")  # paramiko's
PERMANENT_OS_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)


def node_setup_env(config: ChameleonConfig) -> dict[str, str]:
    """The script's settings for this configuration."""
    env = {"CODE_DIR": config.remote_dir, "REPO_REF": config.repo_ref}
    if config.code_source == "upload":
        env["CODE_TARBALL"] = REMOTE_TARBALL
    else:
        if not config.repo_url:
            raise ProvisioningError(msg.GIT_NEEDS_REPO_URL(what="checkout"))
        env["REPO_URL"] = config.repo_url
    return env


def node_setup_command(config: ChameleonConfig) -> str:
    """The shell command run on the node (in the login user's home)."""
    assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in node_setup_env(config).items())
    return f"env {assignments} bash {REMOTE_SCRIPT}"


def jupyter_command(config: ChameleonConfig) -> str:
    """Start the student's Jupyter server on the node (and build the model artefacts if missing)."""
    return f"cd {shlex.quote(config.remote_dir)} && {JUPYTER_COMMAND}"


def node_commands(config: ChameleonConfig) -> list[str]:
    """Every command the node set-up runs over SSH, in order (also what plan mode prints)."""
    return [node_setup_command(config), jupyter_command(config)]


def jupyter_url(stdout: str, address: str) -> str:
    """The URL from ``./lab jupyter``'s ``jupyter: <url>`` line, with the node's address for localhost."""
    urls = [match.group(1) for line in stdout.splitlines() if (match := JUPYTER_LINE.match(line.strip()))]
    if not urls:
        raise ProvisioningError(msg.NO_JUPYTER_LINE(command=JUPYTER_COMMAND, address=address))
    parts = urlsplit(urls[-1])
    if parts.hostname in LOCAL_HOSTS:
        netloc = address + (f":{parts.port}" if parts.port else "")
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts)


def _git_files(root: Path) -> list[Path] | None:
    """The files git tracks (``git ls-files``), changed or not; None when ``root`` is not the top of a
    git work tree (or there is no git). Untracked files are not the lab's: a key or a note put into
    the clone stays here."""
    try:
        inside = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"],
                                capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return None
    if inside.returncode != 0 or Path(inside.stdout.strip()).resolve() != root.resolve():
        return None  # not a work tree, or a folder inside another repository (its files are not ours)
    listed = subprocess.run(["git", "ls-files", "-z", "--cached"], cwd=root, capture_output=True, check=True,
                            timeout=120)
    return [Path(name) for name in listed.stdout.decode().split("\0") if name]


def manifest_files(root: Path) -> list[Path] | None:
    """The lab's own files as ``MANIFEST`` lists them (one relative path a line, as ``git ls-files``
    prints them); None when the folder has no manifest. A line that would leave the folder is refused."""
    manifest = root / MANIFEST
    if not manifest.is_file():
        return None
    files = []
    for line in manifest.read_text().splitlines():
        if not line.strip():
            continue
        rel = Path(line)
        if rel.is_absolute() or ".." in rel.parts:
            raise ProvisioningError(msg.MANIFEST_LEAVES_FOLDER(manifest=manifest, line=line))
        files.append(rel)
    return files


def checkout_files(root: Path = REPO_ROOT) -> list[Path]:
    """What is uploaded, relative to ``root``: the lab's own files plus the built artefacts.

    In a git clone: the files git tracks (their content here, committed or not). Without git (a
    Trovi import lands at the top of the hub's work folder, beside ``.ssh`` and everything else; an
    unpacked zip; a copy): the files ``MANIFEST`` lists, which ships with the lab and is
    ``git ls-files`` written out (a test fails when the two differ). Nothing else in the folder is
    ever sent but ``ARTIFACT_GLOBS``, the built artefacts. ``docker/.env`` goes only tracked or listed (the
    class's registry, committed by the instructor); one that is neither is this machine's and stays, said in
    one line. Reasons: docs/decisions/2026-11-25-class-day-provisioning.md,
    2026-12-01-class-day-fourth-pass.md.
    """
    listed = _git_files(root)
    if listed is None:
        listed = manifest_files(root)
    if listed is None:
        raise ProvisioningError(msg.NOT_A_CLONE_NOR_A_COPY(root=root, manifest=MANIFEST))
    files = set(listed)
    for pattern in ARTIFACT_GLOBS:
        files.update(path.relative_to(root) for path in root.glob(pattern))
    return sorted(path for path in files if (root / path).is_file() and not (root / path).is_symlink())


def local_settings_note(root: Path = REPO_ROOT) -> str:
    """The line saying that ``docker/.env`` stays here (neither tracked nor listed), else ""."""
    if not (root / LOCAL_SETTINGS).is_file() or Path(LOCAL_SETTINGS) in checkout_files(root):
        return ""
    return msg.LOCAL_SETTINGS_STAY(settings=LOCAL_SETTINGS, manifest=MANIFEST)


def _executable(root: Path, rel: Path) -> bool:
    """A script (``#!`` first): a zip or a Trovi import may have lost its executable bit."""
    with open(root / rel, "rb") as handle:
        return handle.read(2) == b"#!"


def checkout_tarball(dest: Path, root: Path = REPO_ROOT) -> Path:
    """Pack the folder (see ``checkout_files``) as ``dest`` (.tar.gz) for upload; scripts executable.

    Reproducible: the same files give the same bytes (sorted, gzip's own header without a time or a
    name, the owner left out), so the node's "already holds this upload" check can match. Each file
    keeps its modification time: the node's unpack keeps any file that is newer there (a notebook the
    student saved on the node).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed, \
            tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in checkout_files(root):
            info = tar.gettarinfo(root / rel, arcname=rel.as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = int(info.mtime)
            if _executable(root, rel):
                info.mode |= 0o755
            with open(root / rel, "rb") as handle:
                tar.addfile(info, handle)
    return dest


def _transient(exc: BaseException) -> bool:
    """A failure that may pass: a connection dropped or refused, or SSH refusing the key (cloud-init may
    not have installed it yet although sshd already answers). A missing or unwritable file does not
    pass. A stop (SIGTERM's ``Terminated``, Ctrl-C) is a BaseException and never reaches here."""
    if isinstance(exc, PERMANENT_OS_ERRORS):
        return False
    if isinstance(exc, OSError | EOFError):  # socket errors, timeouts, paramiko's NoValidConnectionsError
        return True
    return any(cls.__name__ in TRANSIENT_SSH_ERRORS for cls in type(exc).__mro__)


def _upload(server: Any, config: ChameleonConfig, local: str, remote: str) -> None:
    """``server.upload`` (a new SSH connection each time), tried again on transient failures."""
    name = Path(local).name
    for attempt in range(1, UPLOAD_ATTEMPTS + 1):
        try:
            server.upload(local, remote, user=config.ssh_user)
            return
        except Exception as exc:
            if attempt == UPLOAD_ATTEMPTS or not _transient(exc):
                tries = f" after {attempt} attempts" if attempt > 1 else ""
                raise ProvisioningError(msg.UPLOAD_FAILED(name=name, tries=tries,
                                                          error=describe(exc))) from exc
            print(msg.UPLOAD_RETRY(name=name, attempt=attempt, attempts=UPLOAD_ATTEMPTS, error=describe(exc),
                                   every=f"{UPLOAD_RETRY_S:.0f}"), flush=True)
            times.sleep(UPLOAD_RETRY_S)


def run_on_node(server: Any, config: ChameleonConfig, command: str) -> str:
    """Run ``command`` over SSH, its output streamed; return its stdout. A failure is one line."""
    print(f"$ {command}")
    # python-chi hands these keyword arguments to Fabric's Connection; a stop closes the channel at once
    from servelab.remote.runner import stoppable_config

    limit = config.node_command_timeout_s
    try:
        result = server.execute(command, user=config.ssh_user,
                                config=stoppable_config(timeouts={"command": limit}))
    except Exception as exc:
        if type(exc).__name__ == "CommandTimedOut":  # invoke's, raised by run() at the command timeout
            raise ProvisioningError(msg.NODE_COMMAND_HUNG(command=command, limit=limit,
                                                          user=config.ssh_user)) from exc
        result = getattr(exc, "result", None)
        if result is not None and hasattr(result, "exited"):  # Fabric/invoke UnexpectedExit
            raise ProvisioningError(msg.NODE_COMMAND_FAILED(command=command, code=result.exited)) from exc
        raise ProvisioningError(msg.NODE_COMMAND_UNREACHABLE(command=command, error=describe(exc))) from exc
    return str(getattr(result, "stdout", "") or "")


def run_node_setup(server: Any, config: ChameleonConfig, workdir: Path,
                   root: Path = REPO_ROOT, address: str | None = None) -> str:
    """Upload the script (and the checkout in upload mode), run the node commands; the Jupyter URL.

    python-chi's ``Server.execute`` returns Fabric's ``Result`` (output streamed and kept), so
    ``./lab jupyter``'s last line is read from it; ``address`` replaces ``localhost`` in the URL.
    """
    _upload(server, config, str(NODE_SETUP_SCRIPT), REMOTE_SCRIPT)
    if config.code_source == "upload":
        note = local_settings_note(root)
        if note:
            print(note, flush=True)
        tarball = checkout_tarball(workdir / REMOTE_TARBALL, root)
        print(f"Uploading the checkout ({tarball.stat().st_size / 1e6:.1f} MB)")
        _upload(server, config, str(tarball), REMOTE_TARBALL)
    setup, jupyter = node_commands(config)
    run_on_node(server, config, setup)
    stdout = run_on_node(server, config, jupyter)
    return jupyter_url(stdout, address or "localhost")
