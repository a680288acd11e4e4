"""Every wait rides out an error that may pass and ends at once on one that cannot, reading each error the way
its library raises it (issue 42, finding 8; issue 53, findings 3, 6, 7 and 10).

The errors are the libraries' own classes, raised where each library raises them: blazarclient's one
``BlazarClientException`` with the HTTP status in ``kwargs["code"]`` (its ``code`` attribute stays the class
default, 500) under python-chi's own ``Lease`` (``use_chi_leases``); neutronclient's exceptions with
``status_code`` (``NeutronClientException`` for a 502, 504 or 429, which it has no class of its own for) for
the floating IP's allocation and association; keystoneauth's ``http_status`` where keystoneauth raises (a
connection failure under Blazar's session, Nova and Keystone's HTTP errors); python-chi's ``ResourceError``
wrapping what its ``refresh`` caught; openstacksdk's ``HttpException`` under python-chi's own association.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from chi.exception import ResourceError
from keystoneauth1.exceptions.connection import ConnectFailure
from keystoneauth1.exceptions.http import Forbidden, ServiceUnavailable, Unauthorized
from neutronclient.common.exceptions import ConnectionFailed, NeutronClientException, OverQuotaClient
from neutronclient.common.exceptions import ServiceUnavailable as NeutronUnavailable
from novaclient.exceptions import NotFound

import provisioning
from provisioning.config import ProvisioningError, from_env
from provisioning.errors import gone, http_status, permanent, transient
from tests.unit.network_stand_ins import blazar_error, refresh_failed, use_chi_leases

LEASE = "serve_system_alice"
SERVER = "node-serve-system-alice"


def config(**changes: object) -> provisioning.ChameleonConfig:
    return from_env(env={}, **{"project": "CHI-231095", "code_source": "git",
                               "repo_url": "https://git.example.org/serve-lab.git", **changes})


def neutron_error(status: int) -> NeutronClientException:
    """What neutronclient's ``exception_handler_v20`` raises for a status it has no class of its own for."""
    return NeutronClientException(message=f"{status}-<html>gateway</html>", status_code=status)


def test_what_may_pass_and_what_cannot() -> None:
    assert transient(ConnectFailure("Unable to establish connection")) and not permanent(ConnectFailure())
    assert transient(ServiceUnavailable()) and transient(refresh_failed(ServiceUnavailable()))
    assert transient(ConnectionResetError(104, "Connection reset by peer"))
    for refused in (Unauthorized(), Forbidden(), NotFound(404), refresh_failed(NotFound(404))):
        assert permanent(refused) and not transient(refused), refused
    assert gone(refresh_failed(NotFound(404))) and not gone(refresh_failed(Unauthorized()))
    assert not transient(ResourceError("Multiple matching servers found")) and not permanent(ValueError("x"))


@pytest.mark.parametrize(("raised", "status", "passes"), [
    (blazar_error(404, "Object with {'lease_id': 'lease-1'} not found"), 404, False),
    (blazar_error(403, "Policy doesn't allow blazar:leases:get"), 403, False),
    (blazar_error(503), 503, True),
    (neutron_error(502), 502, True), (neutron_error(504), 504, True), (neutron_error(429), 429, True),
    (NeutronUnavailable(message="Service Unavailable"), 503, True),
    (OverQuotaClient(message="Quota exceeded for resources: ['floatingip']."), 409, False),
], ids=["blazar-404", "blazar-403", "blazar-503", "neutron-502", "neutron-504", "neutron-429", "neutron-503",
        "neutron-quota"])
def test_each_librarys_status_is_read_where_it_keeps_it(raised: Exception, status: int, passes: bool) -> None:
    """Issue 53, findings 6 and 10: ``http_status`` read blazarclient's ``code`` (500, the class default)
    before ``kwargs["code"]``, so a lease deleted in the GUI (404) was "transient"; it never read
    neutronclient's ``status_code``, so a 502, 504 or 429 was not tried again."""
    assert http_status(raised) == status
    assert transient(raised) is passes and permanent(raised) is (status in (401, 403, 404))
    assert gone(raised) is (status == 404)


