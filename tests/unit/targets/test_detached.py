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

from servelab.core.procs import wait_until
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
    followed = follow(lambda: shell, run, time.time() + 60, poll_s=0.1, out=seen.append, shell=shell)
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
    followed = follow(connect, run, time.time() + 60, poll_s=0.1, out=seen.append, shell=shell)
    assert followed.exit_code == 0 and followed.reconnects == 1 and len(connects) == 2
    text = "".join(seen)
    lines = [line for line in text.splitlines() if line.startswith("line")]
    assert lines == [f"line {i}" for i in range(1, 6)]
    assert "lost the node (OSError: Socket is closed); its run goes on there" in text


def test_starting_again_while_it_runs_attaches(tmp_path: Path) -> None:
    shell, run = LocalShell(tmp_path), RemoteRun("lab", "r3")
    assert start(shell, run, "sleep 2; echo once") == "started"
    assert start(shell, run, "sleep 2; echo once") == "attached"
    followed = follow(lambda: shell, run, time.time() + 60, poll_s=0.1, out=lambda _: None, shell=shell)
    assert followed.exit_code == 0
    assert (tmp_path / "lab/results/r3.log").read_text() == "once\n"  # it ran once


def test_the_deadline_stops_the_whole_process_group(tmp_path: Path) -> None:
    shell, run, seen = LocalShell(tmp_path), RemoteRun("lab", "r4"), []
    start(shell, run, "echo begun; sleep 300 & sleep 300; echo never")
    pgid = int((tmp_path / "lab/results/r4.pid").read_text())
    followed = follow(lambda: shell, run, time.time() + 1, inner_stop="echo inner > lab/stopped-inner",
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
    followed = follow(lambda: shell, run, time.time() + 3600, poll_s=0.1, out=lambda _: None,
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
        follow(lambda: shell, run, time.time() + 60, poll_s=0.1, out=lambda _: None, shell=shell)


def test_the_last_lines_are_read_with_the_exit_code(tmp_path: Path) -> None:
    """The poll reads the status before the log: a run that ends between the two loses no output."""
    shell, run, seen = LocalShell(tmp_path), RemoteRun("lab", "r8"), []
    start(shell, run, "echo first; sleep 0.3; echo FAILED: the last line; exit 1")
    followed = follow(lambda: shell, run, time.time() + 60, poll_s=0.05, out=seen.append, shell=shell)
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


# ----------------------------------------------------------------------------- the run's own deadline
def watchdogs_of(run: RemoteRun, deadline: int) -> list[int]:
    """The pids of this run's watchdog (its command line names the deadline and the run's pid file)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if entry.name.isdigit() and str(deadline) in argv and run.path("pid") in argv:
            found.append(int(entry.name))
    return found


def test_the_node_stops_its_run_at_its_own_deadline_with_no_controller(tmp_path: Path) -> None:
    """Nothing follows the run (the controller's laptop sleeps, its terminal is closed): the watchdog
    started with it stops the inner work and the process group at the deadline, and says so."""
    shell, run = LocalShell(tmp_path), RemoteRun("lab", "d1")
    deadline = int(time.time()) + 2
    code, said = shell.capture(run.start_command("echo begun; sleep 300 & sleep 300; echo never",
                                                 deadline=deadline,
                                                 inner_stop="echo inner > lab/stopped-inner"), timeout=30)
    assert code == 0 and said.strip() == "started"
    wait_until(lambda: (tmp_path / "lab/results/d1.pid").is_file(), "the pid file", 30)
    pgid = int((tmp_path / "lab/results/d1.pid").read_text())

    def group_gone() -> bool:  # as _alive reads it: the first process is the group once it ran setsid
        for probe in (lambda: os.killpg(pgid, 0), lambda: os.kill(pgid, 0)):
            try:
                probe()
                return False
            except ProcessLookupError:
                pass
        return True

    wait_until(group_gone, "the node's watchdog to stop the run", 30)
    assert time.time() >= deadline  # not before its time
    assert (tmp_path / "lab/stopped-inner").is_file()  # the work handed on was stopped first
    log = (tmp_path / "lab/results/d1.log").read_text()
    assert "begun" in log and "never" not in log and "[node] the run's deadline (" in log
    assert shell.capture(run.poll_command(0), timeout=30)[1].splitlines()[0] == "deadline"
    wait_until(lambda: not watchdogs_of(run, deadline), "the watchdog to end", 30)
    # a controller that wakes up afterwards reads the whole log and that the node stopped it
    seen: list[str] = []
    followed = follow(lambda: shell, run, deadline, poll_s=0.1, out=seen.append, shell=shell)
    assert followed.stopped_at_deadline and followed.stopped_by == "the node" and followed.exit_code is None
    assert "[node] the run's deadline" in "".join(seen)


def test_a_run_ending_before_its_deadline_leaves_no_watchdog(tmp_path: Path) -> None:
    shell, run = LocalShell(tmp_path), RemoteRun("lab", "d2")
    deadline = int(time.time()) + 3600
    code, _ = shell.capture(run.start_command("echo done", deadline=deadline), timeout=30)
    assert code == 0
    followed = follow(lambda: shell, run, deadline, poll_s=0.1, out=lambda _: None, shell=shell)
    assert followed.exit_code == 0 and not followed.stopped_at_deadline
    wait_until(lambda: not watchdogs_of(run, deadline), "the watchdog to end with the run", 15)
    assert not (tmp_path / "lab/results/d2.deadline").exists()


class Running:
    """A node whose run never ends by itself: each poll says ``running``; what is sent is recorded.
    ``on_poll`` runs at each poll (the test moves its clocks there); ``stop_raises`` fails the stop."""

    def __init__(self, on_poll, stop_raises: BaseException | None = None) -> None:
        self.commands: list[tuple[str, float]] = []
        self.on_poll = on_poll
        self.stop_raises = stop_raises

    def capture(self, command: str, timeout: float) -> tuple[int, str]:
        self.commands.append((command, timeout))
        if "base64" in command:
            self.on_poll()
            return 0, "running\n\n"
        if self.stop_raises is not None:
            raise self.stop_raises
        return 0, ""


def test_the_deadline_is_on_the_wall_clock_not_the_monotonic_one(monkeypatch) -> None:
    """A laptop that sleeps: its monotonic clock stands still while the wall clock moves past the
    deadline. The first poll after waking sees the deadline; the node gets the grace to stop its run
    itself, then the controller stops it."""
    monkeypatch.setattr(time, "monotonic", lambda: 1000.0)  # frozen during the "suspend"
    wall = [1_800_000_000.0]
    polls = [0]

    def on_poll() -> None:
        polls[0] += 1
        if polls[0] == 3:
            wall[0] += 3 * 3600  # the lid was closed for three hours

    run = RemoteRun("lab", "w1")
    shell = Running(on_poll)

    def sleep(seconds: float) -> None:
        wall[0] += seconds

    followed = follow(lambda: shell, run, wall[0] + 3600, inner_stop="stop-inner", inner_wait_s=120,
                      stop_grace_s=240, poll_s=10, clock=lambda: wall[0], sleep=sleep, out=lambda _: None,
                      shell=shell)
    assert followed.stopped_at_deadline and followed.stopped_by == "the controller"
    assert polls[0] == 3  # stopped at the first poll after waking (it was already past the grace)
    stop, timeout = shell.commands[-1]
    assert stop == run.stop_command("stop-inner") and timeout > 120 + 60  # outlasts the inner stop's wait


def test_the_controller_leaves_the_node_its_grace_before_stopping_it() -> None:
    wall = [0.0]
    run = RemoteRun("lab", "w2")
    shell = Running(lambda: None)

    def sleep(seconds: float) -> None:
        wall[0] += seconds

    followed = follow(lambda: shell, run, 100.0, stop_grace_s=240, poll_s=10, clock=lambda: wall[0],
                      sleep=sleep, out=lambda _: None, shell=shell)
    assert followed.stopped_by == "the controller" and 340.0 <= wall[0] < 350.0
    assert sum("base64" in c for c, _ in shell.commands) == 35  # polled on until the grace was over


def test_a_stop_command_that_times_out_still_reports_the_stop_at_the_deadline() -> None:
    """The stop waits for the inner run and the process group; an SSH timeout on it is not a failure
    of its own: the run was stopped at the deadline (and the node's watchdog stops it regardless)."""

    class CommandTimedOut(Exception):  # invoke's, by name
        pass

    run = RemoteRun("lab", "w3")
    shell = Running(lambda: None, stop_raises=CommandTimedOut("Command did not complete within 240 seconds!"))
    followed = follow(lambda: shell, run, 0.0, clock=lambda: 1.0, sleep=lambda _: None, out=lambda _: None,
                      shell=shell)
    assert followed.stopped_at_deadline and followed.exit_code is None
    assert followed.stop_detail.startswith("the stop command did not finish (CommandTimedOut: ")
