"""The node's lab run, detached and followed (servelab.targets.detached), with real processes here.

The commands that would go over SSH run in a local bash whose home is a temporary folder, so the
detaching (setsid nohup), the log and exit files, attaching, stopping the process group and the
polling are the real thing; only the SSH transport is replaced, and a dropped connection is a
shell whose polls raise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from servelab.targets.detached import NodeUnreachable, RemoteRun, follow


class LocalShell:
    """Runs each command with bash in ``home`` (the login user's home on the node)."""

    def __init__(self, home: Path, fail_polls: int = 0) -> None:
        self.home = home
        self.fail_polls = fail_polls  # this many polls raise, as over a dropped connection
        self.commands: list[str] = []

    def capture(self, command: str, timeout: float) -> tuple[int, str]:
        self.commands.append(command)
        if "base64" in command and self.fail_polls:
            self.fail_polls -= 1
            raise OSError("Socket is closed")
        done = subprocess.run(["bash", "-c", command], cwd=self.home, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "HOME": str(self.home)})
        return done.returncode, done.stdout


def start(shell: LocalShell, run: RemoteRun, command: str) -> str:
    code, said = shell.capture(run.start_command(command), timeout=30)
    assert code == 0, said
    return said.strip()


def test_a_run_is_followed_to_its_exit_code_with_all_its_output(tmp_path: Path) -> None:
    (tmp_path / "lab").mkdir()
    shell, run, seen = LocalShell(tmp_path), RemoteRun("lab", "r1"), []
    assert start(shell, run, "cd lab && printf 'één\\n' && sleep 0.5 && echo two && exit 3") == "started"
    followed = follow(lambda: shell, run, time.monotonic() + 60, poll_s=0.1, out=seen.append, shell=shell)
    assert followed.exit_code == 3 and followed.reconnects == 0 and not followed.stopped_at_deadline
    assert "".join(seen) == "één\ntwo\n"
    assert (tmp_path / "lab/results/r1.exit").read_text().strip() == "3"


def test_a_dropped_connection_reconnects_and_loses_no_output(tmp_path: Path) -> None:
    shell, run, seen = LocalShell(tmp_path, fail_polls=2), RemoteRun("lab", "r2"), []
    connects: list[int] = []

    def connect() -> LocalShell:
        connects.append(1)
        return shell

    start(shell, run, "for i in 1 2 3 4 5; do echo line $i; sleep 0.2; done")
    followed = follow(connect, run, time.monotonic() + 60, poll_s=0.1, out=seen.append, shell=shell)
    assert followed.exit_code == 0 and followed.reconnects == 1 and len(connects) == 2
    text = "".join(seen)
    lines = [line for line in text.splitlines() if line.startswith("line")]
    assert lines == [f"line {i}" for i in range(1, 6)]
    assert "lost the node (OSError: Socket is closed); its run goes on there" in text


def test_starting_again_while_it_runs_attaches(tmp_path: Path) -> None:
    shell, run = LocalShell(tmp_path), RemoteRun("lab", "r3")
    assert start(shell, run, "sleep 2; echo once") == "started"
    assert start(shell, run, "sleep 2; echo once") == "attached"
    followed = follow(lambda: shell, run, time.monotonic() + 60, poll_s=0.1, out=lambda _: None, shell=shell)
    assert followed.exit_code == 0
    assert (tmp_path / "lab/results/r3.log").read_text() == "once\n"  # it ran once


def test_the_deadline_stops_the_whole_process_group(tmp_path: Path) -> None:
    shell, run, seen = LocalShell(tmp_path), RemoteRun("lab", "r4"), []
    start(shell, run, "echo begun; sleep 300 & sleep 300; echo never")
    pgid = int((tmp_path / "lab/results/r4.pid").read_text())
    followed = follow(lambda: shell, run, time.monotonic() + 1, inner_stop="echo inner > lab/stopped-inner",
                      poll_s=0.2, out=seen.append, shell=shell)
    assert followed.stopped_at_deadline and followed.exit_code is None
    assert (tmp_path / "lab/stopped-inner").is_file()  # the work handed on is stopped first
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)  # nothing of the run's group is left
    assert "begun" in "".join(seen) and "never" not in "".join(seen)


