"""Every wait of the instructor's run rides out an error that may pass, and ends at once on one that cannot
(issue 42, finding 8). The errors are the libraries' own classes: keystoneauth's (what Blazar's and
Neutron's clients raise through it), novaclient's ``NotFound``, python-chi's ``ResourceError`` wrapping one
as its ``refresh`` does."""

from __future__ import annotations

from datetime import timedelta

import pytest
from chi.exception import ResourceError
from keystoneauth1.exceptions.connection import ConnectFailure
from keystoneauth1.exceptions.http import Forbidden, ServiceUnavailable, Unauthorized
from novaclient.exceptions import NotFound

import provisioning
from provisioning.config import ProvisioningError, from_env
from tests.unit.conftest import FakeLease, FakeServer

LEASE = "serve_system_alice"
SERVER = "node-serve-system-alice"


def config(**changes: object) -> provisioning.ChameleonConfig:
    return from_env(env={}, **{"project": "CHI-231095", "code_source": "git",
                               "repo_url": "https://git.example.org/serve-lab.git", **changes})


def refresh_failed(cause: BaseException) -> ResourceError:
    """What python-chi 1.2.10's ``Server.refresh`` raises: ``ResourceError`` raised inside ``except``."""
    try:
        try:
            raise cause
        except Exception as exc:
            raise ResourceError(f"Could not refresh server: {exc}")  # noqa: B904  # as python-chi does
    except ResourceError as wrapped:
        return wrapped


def test_what_may_pass_and_what_cannot() -> None:
    from provisioning.errors import gone, permanent, transient

    assert transient(ConnectFailure("Unable to establish connection")) and not permanent(ConnectFailure())
    assert transient(ServiceUnavailable()) and transient(refresh_failed(ServiceUnavailable()))
    assert transient(ConnectionResetError(104, "Connection reset by peer"))
    for refused in (Unauthorized(), Forbidden(), NotFound(404), refresh_failed(NotFound(404))):
        assert permanent(refused) and not transient(refused), refused
    assert gone(refresh_failed(NotFound(404))) and not gone(refresh_failed(Unauthorized()))
    assert not transient(ResourceError("Multiple matching servers found")) and not permanent(ValueError("x"))


@pytest.mark.parametrize(("cause", "says"), [
    (NotFound(404, "No server with a name or ID of 'None' exists."),
     f"server {SERVER} is gone (ResourceError: Could not refresh server: No server with a name or ID of "
     "'None' exists. (HTTP 404)): it was deleted while the lab waited for it to boot; run this step again to "
     "launch a new one (the lease is reused)"),
    (Unauthorized("The request you have made requires authentication."),
     f"Chameleon refused the credentials while waiting for server {SERVER} (ResourceError: Could not refresh "
     "server: The request you have made requires authentication. (HTTP 401)): Chameleon refused the "
     "credentials: source a current openrc")], ids=["deleted", "401"])
def test_a_failure_no_retry_mends_ends_the_boot_wait_at_once(fake_chi, student, cause, says: str) -> None:
    """Issue 42: the boot wait retried a server deleted meanwhile, or an expired credential, for hours."""
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.server.wait_failures = [refresh_failed(cause)] * 100
    with pytest.raises(ProvisioningError) as caught:
        provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    assert str(caught.value).startswith(says) and "\n" not in str(caught.value)
    assert [n for n in fake_chi.rec.names() if n == "Server.wait"] == ["Server.wait"]  # not tried again
    assert fake_chi.clock.slept == []


def flaky_lease_wait(monkeypatch: pytest.MonkeyPatch, failures: list[BaseException]) -> None:
    """Inside the lease wait, the next status reads (Blazar calls in python-chi) fail with ``failures``."""
    from provisioning import lease as lease_module

    read, wait = FakeLease.status.fget, lease_module.wait_lease_active
    armed: list[BaseException] = []

    def flaky(lease: FakeLease) -> str | None:
        if armed:
            raise armed.pop(0)
        return read(lease)

    def waiting(*args, **kwargs):
        armed[:] = failures
        return wait(*args, **kwargs)

    monkeypatch.setattr(FakeLease, "status", property(flaky, FakeLease.status.fset))
    monkeypatch.setattr(lease_module, "wait_lease_active", waiting)


