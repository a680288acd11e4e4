"""A stop reaches the teardown within seconds at every step of `./lab run --target chameleon` (issue 42).

Each case runs the instructor's whole run in this process (``run_chameleon``) with the recording python-chi
stand-in, python-chi's own ``Server.wait``/``refresh``/``execute``/``upload``/``ssh_connection`` and Fabric's
own ``Connection``/``Remote``/``Transfer`` over a stand-in network (``tests/unit/network_stand_ins.py``).
One step blocks as the network can make it block (a Blazar or Nova read that takes its time, a remote
command that runs long); another thread sends SIGTERM, SIGHUP or SIGINT (Ctrl-C) 0.3 s into it. The
measure is the time from the signal to the teardown's first call to Chameleon, required under
``LIMIT_S``; afterwards everything the run created is deleted.
"""

from __future__ import annotations

import signal
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import provisioning
from provisioning.config import from_env
from servelab.lab.runner import run_chameleon
from tests.unit.conftest import FakeLease
from tests.unit.network_stand_ins import StandInNode, Stopper, use_chi_server

LIMIT_S = 10.0  # from the stop to the teardown's first call (issue 42, must hold 2)
BLOCK_S = 30.0  # how long the blocked step would take by itself
SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGHUP": signal.SIGHUP, "Ctrl-C": signal.SIGINT}


def config() -> provisioning.ChameleonConfig:
    return from_env(env={}, project="CHI-231095", code_source="git", repo_url="https://git.example.org/lab.git")


def slow_lease_reads(monkeypatch: pytest.MonkeyPatch, blocked: threading.Event) -> None:
    """The first status read of a PENDING lease (a Blazar call in python-chi) takes ``BLOCK_S``."""
    read = FakeLease.status.fget

    def slow(lease: FakeLease) -> str | None:
        status = read(lease)
        if status == "PENDING" and not blocked.is_set():
            blocked.set()
            time.sleep(BLOCK_S)
        return status

    monkeypatch.setattr(FakeLease, "status", property(slow, FakeLease.status.fset))


