"""The teardown survives a failed read and releases only the IPs that are the lab's (issue 53, findings 4
and 5).

python-chi's ``Lease.status`` is a Blazar read each time (``lease.get``): here python-chi's own ``Lease`` and
``list_leases`` run over the stand-in Blazar (``StandInLeases``), whose failures are blazarclient's own
``BlazarClientException(..., code=503)``, as a busy Blazar at the end of class (40 students' 08 within
minutes) answers. The floating IPs are Neutron's (the stand-in neutronclient's).
"""

from __future__ import annotations

import pytest

import provisioning
from provisioning.config import from_env
from tests.unit.network_stand_ins import blazar_error, use_chi_leases

LEASE = "serve_system_alice"
SERVER = "node-serve-system-alice"
BUSY = "Service Unavailable"


def config() -> provisioning.ChameleonConfig:
    return from_env(env={}, project="CHI-231095", code_source="git", repo_url="https://git.example.org/lab.git")


def launched(fake_chi, monkeypatch):
    """01 and 02 as a student runs them: a lease made now, a server, its IP; the stand-in Blazar."""
    blazar = use_chi_leases(fake_chi, monkeypatch)
    assert provisioning.launch(config(), chi=fake_chi.api, setup_node=False) is not None
    fake_chi.rec.calls.clear()
    fake_chi.clock.slept.clear()
    return blazar


def test_one_failed_status_read_is_tried_again(fake_chi, student, monkeypatch) -> None:
    """Finding 4: the lease step read ``lease.status`` outside any guard: one 503 raised out of the teardown
    as a traceback, and the lease and its node stayed."""
    blazar = launched(fake_chi, monkeypatch)
    blazar.failures["get"] = [blazar_error(503, BUSY)]
    result = provisioning.teardown(config(), chi=fake_chi.api)
    assert result is not None and result.errors == []
    assert result.deleted == [f"server {SERVER}", "floating IP 129.114.108.7", f"lease {LEASE}"]
    assert blazar.leases == {} and fake_chi.clock.slept == [10.0]


def test_a_status_that_cannot_be_read_still_deletes_the_recorded_lease(fake_chi, student, monkeypatch,
                                                                      capsys) -> None:
    """Blazar's reads keep failing; its delete does not need one: the lease the lab created goes all the
    same, and the line says the status was not read."""
    blazar = launched(fake_chi, monkeypatch)
    blazar.failures["get"] = [blazar_error(503, BUSY)] * 10
    result = provisioning.teardown(config(), chi=fake_chi.api)
    assert result is not None and result.errors == [] and blazar.leases == {}
    assert (f"Teardown: reading lease {LEASE}'s status failed (BlazarClientException: ERROR: {BUSY}; tried 3 "
            "times): going on as if it were live") in capsys.readouterr().out


def test_a_lease_list_that_cannot_be_read_is_named_with_its_delete_line(fake_chi, student, monkeypatch,
                                                                        capsys) -> None:
    """The list itself keeps failing: the server and the IP still go, and the error names the lease with the
    line that deletes it once Blazar answers again."""
    blazar = launched(fake_chi, monkeypatch)
    [lease_id] = blazar.leases
    blazar.failures["list"] = [blazar_error(503, BUSY)] * 3
    with pytest.raises(provisioning.TeardownError) as caught:
        provisioning.teardown(config(), chi=fake_chi.api)
    result = caught.value.result
    assert result.deleted == [f"server {SERVER}", "floating IP 129.114.108.7"]
    state = provisioning.State().path
    assert result.errors == [
        f"listing the project's leases failed (BlazarClientException: ERROR: {BUSY}); it is not deleted: run "
        "the teardown again, or, from the lab's folder: python -m provisioning teardown --project CHI-231095 "
        f"--site CHI@TACC --lease-id {lease_id} --state {state} --lease-only --delete-adopted"]
    assert "\n" not in str(caught.value)
    assert fake_chi.clock.slept == [10.0, 10.0]  # tried three times
    assert list(blazar.leases) == [lease_id]
    assert provisioning.teardown(config(), chi=fake_chi.api) is not None  # Blazar answers again: it goes
    assert blazar.leases == {}


def reused_for(fake_chi, address: str, port_id: str | None, description: str) -> None:
    """Neutron hands a released address out again: now a classmate's IP (bound, or allocated for them)."""
    fake_chi.network.floating_ips[:] = [{"id": "fip-bob", "floating_ip_address": address, "port_id": port_id,
                                         "fixed_ip_address": None, "tags": [], "description": description}]


@pytest.mark.parametrize(("port_id", "says"), [
    ("port-bob", "is bound to port port-bob now: Neutron hands a released address out again, so it may be "
                 "another server's; not released"),
    (None, "its Neutron description names server node-serve-system-bob: not released (it may be a "
           "classmate's)"),
], ids=["bound", "described"])
def test_a_stale_record_without_an_id_never_releases_a_classmates_ip(fake_chi, student, capsys, port_id,
                                                                   says: str) -> None:
    """Finding 5: a record without an id (the IP of a server the lab adopted) was released by its address
    with none of release-ip's checks; with ``delete_adopted = True`` (the README's advice for a class slot)
    08 released a classmate's IP once Neutron had given them the address."""
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.server.add_existing(SERVER, "ACTIVE", fip=True)  # a server made ahead, with its IP
    provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    [ours] = fake_chi.network.floating_ips
    address = ours["floating_ip_address"]
    assert [(r.kind, r.id) for r in provisioning.State().resources if r.kind == "floating_ip"] == \
        [("floating_ip", None)]
    fake_chi.server.servers.clear()  # deleted in the GUI, its IP released there; then the class goes on
    reused_for(fake_chi, address, port_id, "serve-system-lab: node-serve-system-bob")
    result = provisioning.teardown(config(), chi=fake_chi.api, delete_adopted=True)
    assert result is not None and result.errors == []
    assert [ip["id"] for ip in fake_chi.network.floating_ips] == ["fip-bob"]  # untouched
    assert "neutron.delete_floatingip" not in fake_chi.rec.names()
    assert f"Teardown: floating IP {address} is recorded without its id and {says}" in capsys.readouterr().out
    assert f"floating IP {address} (its address is another's now)" in result.gone


def test_an_adopted_servers_ip_is_released_by_the_id_read_while_it_was_bound(fake_chi, student) -> None:
    """``delete_adopted``: the adopted server's IP goes with it, by the id read before the server's delete,
    while the IP was still bound to it."""
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.server.add_existing(SERVER, "ACTIVE", fip=True)
    provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    [ours] = fake_chi.network.floating_ips
    result = provisioning.teardown(config(), chi=fake_chi.api, delete_adopted=True)
    assert result is not None and f"floating IP {ours['floating_ip_address']}" in result.deleted
    assert ("neutron.delete_floatingip", (ours["id"],), {}) in fake_chi.rec.calls
    assert fake_chi.network.floating_ips == []
