"""A long command on the node that outlives the SSH connection: started detached, followed by polling.

The command runs under ``setsid nohup`` in the code directory, its output in ``results/<name>.log``
and its exit code written to ``results/<name>.exit`` when it ends; ``results/<name>.pid`` holds its
process group. Starting again while it runs attaches to it instead (a controller that restarted
with the same run folder). ``follow`` prints the log's new bytes every few seconds and, when a poll
fails (a dropped connection), reconnects for up to ``reconnect_for`` seconds before giving up —
the run goes on on the node either way. At ``deadline`` it stops the run (``stop_command``) so the
fetch and the teardown still fit in the lease. Why: docs/decisions/2026-11-23-chameleon-lifecycle.md
"""

from __future__ import annotations

import base64
import codecs
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

CHUNK = 1 << 20  # at most this many bytes of log per poll


class Shell(Protocol):
    """What following needs of the node: a command's exit code and output, not streamed."""

    def capture(self, command: str, timeout: float) -> tuple[int, str]:
        """Run ``command``; its exit code and stdout. Raises when the node cannot be reached."""


@dataclass(frozen=True)
class RemoteRun:
    """Where the detached run's files are on the node (paths relative to the login user's home)."""

    code_dir: str
    name: str

    def path(self, suffix: str) -> str:
        return f"{self.code_dir}/results/{self.name}.{suffix}"

    def start_command(self, command: str) -> str:
        """Start ``command`` detached in the code directory, or attach when it already runs.

        Prints ``started`` or ``attached`` (errors on stdout too); the exit code is written only when
        the command ends."""
        log, pid, code = (shlex.quote(self.path(s)) for s in ("log", "pid", "exit"))
        body = f"({command}); echo $? > {code}"  # the subshell keeps any cd away from the exit file's path
        return (f"{{ mkdir -p {shlex.quote(self.code_dir + '/results')} && "
                f"if [ -f {pid} ] && [ ! -f {code} ] && {_alive(pid)}; then echo attached; "
                f"else rm -f {code} && (setsid nohup sh -c {shlex.quote(body)} > {log} 2>&1 < /dev/null & "
                f"echo $! > {pid}) && echo started; fi; }} 2>&1")

    def poll_command(self, offset: int) -> str:
        """First line: the exit code, ``running``, or ``gone`` (no exit code and no process left: the node
        rebooted, the run was killed); then the log from byte ``offset`` (base64, at most CHUNK bytes).
        The status is read first, so a finished run's log is complete when it is read."""
        log, code, pid = (shlex.quote(self.path(s)) for s in ("log", "exit", "pid"))
        return (f"cat {code} 2>/dev/null || {{ {_alive(pid)} && echo running; }} || cat {code} 2>/dev/null "
                "|| echo gone; "
                f"tail -c +{offset + 1} {log} 2>/dev/null | head -c {CHUNK} | base64 -w0; echo")

    def stop_command(self, inner: str = "") -> str:
        """Stop the run's process group (``inner`` first: what stops the work it handed on), then wait
        up to a minute for it to end, so that what it writes on its way out is there to fetch."""
        pid = shlex.quote(self.path("pid"))
        first = f"{inner}; " if inner else ""
        group = f"\"-$(cat {pid})\""
        return (f"{first}kill -TERM -- {group} 2>/dev/null || kill -TERM \"$(cat {pid})\" 2>/dev/null; "
                f"for _ in $(seq 60); do kill -0 -- {group} 2>/dev/null || break; sleep 1; done; true")


def _alive(pid: str) -> str:
    """Shell test: the run's process group lives, or its first process, which is the group only once
    it has called setsid (a start or poll in that moment must not see "not running")."""
    return (f"{{ kill -0 -- \"-$(cat {pid} 2>/dev/null)\" 2>/dev/null || "
            f"kill -0 \"$(cat {pid} 2>/dev/null)\" 2>/dev/null; }}")


CONNECTION_ERRORS = ("OSError", "EOFError", "TimeoutError", "SSHException", "CommandTimedOut")


def lost_connection(exc: BaseException) -> bool:
    """A poll that failed because the node could not be reached (socket, SSH, a timed-out command);
    anything else (a signal's exception, a bug) is not retried."""
    return any(cls.__name__ in CONNECTION_ERRORS for cls in type(exc).__mro__)


@dataclass
class Followed:
    """How following ended: the command's exit code (None when stopped at the deadline or vanished)."""

    exit_code: int | None
    reconnects: int = 0
    stopped_at_deadline: bool = False
    vanished: bool = False  # no exit code and no process left: the node rebooted or the run was killed


def _print(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


class NodeUnreachable(RuntimeError):
    """The node did not answer for longer than the reconnect window; its run may still go on."""


def follow(connect: Callable[[], Shell], run: RemoteRun, deadline: float, *, inner_stop: str = "",
           poll_s: float = 10.0, reconnect_for: float = 600.0, clock: Callable[[], float] = time.monotonic,
           sleep: Callable[[float], None] = time.sleep, out: Callable[[str], None] | None = None,
           shell: Shell | None = None) -> Followed:
    """Print the run's output as it grows until it exits, reconnecting when a poll fails.

    ``deadline`` is on ``clock``; when reached the run is stopped (``inner_stop`` then its process
    group) and ``exit_code`` is None. A node unreachable for ``reconnect_for`` s raises NodeUnreachable.
    """
    write = out or _print
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    result = Followed(exit_code=None)
    offset = 0
    lost_since: float | None = None
    current = shell
    while True:
        try:
            if current is None:
                current = connect()
            code, text = current.capture(run.poll_command(offset), timeout=120)
            if code != 0:
                raise OSError(f"the poll exited {code}")
            if lost_since is not None:
                result.reconnects += 1
                write(f"\n[node run] reconnected after {clock() - lost_since:.0f} s; following again\n")
            lost_since = None
        except Exception as exc:  # a dropped connection, a refused login, a timed-out poll
            if not lost_connection(exc):
                raise  # e.g. SIGTERM's exception on the controller: the caller's teardown path
            current = None
            now = clock()
            if lost_since is None:
                lost_since = now
                write(f"\n[node run] lost the node ({type(exc).__name__}: {exc}); its run goes on there; "
                      f"reconnecting for up to {reconnect_for / 60:.0f} min\n")
            if now - lost_since > reconnect_for:
                raise NodeUnreachable(
                    f"the node did not answer for {reconnect_for / 60:.0f} min ({exc}); its run may still "
                    f"go on there (its output so far is above)") from exc
            sleep(min(poll_s, 30.0))
            continue
        status, _, encoded = text.partition("\n")  # the log's line is empty when there is no new output
        chunk = base64.b64decode(encoded.strip()) if encoded.strip() else b""
        offset += len(chunk)
        if chunk:
            write(decoder.decode(chunk))
        status = status.strip()
        if len(chunk) >= CHUNK:
            continue  # more log waiting: read it before acting on the status
        if status == "gone":
            write(decoder.decode(b"", final=True))
            result.vanished = True
            return result
        if status and status != "running":
            write(decoder.decode(b"", final=True))
            result.exit_code = int(status) if status.lstrip("-").isdigit() else 1
            return result
        if clock() >= deadline:
            write("\n[node run] the time left in the lease is up: stopping the node's run so that its "
                  "results can still be fetched\n")
            current.capture(run.stop_command(inner_stop), timeout=120)
            result.stopped_at_deadline = True
            return result
        sleep(poll_s)