def block(step: str, node: StandInNode, fake_chi: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``step`` block as the network would."""
    if step == "lease wait":  # a lease made now is PENDING until Blazar starts it (the fake clock)
        fake_chi.lease.activation_lag = timedelta(minutes=5)
        slow_lease_reads(monkeypatch, node.blocked)
    elif step == "boot wait":  # Nova says BUILD, and each read takes a second: the signal lands inside one

        def slow_nova(name: str) -> None:
            node.blocked.set()
            time.sleep(1.0)

        use_chi_server(fake_chi, monkeypatch, node, hook=slow_nova, boot_s=BLOCK_S)
        return
    else:
        node.slow = {"node set-up": {"node_setup.sh": BLOCK_S}, "remote command": {"./lab jupyter": BLOCK_S},
                     "node run": {"base64": BLOCK_S}, "fetch": {"tar -czf": BLOCK_S}}[step]
    use_chi_server(fake_chi, monkeypatch, node)


@pytest.mark.parametrize("signal_name", list(SIGNALS))
@pytest.mark.parametrize("step", ["lease wait", "boot wait", "node set-up", "remote command", "node run",
                                  "fetch"])
def test_a_stop_reaches_the_teardown_within_seconds(step: str, signal_name: str, fake_chi, student,
                                                    tmp_path: Path, monkeypatch) -> None:
    node = StandInNode()
    block(step, node, fake_chi, monkeypatch)
    teardown_from: list[int] = []
    teardown = provisioning.teardown

    def noted(*args: Any, **kwargs: Any) -> Any:
        teardown_from.append(len(fake_chi.rec.calls))
        return teardown(*args, **kwargs)

    monkeypatch.setattr(provisioning, "teardown", noted)
    with Stopper(SIGNALS[signal_name], node.blocked) as stopper:
        run_dir, outcome, _ = run_chameleon("quick", results_base=tmp_path, config=config(), chi=fake_chi.api,
                                            report=False)
    assert stopper.sent_at is not None, f"the run never reached the {step}"
    assert teardown_from, [s.step for s in outcome.steps]
    first_call = fake_chi.rec.at[teardown_from[0]]
    took = first_call - stopper.sent_at
    assert took < LIMIT_S, f"{signal_name} during the {step}: the teardown's first call {took:.1f} s later"
    steps = [(s.step, s.ok, s.detail) for s in outcome.steps]
    stopped = next(detail for name, ok, detail in steps if name == "stopped")
    assert stopped.startswith("stopped by SIGTERM" if signal_name == "SIGTERM" else
                              "stopped by SIGHUP" if signal_name == "SIGHUP" else "stopped by Ctrl-C"), steps
    assert steps[-1][:2] == ("teardown", True), steps
    state = provisioning.State(run_dir / provisioning.STATE_NAME)
    assert {r.kind: r.fate for r in state.resources if r.origin == "created"} == \
        ({"lease": "deleted"} if step == "lease wait" else
         {"lease": "deleted", "server": "deleted"} if step == "boot wait" else
         {"lease": "deleted", "server": "deleted", "floating_ip": "deleted"})
    assert not stopper.stray  # no signal came after the run gave its handlers back


def test_the_stops_fetch_opens_a_connection_of_its_own(fake_chi, student, tmp_path: Path,
                                                       monkeypatch) -> None:
    """A SIGTERM while the results are copied (the SFTP copy hangs, a dead connection): the stop's fetch
    copies on a new connection, never on the one the cut copy may still be reading on (paramiko's SFTP
    client is not safe for two threads: the second copy could hang to its 3-minute limit), and the cut
    one is closed."""
    node = StandInNode(slow_get_s=BLOCK_S)
    use_chi_server(fake_chi, monkeypatch, node)
    with Stopper(signal.SIGTERM, node.blocked) as stopper:
        run_dir, outcome, _ = run_chameleon("quick", results_base=tmp_path, config=config(), chi=fake_chi.api,
                                            report=False)
    assert stopper.sent_at is not None
    (cut, cut_path), (again, again_path) = node.gets
    assert again != cut, "the stop's fetch copied on the connection the cut copy was reading on"
    assert again_path.endswith("-stopped.tar.gz") and not cut_path.endswith("-stopped.tar.gz")
    steps = [(s.step, s.ok) for s in outcome.steps]
    assert steps[-3:] == [("stopped", False), ("fetch", True), ("teardown", True)], steps
    assert node.connections[cut].closed
    assert (run_dir / "partial.csv").read_text() == "measured before the stop\n"


def run_with_created(fake_chi: Any, tmp_path: Path) -> tuple[Path, Any]:
    run_dir, outcome, _ = run_chameleon("quick", results_base=tmp_path, config=config(), chi=fake_chi.api,
                                        report=False)
    return run_dir, outcome


def all_deleted(run_dir: Path) -> dict[str, str]:
    state = provisioning.State(run_dir / provisioning.STATE_NAME)
    return {r.kind: r.fate for r in state.resources if r.origin == "created"}


@pytest.mark.parametrize("instant", ["as the stop's fetch begins", "after the stop's fetch"])
def test_a_second_ctrl_c_during_the_stop_only_prints(instant: str, fake_chi, student, tmp_path: Path,
                                                     monkeypatch) -> None:
    """Issue 53, finding 9: the stop held SIGTERM and SIGHUP only; a second Ctrl-C between the stop and the
    teardown's own guard raised KeyboardInterrupt there and skipped the teardown: everything stayed held.
    Ctrl-C lands here at two such instants (in the main thread, as a terminal's does)."""
    import os

    from servelab.targets import chameleon

    node = StandInNode()
    block("node run", node, fake_chi, monkeypatch)
    if instant == "as the stop's fetch begins":
        say = chameleon.say

        def pressed_again(text: str) -> None:
            say(text)
            if text.startswith("[fetch] the run was stopped"):
                os.kill(os.getpid(), signal.SIGINT)

        monkeypatch.setattr(chameleon, "say", pressed_again)
    else:
        fetched = chameleon._fetch_when_stopped

        def then_pressed(*args: Any) -> None:
            fetched(*args)
            os.kill(os.getpid(), signal.SIGINT)

        monkeypatch.setattr(chameleon, "_fetch_when_stopped", then_pressed)
    with Stopper(signal.SIGTERM, node.blocked):
        try:
            run_dir, outcome = run_with_created(fake_chi, tmp_path)
        except KeyboardInterrupt:
            pytest.fail(f"a second Ctrl-C {instant} left the run before its teardown")
    steps = [(s.step, s.ok) for s in outcome.steps]
    assert steps[-1] == ("teardown", True), steps
    assert all_deleted(run_dir) == {"lease": "deleted", "server": "deleted", "floating_ip": "deleted"}
    assert "SIGINT received during the stop: finishing it first" in (run_dir / "controller.log").read_text()


def hanging_connects(monkeypatch: pytest.MonkeyPatch, after: threading.Event, started: threading.Event,
                     hang_s: float) -> None:
    """Every SSH connect after ``after`` is set hangs ``hang_s`` (a node whose sshd no longer answers)."""
    from tests.unit.network_stand_ins import StandInConnection

    def open_(self: Any) -> None:
        if after.is_set():
            started.set()
            time.sleep(hang_s)

    monkeypatch.setattr(StandInConnection, "open", open_)


def test_the_stops_fetch_counts_its_connect_within_its_limit(fake_chi, student, tmp_path: Path,
                                                             monkeypatch) -> None:
    """Issue 53, finding 11: the stop's fetch connected outside its 3-minute limit (Fabric opens the
    connection before invoke's command timeout starts): a node that no longer answers SSH held the way to
    the teardown for as long as the connect took. One deadline covers it now."""
    from servelab.targets import chameleon

    monkeypatch.setattr(chameleon, "STOPPED_FETCH_S", 1.0)
    node, fetching = StandInNode(), threading.Event()
    block("node run", node, fake_chi, monkeypatch)
    hanging_connects(monkeypatch, node.blocked, fetching, BLOCK_S)
    teardown_at = note_the_teardown(fake_chi, monkeypatch)
    with Stopper(signal.SIGTERM, node.blocked) as stopper:
        run_dir, outcome = run_with_created(fake_chi, tmp_path)
    took = teardown_at[0] - (stopper.sent_at or 0.0)
    assert fetching.is_set() and took < 1.0 + LIMIT_S / 2, f"the teardown began {took:.1f} s after the stop"
    fetch = next(s for s in outcome.steps if s.step == "fetch")
    assert not fetch.ok and "did not finish within 1 s" in fetch.detail
    assert all_deleted(run_dir) == {"lease": "deleted", "server": "deleted", "floating_ip": "deleted"}


def note_the_teardown(fake_chi: Any, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When the teardown begins (time.monotonic), filled in as it does."""
    began: list[float] = []
    teardown = provisioning.teardown

    def noted(*args: Any, **kwargs: Any) -> Any:
        began.append(time.monotonic())
        return teardown(*args, **kwargs)

    monkeypatch.setattr(provisioning, "teardown", noted)
    return began


@pytest.mark.parametrize("second", ["SIGTERM", "SIGHUP"])
def test_a_later_sigterm_or_sighup_cuts_the_stops_fetch_short(second: str, fake_chi, student, tmp_path: Path,
                                                               monkeypatch) -> None:
    """Finding 11: during the stop's fetch a second SIGTERM or SIGHUP only printed, so a supervisor that
    follows its SIGTERM with SIGKILL after a grace period killed the run before the teardown. A later signal
    (past the unwinding window) now ends the fetch and goes on to the teardown at once."""
    from provisioning.errors import SignalGuard

    monkeypatch.setattr(SignalGuard, "UNWINDING_S", 0.5)
    node, fetching = StandInNode(), threading.Event()
    block("node run", node, fake_chi, monkeypatch)
    hanging_connects(monkeypatch, node.blocked, fetching, BLOCK_S)
    teardown_at = note_the_teardown(fake_chi, monkeypatch)
    with Stopper(signal.SIGTERM, node.blocked), Stopper(SIGNALS[second], fetching, delay=1.0) as again:
        run_dir, outcome = run_with_created(fake_chi, tmp_path)
    assert again.sent_at is not None and teardown_at
    took = teardown_at[0] - again.sent_at
    assert took < 2.0, f"the teardown began {took:.1f} s after the second {second}"
    fetch = next(s for s in outcome.steps if s.step == "fetch")
    assert (fetch.ok, fetch.detail) == (False, f"skipped (stopped by {second} again)")
    assert all_deleted(run_dir) == {"lease": "deleted", "server": "deleted", "floating_ip": "deleted"}