def test_a_connection_lost_under_neutron_may_pass() -> None:
    """neutronclient turns keystoneauth's connection failure into its ``ConnectionFailed`` (status 0)."""
    try:
        try:
            raise ConnectFailure("Connection reset by peer")
        except ConnectFailure as exc:
            raise ConnectionFailed(reason=exc)  # noqa: B904  # as neutronclient's client does
    except ConnectionFailed as wrapped:
        assert transient(wrapped) and http_status(wrapped) is None


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


def test_the_boot_wait_asks_whether_an_error_may_pass(fake_chi, student) -> None:
    """Issue 53, finding 7: the boot wait retried everything but 401/403/404 and the timeout; python-chi's
    "Multiple matching servers" (two servers with the lab's name: no retry mends it) was retried 310 times
    over 2.58 h. It now ends at once, in one line; only what ``errors.transient`` calls passing is retried."""
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    two = ResourceError(f'Multiple matching servers found for name "{SERVER}"')  # python-chi's get_server_id
    fake_chi.server.wait_failures = [two] * 400
    with pytest.raises(ProvisioningError) as caught:
        provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    assert str(caught.value) == (
        f"waiting for server {SERVER} failed (ResourceError: Multiple matching servers found for name "
        f"\"{SERVER}\"): trying again would not mend it; check the server in the GUI (Compute → Instances) "
        "and run this step again (the server is reused)")
    assert fake_chi.rec.names().count("Server.wait") == 1 and fake_chi.clock.slept == []


def test_a_flaky_blazar_during_the_lease_wait_is_tried_again(fake_chi, student, monkeypatch, capsys) -> None:
    """Issue 42: one transient Blazar error in up to 40 min of lease polls tore the run down, deleting the
    slot it had just created. python-chi's own ``Lease.status`` reads Blazar (``lease.get``) each time."""
    blazar = use_chi_leases(fake_chi, monkeypatch)
    blazar.activation_lag = timedelta(minutes=3)  # a new lease: PENDING for 3 min (the fake clock)
    blazar.failures["get"] = [ConnectFailure("Connection reset by peer"), blazar_error(503, "Service "
                              "Unavailable"), blazar_error(503, "Service Unavailable")]
    node = provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    assert node is not None and list(blazar.leases) == ["lease-1"]
    out = capsys.readouterr().out
    assert out.count(f"Reading lease {LEASE}'s status failed (BlazarClientException: ERROR: Service "
                     "Unavailable); trying again every 30 s until the wait's end: the lease is kept "
                     "meanwhile") == 1
    assert f"Reading lease {LEASE}'s status failed (ConnectFailure: Connection reset by peer)" in out
    assert f"Lease {LEASE} is ACTIVE" in out


def test_a_lease_deleted_in_the_gui_ends_the_lease_wait_at_once(fake_chi, student, monkeypatch) -> None:
    """Issue 53, finding 6: Blazar's 404 for a lease deleted meanwhile read as a 500, "transient": the wait
    went on to the lease's start plus 10 min (here 15 min of reads), saying the lease was kept meanwhile."""
    blazar = use_chi_leases(fake_chi, monkeypatch)
    slot = blazar.add_existing(LEASE, starts_in=timedelta(minutes=5))
    from provisioning import times

    def deleted_meanwhile(seconds: float) -> None:  # the student deletes it in the GUI during the first poll
        blazar.leases.pop(slot["id"], None)
        fake_chi.clock.sleep(seconds)

    monkeypatch.setattr(times, "sleep", deleted_meanwhile)
    with pytest.raises(ProvisioningError) as caught:
        provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    assert str(caught.value) == (
        f"lease {LEASE} is gone (BlazarClientException: ERROR: Object with {{'lease_id': 'lease-1'}} not "
        "found): it was deleted (in the GUI, or by a teardown) while the lab waited for it; run this step "
        "again to create a new one")
    assert fake_chi.clock.slept == [30.0]  # one poll, not the wait's 15 min


