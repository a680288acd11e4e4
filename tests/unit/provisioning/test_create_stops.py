"""A stop at the worst instant of a create call leaves nothing held once the teardown has run (issue 53,
finding 1, finding 8, must hold 2).

The worst instant: Chameleon has made the lease, the server or the floating IP, and its answer has not yet
come back. A Ctrl-C (01's or 02's interrupt button), a SIGTERM or a SIGHUP lands there. The lease is made
by python-chi's own ``Lease.submit`` over a stand-in Blazar (``StandInLeases``: blazarclient's lease manager,
the network's side), the IP by the lab's own Neutron call over the stand-in neutronclient, the server by the
recording python-chi stand-in's ``Server.submit`` (Nova's side has the server before the call returns). The
signal comes from another thread while the call blocks, as a ``kill`` or a kernel interrupt does.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

import provisioning
from provisioning.config import from_env
from provisioning.errors import Terminated, signals_raise
from servelab.lab.runner import run_chameleon
from tests.unit.conftest import FakeServer
from tests.unit.network_stand_ins import StandInNode, Stopper, use_chi_leases

LEASE = "serve_system_alice"
SERVER = "node-serve-system-alice"
HANG_S = 20.0  # how long the answer would take to come: the stop lands first


def config() -> provisioning.ChameleonConfig:
    return from_env(env={}, project="CHI-231095", code_source="git", repo_url="https://git.example.org/lab.git")


def answer_delayed(node: StandInNode) -> None:
    """The remote side has made it; its answer does not come before the stop."""
    node.blocked.set()
    time.sleep(HANG_S)


def stop_after_the_remote_made(what: str, fake_chi: Any, monkeypatch: pytest.MonkeyPatch,
                               node: StandInNode) -> Any:
    """Make ``what``'s create call hang once the remote side has made it; the stand-in Blazar (or None)."""
    blazar = use_chi_leases(fake_chi, monkeypatch)
    if what == "lease":
        blazar.after_create = lambda lease: answer_delayed(node)
    elif what == "server":
        submit = FakeServer.submit

        def made_then_hangs(self, *args, **kwargs):
            submit(self, *args, **kwargs)  # Nova has the server
            answer_delayed(node)

        monkeypatch.setattr(FakeServer, "submit", made_then_hangs)
    else:
        fake_chi.network.after_create = lambda fip: answer_delayed(node)
    return blazar


def nothing_left(fake_chi: Any, blazar: Any) -> None:
    assert blazar.leases == {}, blazar.leases
    assert fake_chi.server.servers == {}
    assert fake_chi.network.floating_ips == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
@pytest.mark.parametrize("what", ["lease", "server", "floating IP"])
def test_a_stop_at_the_worst_instant_of_a_create_leaves_nothing_after_the_teardown(
        what: str, sig: signal.Signals, fake_chi, student, tmp_path: Path, monkeypatch) -> None:
    """The instructor's run stopped while Blazar, Nova or Neutron makes the resource: its teardown deletes it.
    Before, each was recorded only after the call returned, so the teardown kept it as "not recorded as
    created by this lab" (after the run, Blazar still held ``serve_system_alice`` ACTIVE)."""
    node = StandInNode()
    blazar = stop_after_the_remote_made(what, fake_chi, monkeypatch, node)
    with Stopper(sig, node.blocked, delay=0.2) as stopper:
        run_dir, outcome, _ = run_chameleon("quick", results_base=tmp_path, config=config(), chi=fake_chi.api,
                                            report=False)
    assert stopper.sent_at is not None, f"the run never reached the {what}'s create"
    steps = [(s.step, s.ok) for s in outcome.steps]
    assert steps[-1] == ("teardown", True), [(s.step, s.ok, s.detail) for s in outcome.steps]
    nothing_left(fake_chi, blazar)
    records = provisioning.State(run_dir / provisioning.STATE_NAME).resources
    assert all(r.fate in ("deleted", "gone") and not r.pending for r in records), records
    kind = {"floating IP": "floating_ip"}.get(what, what)
    assert any(r.fate == "deleted" for r in records if r.kind == kind)


