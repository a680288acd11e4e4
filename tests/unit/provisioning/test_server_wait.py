"""A slow bare-metal boot is waited for as long as the lease allows, not torn down after 20 minutes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from chi.exception import ResourceError
from keystoneauth1.exceptions.connection import ConnectFailure

import provisioning
from provisioning.config import ProvisioningError, from_env
from provisioning.server import TEARDOWN_MARGIN_S
from provisioning.times import to_utc
from tests.unit.conftest import ServiceError
from tests.unit.network_stand_ins import refresh_failed

LEASE = "serve_system_alice"


def config(**changes: object) -> provisioning.ChameleonConfig:
    return from_env(env={}, **{"project": "CHI-231095", "code_source": "git",
                               "repo_url": "https://git.example.org/serve-lab.git", **changes})


def wait_timeouts(fake_chi) -> list[int]:
    return [kwargs["timeout"] for name, _, kwargs in fake_chi.rec.calls if name == "Server.wait"]


def test_the_server_is_waited_for_until_the_lease_end_less_the_teardown(fake_chi, student, capsys) -> None:
    fake_chi.lease.add_existing(LEASE, "ACTIVE")  # made ahead; ends 3 h after now in the stand-in
    provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    end = to_utc(fake_chi.lease.leases[0].end_date)
    assert wait_timeouts(fake_chi) == [int((end - fake_chi.clock.now()).total_seconds() - TEARDOWN_MARGIN_S)]
    assert wait_timeouts(fake_chi)[0] > 3 * 20 * 60  # far beyond python-chi's 20 min
    out = capsys.readouterr().out
    assert ("Waiting for server node-serve-system-alice to become ACTIVE (bare-metal boots take 10–20 min): "
            "up to 1 h 45 min, as long as the lease allows: until 2026-11-23 10:45 CST at CHI@TACC "
            "(17:45 CET here), its end less 15 min kept for the teardown") in out


def test_a_set_server_timeout_is_kept(fake_chi, student) -> None:
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    provisioning.launch(config(server_timeout_s=1800), chi=fake_chi.api, setup_node=False)
    assert wait_timeouts(fake_chi) == [1800]


def test_a_boot_that_outlasts_the_lease_says_so_in_one_line(fake_chi, student) -> None:
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.rec.failures["Server.wait"] = ServiceError("Timeout waiting for server to reach ACTIVE status")
    with pytest.raises(ProvisioningError) as caught:
        provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    message = str(caught.value)
    assert "did not become ACTIVE within 1 h 45 min (as long as the lease allows: until" in message
    assert message.endswith("the lease has no time left for it: delete it (teardown) and reserve a new lease")
    assert "\n" not in message


def test_a_wait_without_the_lease_end_says_to_wait_again(student) -> None:
    """A lease whose end is not known gets python-chi's usual limit: its timeout is no sign that the
    lease has run out, so the line says to run the step again (the server is reused)."""
    from provisioning.server import DEFAULT_SERVER_WAIT_S, wait_server_active

    class Booting:
        def wait(self, status: str, show: str, timeout: int) -> None:
            assert timeout == int(DEFAULT_SERVER_WAIT_S)
            raise ServiceError("Timeout waiting for server to reach ACTIVE status")

    with pytest.raises(ProvisioningError) as caught:
        wait_server_active(Booting(), config(), lease=None)
    message = str(caught.value)
    assert "python-chi's usual limit: the lease's end is not known" in message
    assert message.endswith("run this step again to keep waiting (the server is reused)")


# python-chi's refresh around a connection reset (keystoneauth's ConnectFailure, as its session raises it)
RESET = refresh_failed(ConnectFailure("Unable to establish connection: ('Connection aborted.', "
                                      "ConnectionResetError(104, 'Connection reset by peer'))"))


def test_a_flaky_api_while_the_node_boots_is_tried_again_not_torn_down(fake_chi, student, capsys) -> None:
    """A connection reset while python-chi reads the status (its ``refresh`` raises ResourceError) is no
    boot timeout: the wait goes on, the error printed once however often it comes."""
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.server.wait_failures = [RESET, RESET, RESET, ConnectionError("Connection refused")]
    node = provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    assert node is not None and node.server.status == "ACTIVE"
    timeouts = wait_timeouts(fake_chi)
    assert len(timeouts) == 5 and timeouts == sorted(timeouts, reverse=True)  # each until the same deadline
    assert timeouts[0] - timeouts[-1] == 4 * 30  # 30 s between tries (the fake clock)
    out = capsys.readouterr().out
    assert out.count("Reading server node-serve-system-alice's status failed (ResourceError: Could not "
                     "refresh server") == 1
    assert out.count("(ConnectionError: Connection refused); trying again every 30 s") == 1
    assert "did not become ACTIVE" not in out and "delete it" not in out
    assert "Server.delete" not in fake_chi.rec.names()


def test_errors_until_the_deadline_end_the_wait_in_one_line(fake_chi, student) -> None:
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.server.wait_failures = [RESET] * 1000
    with pytest.raises(ProvisioningError) as caught:
        provisioning.launch(config(server_timeout_s=600), chi=fake_chi.api, setup_node=False)
    message = str(caught.value)
    assert message.startswith("server node-serve-system-alice's status could not be read until the wait's "
                              "end (10 min, server_timeout_s=600; the last error: ResourceError: Could not")
    assert message.endswith("check the server in the GUI (Compute → Instances) and run this step again (the "
                            "server is reused)")
    assert "\n" not in message and len(wait_timeouts(fake_chi)) == 20  # every 30 s for 10 min


def test_a_signal_during_the_wait_is_not_tried_again(fake_chi, student) -> None:
    """A stop is no failure of the step: it passes through as it came (a BaseException, as Ctrl-C)."""
    from provisioning.errors import Terminated

    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    stop = Terminated("stopped by SIGTERM")
    fake_chi.server.wait_failures = [stop]
    with pytest.raises(Terminated) as caught:
        provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    assert caught.value is stop
    assert len(wait_timeouts(fake_chi)) == 1


def test_a_stop_a_library_wrapped_is_still_a_stop(fake_chi, student) -> None:
    """python-chi's ``refresh`` wraps what it catches as ``ResourceError``: a stop inside is re-raised."""
    from provisioning.errors import Terminated

    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    stop = Terminated("stopped by SIGHUP")
    try:
        try:
            raise stop
        except BaseException as exc:
            raise ResourceError(f"Could not refresh server: {exc}") from None
    except ResourceError as wrapped:
        wrapped.__context__ = stop  # as ``raise`` inside ``except`` chains it, without ``from None``
        fake_chi.server.wait_failures = [wrapped]
    with pytest.raises(Terminated) as caught:
        provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    assert caught.value is stop and len(wait_timeouts(fake_chi)) == 1


def test_the_plan_says_how_long_it_waits() -> None:
    steps = {s.name: s.detail for s in provisioning.provision_plan(config())}
    assert "wait until ACTIVE (as long as the lease allows: until its end less the teardown's margin)" in \
        steps["server"]
    assert timedelta(seconds=TEARDOWN_MARGIN_S) == timedelta(minutes=15)