def test_a_refused_credential_ends_the_lease_wait_at_once(fake_chi, student, monkeypatch) -> None:
    blazar = use_chi_leases(fake_chi, monkeypatch)
    blazar.add_existing(LEASE, starts_in=timedelta(minutes=5))
    blazar.failures["get"] = [blazar_error(401, "Authentication required")] * 50
    with pytest.raises(ProvisioningError) as caught:
        provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    assert str(caught.value).startswith(f"creating or reusing lease {LEASE} failed (BlazarClientException: "
                                        "ERROR: Authentication required): Chameleon refused the credentials")
    assert fake_chi.clock.slept == []


def test_a_slot_far_ahead_is_read_once_not_until_its_start(fake_chi, student, monkeypatch, capsys) -> None:
    """Issue 53, finding 3: the lease wait's first status read was tried again until the lease's start plus
    10 min: for a slot three days ahead, Blazar's 503s gave 8,660 reads over 72 h. It is one read now; the
    slot is recorded kept (reserved for a later run) before it, and the line says when it starts."""
    blazar = use_chi_leases(fake_chi, monkeypatch)
    blazar.failures["get"] = [blazar_error(503, "Service Unavailable")] * 10_000
    state = provisioning.State()
    lease = provisioning.reserve(config(lease_start="+3d"), chi=fake_chi.api)
    assert lease is not None and list(blazar.leases) == ["lease-1"]
    assert fake_chi.rec.names().count("blazar.lease.get") == 1  # the wait's one read
    assert sum(fake_chi.clock.slept) < 60.0
    [record] = provisioning.State(state.path).resources
    assert (record.origin, record.keep, record.pending) == ("created", "starts 2026-11-26 15:00 UTC", "")
    out = capsys.readouterr().out
    assert (f"Reading lease {LEASE}'s status failed (BlazarClientException: ERROR: Service Unavailable): not "
            "read again now, since it starts later than this step waits") in out
    assert f"Lease {LEASE} starts 2026-11-26 09:00 CST at CHI@TACC" in out


def test_a_stop_in_a_far_slots_status_read_leaves_it_kept(fake_chi, student, monkeypatch) -> None:
    """Finding 3, its second half: the slot was marked kept only after that read, so a Ctrl-C in it left
    the slot just created recorded without its ``keep``, and any teardown of the state file (the CI clean-up
    step's included) deleted the class's reservation."""
    import signal
    import time

    from tests.unit.network_stand_ins import StandInNode, Stopper

    blazar = use_chi_leases(fake_chi, monkeypatch)
    node, read = StandInNode(), type(blazar).get

    def slow_read(self, lease_id):  # Blazar answers the status read slowly: the Ctrl-C lands inside it
        node.blocked.set()
        time.sleep(20.0)
        return read(self, lease_id)

    monkeypatch.setattr(type(blazar), "get", slow_read)
    with Stopper(signal.SIGINT, node.blocked, delay=0.2), pytest.raises(KeyboardInterrupt):
        provisioning.reserve(config(lease_start="+3d"), chi=fake_chi.api)
    [record] = provisioning.State().resources
    assert (record.origin, record.keep) == ("created", "starts 2026-11-26 15:00 UTC")
    monkeypatch.setattr(type(blazar), "get", read)
    result = provisioning.teardown(config(), chi=fake_chi.api)
    assert result is not None and result.deleted == [] and list(blazar.leases) == ["lease-1"]
    assert result.kept == [f"lease {LEASE} (reserved ahead for a later run: starts 2026-11-26 15:00 UTC)"]