def test_a_node_gone_for_longer_than_the_window_is_one_clear_error(tmp_path: Path) -> None:
    shell, run = LocalShell(tmp_path, fail_polls=10**6), RemoteRun("lab", "r5")
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(NodeUnreachable, match=r"did not answer for 10 min .*its output so far is above"):
        follow(lambda: shell, run, 10**9, poll_s=5, reconnect_for=600, clock=lambda: now[0], sleep=sleep,
               out=lambda _: None, shell=shell)
    assert now[0] > 600


def test_paths_are_quoted() -> None:
    run = RemoteRun("my lab", "x")
    assert "'my lab/results/x.pid'" in run.start_command("true")
    assert "'my lab/results/x.log'" in run.poll_command(0)


def test_a_run_that_vanished_is_not_followed_until_the_deadline(tmp_path: Path) -> None:
    """No exit code and no process left (a reboot, a killed wrapper): said at once, not polled for hours."""
    shell, run = LocalShell(tmp_path), RemoteRun("lab", "r6")
    start(shell, run, "sleep 300")
    pgid = int((tmp_path / "lab/results/r6.pid").read_text())
    for _ in range(100):  # the group exists once the background child has become setsid's session
        try:
            os.killpg(pgid, signal.SIGKILL)  # the wrapper dies too: no exit file is written
            break
        except ProcessLookupError:
            time.sleep(0.05)
    time.sleep(0.5)
    followed = follow(lambda: shell, run, time.monotonic() + 3600, poll_s=0.1, out=lambda _: None,
                      shell=shell)
    assert followed.vanished and followed.exit_code is None


def test_a_signal_on_the_controller_is_not_a_lost_connection(tmp_path: Path) -> None:
    """SIGTERM's exception during a poll goes to the caller (its teardown), it is not retried."""

    class Terminated(RuntimeError):
        pass

    class Stopping(LocalShell):
        def capture(self, command: str, timeout: float) -> tuple[int, str]:
            if "base64" in command:
                raise Terminated("stopped by SIGTERM")
            return super().capture(command, timeout)

    shell, run = Stopping(tmp_path), RemoteRun("lab", "r7")
    start(shell, run, "sleep 1")
    with pytest.raises(Terminated):
        follow(lambda: shell, run, time.monotonic() + 60, poll_s=0.1, out=lambda _: None, shell=shell)


def test_the_last_lines_are_read_with_the_exit_code(tmp_path: Path) -> None:
    """The poll reads the status before the log: a run that ends between the two loses no output."""
    shell, run, seen = LocalShell(tmp_path), RemoteRun("lab", "r8"), []
    start(shell, run, "echo first; sleep 0.3; echo FAILED: the last line; exit 1")
    followed = follow(lambda: shell, run, time.monotonic() + 60, poll_s=0.05, out=seen.append, shell=shell)
    assert followed.exit_code == 1 and "".join(seen).endswith("FAILED: the last line\n")


def test_a_run_not_yet_its_own_group_is_running_not_gone(tmp_path: Path) -> None:
    """Between the fork and setsid the run's first process exists but its group does not: a start in
    that moment attaches (it once started the run twice on a busy machine) and a poll says running."""
    shell, run = LocalShell(tmp_path), RemoteRun("lab", "r7")
    child = subprocess.Popen(["sleep", "30"])  # in this process's group: no group of its own
    try:
        (tmp_path / "lab/results").mkdir(parents=True)
        (tmp_path / "lab/results/r7.pid").write_text(f"{child.pid}\n")
        assert start(shell, run, "echo twice") == "attached"
        assert shell.capture(run.poll_command(0), timeout=30)[1].splitlines()[0] == "running"
    finally:
        child.kill()
        child.wait()
