"""Background processes the lab starts (uvicorn, tritonserver, flask): started in
their own process group, logged to a file, waited for with a named timeout and
always stopped — at interpreter exit and on Ctrl-C too — so no orphan is left.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType

_LIVE: weakref.WeakSet[ManagedProcess] = weakref.WeakSet()


class WaitTimeoutError(TimeoutError):
    """A wait ran out; the message names what was waited for and for how long."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class PortError(OSError):
    """``host:port`` cannot be listened on for another reason than another program holding it; the
    message says what to change."""


def bind_port(host: str, port: int) -> socket.socket | None:
    """A TCP socket bound to ``host:port`` for a server to listen on (SO_REUSEADDR, as uvicorn and
    gunicorn bind theirs), or None when another program holds that port. ``PortError`` for a port only
    root may take or a host that is not this machine's."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            return None
        if exc.errno == errno.EACCES:
            raise PortError(f"not allowed to listen on port {port} (ports below 1024 need root): "
                            "choose a port of 1024 or above") from None
        raise PortError(f"cannot listen on {host}:{port} ({exc.strerror}): listen on 127.0.0.1 (this "
                        "machine only) or 0.0.0.0 (every interface)") from None
    return sock


def taken_port_line(server: str, host: str, port: int, setting: str) -> str:
    """The one line a server stops with when ``host:port`` is taken: names ``setting`` (a format with
    ``{port}``, e.g. ``--port {port}``) filled with a port that is free now (of the next 50)."""
    free = None
    for candidate in range(port + 1, min(port + 50, 65536)):
        if (probe := bind_port(host, candidate)) is not None:
            probe.close()
            free = candidate
            break
    move = f"with {setting.format(port=free)}" if free else f"({setting.format(port='PORT')})"
    return (f"{server}: {host}:{port} is already taken by another program: start it on another port {move}, "
            "or stop that program")


def wait_until(check: Callable[[], bool], what: str, timeout: float, interval: float = 0.2,
               alive: Callable[[], str | None] | None = None) -> None:
    """Poll ``check`` until it is true; raise ``WaitTimeoutError`` naming ``what``.

    ``alive`` returns an error text when the thing waited for has died, so a
    crashed server fails the wait at once instead of after the whole timeout.
    """
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if alive is not None and (problem := alive()):
            raise RuntimeError(f"gave up waiting for {what}: {problem}")
        if time.monotonic() > deadline:
            raise WaitTimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """True when GET ``url`` answers 2xx."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return 200 <= response.status < 300
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the parent dies, even by SIGKILL.

    A new session protects the child from the terminal's Ctrl-C (we stop it
    ourselves), but also means nothing else would ever stop it: a killed
    notebook kernel would leave tritonserver running with its ports and shm.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ManagedProcess:
    """A child process in its own session, logging to ``log_path``."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path,
                 env: Mapping[str, str] | None = None, cwd: Path | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        full_env = dict(os.environ)
        full_env.update(env or {})
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.argv, stdout=self._log, stderr=subprocess.STDOUT, env=full_env,
            cwd=str(cwd) if cwd else None, start_new_session=True, preexec_fn=_die_with_parent,
        )
        _stop_children_on_exit()
        _LIVE.add(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def exit_problem(self) -> str | None:
        """None while running; otherwise why it stopped and the end of its log."""
        code = self.proc.poll()
        if code is None:
            return None
        return f"{self.name} exited with code {code}; last log lines:\n{self.log_tail()}"

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def wait_http(self, url: str, timeout: float = 60.0) -> None:
        """Wait until ``url`` answers 2xx, failing fast if the process dies."""
        wait_until(lambda: http_ok(url), f"{self.name} to answer {url}", timeout,
                   alive=self.exit_problem)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM the whole process group, SIGKILL after ``timeout``; idempotent."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        # children that outlived the leader are still in its group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._log.close()
        _LIVE.discard(self)
        return self.proc.returncode

    def __enter__(self) -> ManagedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _subreaper(on: bool) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(None, use_errno=True).prctl(36, int(on)) == 0  # PR_SET_CHILD_SUBREAPER
    return False


@contextlib.contextmanager
def orphans_adopted() -> Iterator[bool]:
    """While inside, this process reaps its descendants' orphans (Linux's PR_SET_CHILD_SUBREAPER): a process
    whose parent dies becomes this one's child, where ``stop_new_children`` finds it, instead of init's.
    Triton's model stubs outlive a server that a killed notebook kernel took down mid-request, each holding
    its model's memory. Yields False where the system has no such call; off again on leaving (a test
    process that ran the lab must not keep other tests' orphans as its zombies).
    Why: docs/decisions/2026-11-28-numbers-printed-once.md"""
    adopted = _subreaper(True)
    try:
        yield adopted
    finally:
        if adopted:
            _subreaper(False)


def children() -> set[int]:
    """The pids of this process's descendants now."""
    import psutil

    return {c.pid for c in psutil.Process().children(recursive=True)}


def stop_new_children(before: set[int], grace: float = 5.0) -> list[str]:
    """Stop this process's descendants that were not there ``before`` (``children()``): SIGTERM, SIGKILL
    after ``grace`` seconds; the names of those stopped. Called between notebooks, when a notebook's
    kernel and everything it started should be gone."""
    import psutil

    left = [c for c in psutil.Process().children(recursive=True) if c.pid not in before]
    names = []
    for child in left:
        with contextlib.suppress(psutil.Error):
            names.append(child.name())
            child.terminate()
    _, alive = psutil.wait_procs(left, timeout=grace)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(alive, timeout=grace)
    return names


def stop_all() -> None:
    """Stop every process this interpreter started and has not stopped yet."""
    for proc in list(_LIVE):
        proc.stop()


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    stop_all()
    signal.default_int_handler(signum, frame)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """SIGTERM skips atexit by default: turn it into SystemExit so children are stopped.

    The one SystemExit in library code, on purpose: it is how a signal becomes a normal exit
    (atexit handlers, ``finally`` blocks) in whatever program started the children."""
    stop_all()
    raise SystemExit(128 + signum)


_HANDLERS_INSTALLED = False


def _stop_children_on_exit() -> None:
    """Once this interpreter starts a child: stop children at exit, on Ctrl-C and on SIGTERM.

    Installed when the first child starts, never at import (importing must not change a
    process's signal handling); handlers someone else installed are left alone.
    """
    global _HANDLERS_INSTALLED
    if _HANDLERS_INSTALLED:
        return
    _HANDLERS_INSTALLED = True
    atexit.register(stop_all)
    if sys.platform != "win32":
        with contextlib.suppress(ValueError):  # not in the main thread: leave handlers alone
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                signal.signal(signal.SIGINT, _on_sigint)
            if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _on_sigterm)
