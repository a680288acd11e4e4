"""A long command on the node that outlives the SSH connection: started detached, followed by polling.

The command runs under ``setsid nohup`` in the code directory, its output in ``results/<name>.log``
and its exit code written to ``results/<name>.exit`` when it ends; ``results/<name>.pid`` holds its
process group. Starting again while it runs attaches to it instead (a controller that restarted
with the same run folder). Started with a ``deadline`` (a wall-clock time), a watchdog on the node
stops it there by itself (``results/<name>.deadline`` then says so), whether or not a controller
still follows — a laptop asleep or a closed terminal changes nothing on the node. ``follow`` prints
the log's new bytes every few seconds and, when a poll fails (a dropped connection), reconnects for
up to ``reconnect_for`` seconds before giving up — the run goes on on the node either way. Past
the deadline (on the wall clock, checked at every poll) it waits for the node to stop the run,
and stops it itself only when the node has not. Why: docs/decisions/2026-11-23-chameleon-lifecycle.md,
docs/decisions/2026-11-25-chameleon-robustness.md
"""

from __future__ import annotations

import base64
import codecs
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from servelab.core.console import say

CHUNK = 1 << 20  # at most this many bytes of log per poll
WATCH_S = 5  # how often the node's watchdog looks at the clock and the run
STOP_WAIT_S = 60  # how long a stop waits for the run's process group to end after its SIGTERM


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

    def start_command(self, command: str, deadline: float | None = None, inner_stop: str = "") -> str:
        """Start ``command`` detached in the code directory, or attach when it already runs.

        Prints ``started`` or ``attached`` (errors on stdout too); the exit code is written only when
        the command ends. With ``deadline`` (seconds since the epoch: the wall clock, the node's own)
        a watchdog, detached as well, stops the run there (``stop_command(inner_stop)``) unless it
        ended before, and writes the ``deadline`` file first."""
        log, pid, code = (shlex.quote(self.path(s)) for s in ("log", "pid", "exit"))
        body = f"({command}); echo $? > {code}"  # the subshell keeps any cd away from the exit file's path
        watchdog = ""
        if deadline is not None:
            watch = self.watchdog(int(deadline), inner_stop)
            # bash, not sh: dash's kill takes no `--`, so `kill -TERM -- -<group>` would miss the group
            watchdog = f" && (setsid nohup bash -c {shlex.quote(watch)} > /dev/null 2>&1 < /dev/null &)"
        return (f"{{ mkdir -p {shlex.quote(self.code_dir + '/results')} && "
                f"if [ -f {pid} ] && [ ! -f {code} ] && {_alive(pid)}; then echo attached; "
                f"else rm -f {code} {shlex.quote(self.path('deadline'))} && "
                f"(setsid nohup sh -c {shlex.quote(body)} > {log} 2>&1 < /dev/null & "
                f"echo $! > {pid}){watchdog} && echo started; fi; }} 2>&1")

    def watchdog(self, deadline: int, inner_stop: str = "") -> str:
        """The node's own deadline: while the run lives, look at the clock every ``WATCH_S`` s; at
        ``deadline`` note it (in the log and the ``deadline`` file) and stop the run."""
        pid, log, marker = (shlex.quote(self.path(s)) for s in ("pid", "log", "deadline"))
        return (f"while {_alive(pid)} && [ \"$(date +%s)\" -lt {deadline} ]; do sleep {WATCH_S}; done; "
                f"if {_alive(pid)}; then date -u +%Y-%m-%dT%H:%M:%SZ > {marker}; "
                f"echo \"[node] the run's deadline ($(cat {marker})) is reached: stopping it\" >> {log}; "
                f"{self.stop_command(inner_stop)}; fi")

    def poll_command(self, offset: int) -> str:
        """First line: ``deadline`` (the node's watchdog stopped the run), the exit code, ``running``, or
        ``gone`` (no exit code and no process left: the node rebooted, the run was killed); then the log
        from byte ``offset`` (base64, at most CHUNK bytes). The status is read first, so a finished
        run's log is complete when it is read."""
        log, code, pid, marker = (shlex.quote(self.path(s)) for s in ("log", "exit", "pid", "deadline"))
        return (f"if [ -f {marker} ] && ! {_alive(pid)}; then echo deadline; else "
                f"cat {code} 2>/dev/null || {{ {_alive(pid)} && echo running; }} || cat {code} 2>/dev/null "
                "|| echo gone; fi; "
                f"tail -c +{offset + 1} {log} 2>/dev/null | head -c {CHUNK} | base64 -w0; echo")

    def stop_command(self, inner: str = "") -> str:
        """Stop the run's process group (``inner`` first: what stops the work it handed on), then wait
        up to ``STOP_WAIT_S`` for it to end, so that what it writes on its way out is there to fetch."""
        pid = shlex.quote(self.path("pid"))
        first = f"{inner}; " if inner else ""
        group = f"\"-$(cat {pid})\""
        return (f"{first}kill -TERM -- {group} 2>/dev/null || kill -TERM \"$(cat {pid})\" 2>/dev/null; "
                f"for _ in $(seq {STOP_WAIT_S}); do kill -0 -- {group} 2>/dev/null || break; sleep 1; done; "
                "true")


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
    stopped_by: str = ""  # at the deadline: "the node" (its watchdog) or "the controller" (the fallback)
    stop_detail: str = ""  # what went wrong with the controller's stop command, if anything
    vanished: bool = False  # no exit code and no process left: the node rebooted or the run was killed