def test_a_flaky_blazar_during_the_lease_wait_is_tried_again(fake_chi, student, monkeypatch, capsys) -> None:
    """Issue 42: one transient Blazar error in up to 40 min of lease polls tore the run down, deleting the
    slot it had just created."""
    fake_chi.lease.activation_lag = timedelta(minutes=3)  # a new lease: PENDING for 3 min (the fake clock)
    flaky_lease_wait(monkeypatch, [ConnectFailure("Connection reset by peer"), ServiceUnavailable(),
                                   ServiceUnavailable()])
    node = provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    assert node is not None and "Lease.delete" not in fake_chi.rec.names()
    out = capsys.readouterr().out
    assert out.count(f"Reading lease {LEASE}'s status failed (ServiceUnavailable: Service Unavailable "
                     "(HTTP 503)); trying again every 30 s until the wait's end: the lease is kept "
                     "meanwhile") == 1
    assert f"Reading lease {LEASE}'s status failed (ConnectFailure: Connection reset by peer)" in out
    assert f"Lease {LEASE} is ACTIVE" in out


def test_a_refused_credential_ends_the_lease_wait_at_once(fake_chi, student, monkeypatch) -> None:
    fake_chi.lease.add_existing(LEASE, "PENDING", starts_in=timedelta(minutes=5))
    flaky_lease_wait(monkeypatch, [Unauthorized("The request you have made requires authentication.")] * 50)
    with pytest.raises(ProvisioningError) as caught:
        provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    assert str(caught.value).startswith(f"reading lease {LEASE}'s status failed (Unauthorized: The request "
                                        "you have made requires authentication. (HTTP 401)): Chameleon "
                                        "refused")
    assert fake_chi.clock.slept == []


def test_a_flaky_network_api_right_after_the_boot_is_tried_again(fake_chi, student, monkeypatch,
                                                                 capsys) -> None:
    """Issue 42: one 503 from Neutron while the floating IP is allocated or associated, right after a 10-20
    min boot, tore the run down. A try whose answer was lost may have allocated the IP: it is used, not a
    second one allocated beside it."""
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    made = fake_chi.network.allocate

    def allocated_but_answer_lost(port_id=None):  # Neutron made it, the reply never arrived
        fip = made(port_id)
        fip["description"] = f"serve-system-lab: {SERVER}"
        monkeypatch.setattr(fake_chi.network, "allocate", made)
        raise ServiceUnavailable()

    monkeypatch.setattr(fake_chi.network, "allocate", allocated_but_answer_lost)
    associate = FakeServer.associate_floating_ip

    def reset_once(self, fip=None, port_id=None):
        monkeypatch.setattr(FakeServer, "associate_floating_ip", associate)
        raise ConnectFailure("Connection reset by peer")

    monkeypatch.setattr(FakeServer, "associate_floating_ip", reset_once)
    node = provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    assert node is not None and node.address == "129.114.108.7"
    assert len(fake_chi.network.floating_ips) == 1  # no second IP beside the one the lost try made
    out = capsys.readouterr().out
    assert ("Allocating a floating IP for this run failed (ServiceUnavailable: Service Unavailable (HTTP "
            "503)); trying again in 15 s (attempt 1 of 4)") in out
    assert "Floating IP 129.114.108.7 was allocated by a try that failed: using it" in out
    assert (f"Associating floating IP 129.114.108.7 with server {SERVER} failed (ConnectFailure: Connection "
            "reset by peer); trying again in 15 s (attempt 1 of 4)") in out
    assert fake_chi.clock.slept == [15.0, 15.0]


def test_a_full_quota_is_not_tried_again(fake_chi, student) -> None:
    from keystoneauth1.exceptions.http import Conflict

    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.rec.failures["neutron.create_floatingip"] = Conflict("Quota exceeded for resources: "
                                                                  "['floatingip']")
    with pytest.raises(ProvisioningError, match=r"^allocating a floating IP for this run failed \(Conflict"):
        provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    assert fake_chi.rec.names().count("neutron.create_floatingip") == 1