def test_a_flaky_network_api_right_after_the_boot_is_tried_again(fake_chi, student, capsys) -> None:
    """Issue 42: one 503 from Neutron while the floating IP is allocated or associated, right after a 10-20
    min boot, tore the run down. A try whose answer was lost may have allocated the IP: it is used, not a
    second one allocated beside it. Issue 53, finding 10: the association is Neutron's own call now (python-
    chi's swallowed Neutron's errors), and neutronclient's 504 carries its status in ``status_code``."""
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    lost: list[str] = []

    def answer_lost(fip):  # Neutron made it, the reply never arrived
        if not lost:
            lost.append(fip["floating_ip_address"])
            raise NeutronUnavailable(message="Service Unavailable")

    fake_chi.network.after_create = answer_lost
    fake_chi.network.neutron_failures["update_floatingip"] = [neutron_error(504)]
    node = provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    assert node is not None and node.address == "129.114.108.7" == lost[0]
    assert len(fake_chi.network.floating_ips) == 1  # no second IP beside the one the lost try made
    out = capsys.readouterr().out
    assert ("Allocating a floating IP for this run failed (ServiceUnavailable: Service Unavailable); trying "
            "again in 15 s (attempt 1 of 4)") in out
    assert "Floating IP 129.114.108.7 was allocated by a try that failed: using it" in out
    assert (f"Associating floating IP 129.114.108.7 with server {SERVER} failed (NeutronClientException: "
            "504-<html>gateway</html>); trying again in 15 s (attempt 1 of 4)") in out
    assert fake_chi.clock.slept == [15.0, 15.0]


def test_python_chis_own_association_would_hide_a_504(fake_chi, monkeypatch) -> None:
    """Finding 10, the library's side: python-chi's ``associate_floating_ip`` over openstacksdk's network
    proxy (stood in: its ``ports`` and ``update_ip``, which raises openstacksdk's ``HttpException``, a 504)
    turns it into ``ResourceError("None of the ports can route ...")``, without the status and not
    transient: the four association tries the lab claimed never happened for it."""
    import inspect
    from types import SimpleNamespace

    import chi.network as chi_network
    import chi.server as chi_server
    import openstack.network.v2._proxy
    from openstack.exceptions import HttpException

    class NetworkProxy:  # openstacksdk's, as python-chi drives it
        def ports(self, **query):
            return iter([{"id": "port-server-1"}])

        def update_ip(self, floating_ip, if_revision=None, **attrs):
            raise HttpException(message="Gateway Timeout", http_status=504)

    real = openstack.network.v2._proxy.Proxy
    for name in ("ports", "update_ip"):
        ours, theirs = (inspect.signature(getattr(c, name)) for c in (NetworkProxy, real))
        assert [p.name for p in ours.parameters.values()] == [p.name for p in theirs.parameters.values()]
    proxy = SimpleNamespace(network=NetworkProxy())
    monkeypatch.setattr(chi_server, "connection", lambda session=None: proxy)
    monkeypatch.setattr(chi_server, "session", lambda: None)
    monkeypatch.setattr(chi_network, "neutron", lambda session=None: fake_chi.network.neutron())
    fake_chi.network.add_existing()
    with pytest.raises(ResourceError) as caught:
        chi_server.associate_floating_ip("server-1", "129.114.108.7")
    assert str(caught.value).startswith("None of the ports can route to floating ip 129.114.108.7")
    assert http_status(caught.value) is None and not transient(caught.value)


def test_a_full_quota_is_not_tried_again(fake_chi, student) -> None:
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.network.neutron_failures["create_floatingip"] = [
        OverQuotaClient(message="Quota exceeded for resources: ['floatingip'].", status_code=409)]
    with pytest.raises(ProvisioningError, match=r"^allocating a floating IP for this run failed \(OverQuota"):
        provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    assert fake_chi.rec.names().count("neutron.create_floatingip") == 1