def test_01_interrupted_while_blazar_makes_the_lease_then_08_deletes_it(fake_chi, student, monkeypatch,
                                                                         capsys) -> None:
    """01's interrupt button (Ctrl-C in the kernel) while Blazar's POST is in flight. The state file records
    the lease as being created; 01 run again reuses it as the lab's own (it used to adopt it), and 08 deletes
    it (it used to keep it as not the lab's)."""
    node = StandInNode()
    blazar = stop_after_the_remote_made("lease", fake_chi, monkeypatch, node)
    with Stopper(signal.SIGINT, node.blocked, delay=0.2), pytest.raises(KeyboardInterrupt):
        provisioning.reserve(config(), chi=fake_chi.api)
    [made] = blazar.leases.values()
    [record] = provisioning.State().resources
    assert (record.name, record.id, record.origin, record.fate) == (LEASE, None, "created", "live")
    assert record.pending  # sent, never answered
    blazar.after_create = lambda lease: None
    capsys.readouterr()
    provisioning.reserve(config(), chi=fake_chi.api)  # 01 again
    assert f"Reusing lease {LEASE} (PENDING; created by this lab)" in capsys.readouterr().out
    assert list(blazar.leases) == [made["id"]]  # the same lease, not a second one
    provisioning.teardown(config(), chi=fake_chi.api)  # 08
    assert blazar.leases == {}


def test_08_deletes_a_lease_whose_creation_was_cut(fake_chi, student, monkeypatch) -> None:
    """SIGTERM in ``python -m provisioning reserve`` at the worst instant; nothing run again: 08's teardown
    finds the lease by its unique name and deletes it."""
    node = StandInNode()
    blazar = stop_after_the_remote_made("lease", fake_chi, monkeypatch, node)
    with Stopper(signal.SIGTERM, node.blocked, delay=0.2), signals_raise(), pytest.raises(Terminated):
        provisioning.reserve(config(), chi=fake_chi.api)
    assert len(blazar.leases) == 1
    result = provisioning.teardown(config(), chi=fake_chi.api)
    assert result is not None and result.deleted == [f"lease {LEASE}"] and result.kept == []
    assert blazar.leases == {}


def test_02_run_again_after_a_cut_allocation_uses_that_ip(fake_chi, student, monkeypatch) -> None:
    """Finding 8: a stop during the allocation request (or its 15 s retry pause) left an allocated IP no
    teardown released, and 02 run again allocated another. The record written before the request makes the
    next run take the IP the cut one made, and the teardown release it."""
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    node = StandInNode()
    fake_chi.network.after_create = lambda fip: answer_delayed(node)
    with Stopper(signal.SIGINT, node.blocked, delay=0.2), pytest.raises(KeyboardInterrupt):
        provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    [leaked] = fake_chi.network.floating_ips
    assert leaked["port_id"] is None
    fake_chi.network.after_create = lambda fip: None
    node_again = provisioning.launch(config(), chi=fake_chi.api, setup_node=False)  # 02 again
    assert node_again is not None and node_again.address == leaked["floating_ip_address"]
    assert len(fake_chi.network.floating_ips) == 1  # no second IP
    provisioning.teardown(config(), chi=fake_chi.api, delete_adopted=True)  # the lease was made ahead
    assert fake_chi.network.floating_ips == [] and fake_chi.server.servers == {}


def test_08_releases_the_ip_of_an_allocation_that_was_cut(fake_chi, student, monkeypatch) -> None:
    """The allocation's answer never arrived and nothing ran again: 08 releases the unbound IP the lab
    described for this server, by its id."""
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    node = StandInNode()
    fake_chi.network.after_create = lambda fip: answer_delayed(node)
    with Stopper(signal.SIGTERM, node.blocked, delay=0.2), signals_raise(), pytest.raises(Terminated):
        provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    [leaked] = fake_chi.network.floating_ips
    fake_chi.network.add_existing()  # a classmate's unbound IP, with no description: never touched
    result = provisioning.teardown(config(), chi=fake_chi.api)
    assert result is not None and f"floating IP {leaked['floating_ip_address']}" in result.deleted
    assert ("neutron.delete_floatingip", (leaked["id"],), {}) in fake_chi.rec.calls
    assert [ip["floating_ip_address"] for ip in fake_chi.network.floating_ips] == ["129.114.108.8"]


def test_a_lease_made_although_blazars_answer_was_lost_is_used(fake_chi, student, monkeypatch,
                                                               capsys) -> None:
    """A request that failed (the connection reset after Blazar made the lease) does not make a second one:
    one look-up by name finds it, and it is used and recorded as the lab's."""
    from keystoneauth1.exceptions.connection import ConnectFailure

    blazar = use_chi_leases(fake_chi, monkeypatch)

    def reset(lease: dict[str, Any]) -> None:
        raise ConnectFailure("Connection reset by peer")

    blazar.after_create = reset
    lease = provisioning.reserve(config(), chi=fake_chi.api)
    assert lease is not None and len(blazar.leases) == 1
    assert (f"Lease {LEASE} was made although Blazar's answer was lost (ResourceError: Connection reset by "
            "peer): using it") in capsys.readouterr().out
    [record] = provisioning.State().resources
    assert (record.origin, record.id, record.pending) == ("created", str(lease.id), "")