def _print(text: str) -> None:
    say(text, end="")


class NodeUnreachable(RuntimeError):
    """The node did not answer for longer than the reconnect window; its run may still go on."""


def stop_timeout(inner_wait_s: float) -> float:
    """How long the stop command may take: ``inner_wait_s`` for the inner stop, ``STOP_WAIT_S`` for the
    process group, and a minute for SSH."""
    return inner_wait_s + STOP_WAIT_S + 60.0


def follow(connect: Callable[[], Shell], run: RemoteRun, deadline: float, *, inner_stop: str = "",
           inner_wait_s: float = 0.0, stop_grace_s: float = 0.0, poll_s: float = 10.0,
           reconnect_for: float = 600.0, clock: Callable[[], float] = time.time,
           sleep: Callable[[float], None] = time.sleep, out: Callable[[str], None] | None = None,
           shell: Shell | None = None) -> Followed:
    """Print the run's output as it grows until it exits, reconnecting when a poll fails.

    ``deadline`` is on ``clock``, the wall clock (seconds since the epoch), checked at every poll: a
    controller that slept past it sees so at its first poll. A run started with the same deadline
    stops itself (status ``deadline``); only when it still runs ``stop_grace_s`` later does this stop it
    (``inner_stop`` — which takes up to ``inner_wait_s`` — then its process group). Either way
    ``stopped_at_deadline`` and ``exit_code`` is None. A node unreachable for ``reconnect_for`` s
    raises NodeUnreachable.
    """
    write = out or _print
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    result = Followed(exit_code=None)
    offset = 0
    lost_since: float | None = None
    told_deadline = False
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
        if status == "deadline":  # the node's watchdog stopped it
            write(decoder.decode(b"", final=True))
            result.stopped_at_deadline, result.stopped_by = True, "the node"
            return result
        if status == "gone":
            write(decoder.decode(b"", final=True))
            result.vanished = True
            return result
        if status and status != "running":
            write(decoder.decode(b"", final=True))
            result.exit_code = int(status) if status.lstrip("-").isdigit() else 1
            return result
        now = clock()
        if now >= deadline and not told_deadline:
            told_deadline = True
            write("\n[node run] the time left in the lease is up: the node's run stops now so that its "
                  "results can still be fetched\n")
        if now >= deadline + stop_grace_s:
            write("[node run] it still runs: stopping it from here\n" if stop_grace_s else "")
            result.stopped_at_deadline, result.stopped_by = True, "the controller"
            try:
                current.capture(run.stop_command(inner_stop), timeout=stop_timeout(inner_wait_s))
            except Exception as exc:
                if not lost_connection(exc):
                    raise
                result.stop_detail = f"the stop command did not finish ({type(exc).__name__}: {exc})"
            return result
        sleep(poll_s)
