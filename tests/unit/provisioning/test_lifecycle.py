"""The Chameleon lifecycle with the recording python-chi: what is created vs adopted (the state file),
teardown deleting exactly what was created, lease start times and waiting, leases by id, teardown
that goes on after a failure, floating IPs released through python-chi's network API, SIGTERM/SIGHUP
during ``./lab run --target chameleon``, and run.json saying what was created, adopted, deleted, left.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import provisioning
from provisioning import LeaseNotStarted, ProvisioningError, TeardownError, from_env, times
from provisioning.plan import format_plan, provision_plan, teardown_plan
from servelab.lab.runner import run_chameleon

LEASE = "serve_system_alice"
SERVER = "node-serve-system-alice"
REPO = "https://git.example.org/serve-lab.git"
FLOATING_IP = "129.114.108.7"  # the stand-in's first allocation
NOW = datetime(2026, 11, 23, 15, 0, tzinfo=timezone.utc)  # the stand-in's clock: 09:00 CST, 16:00 CET


def config(**changes: object) -> provisioning.ChameleonConfig:
    return from_env(env={}, project="CHI-231095", **{"code_source": "git", "repo_url": REPO, **changes})


def records(path: Path) -> list[tuple[str, str, str, str]]:
    return [(r["kind"], r["name"], r["origin"], r["fate"]) for r in json.loads(path.read_text())["resources"]]


def names(fake_chi) -> list[str]:
    return fake_chi.rec.names()


# ----------------------------------------------------------------------------- created vs adopted
def test_launch_records_what_it_created_and_teardown_deletes_exactly_that(fake_chi, student,
                                                                          tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    provisioning.launch(config(), chi=fake_chi.api, state=state)
    saved = json.loads(state.read_text())["resources"]
    assert [(r["kind"], r["name"], r["id"], r["origin"]) for r in saved] == [
        ("lease", LEASE, "lease-1", "created"), ("server", SERVER, "server-1", "created"),
        ("floating_ip", FLOATING_IP, f"fip-{FLOATING_IP}", "created")]
    result = provisioning.teardown(config(), chi=fake_chi.api, state=state)
    assert result is not None and len(result.deleted) == 3
    assert records(state) == [("lease", LEASE, "created", "deleted"),
                              ("server", SERVER, "created", "deleted"),
                              ("floating_ip", FLOATING_IP, "created", "deleted")]
    fake_chi.rec.calls.clear()
    provisioning.teardown(config(), chi=fake_chi.api, state=state)  # again: nothing left to delete
    assert not [n for n in names(fake_chi) if n.endswith(("delete", "delete_floatingip"))]


def test_notebooks_01_02_08_share_the_default_state_file(fake_chi, student, tmp_path: Path) -> None:
    provisioning.reserve(config(), chi=fake_chi.api)  # notebook 01
    provisioning.launch(config(), chi=fake_chi.api)  # 02: the lease is found, and still "created"
    default = tmp_path / "results" / "chameleon-state.json"  # $SERVELAB_RESULTS (the student fixture)
    assert provisioning.default_state_path() == default
    assert [r[2] for r in records(default)] == ["created", "created", "created"]
    provisioning.teardown(config(), chi=fake_chi.api)  # 08
    assert "Lease.delete" in names(fake_chi) and "Server.delete" in names(fake_chi)


def test_teardown_without_a_record_keeps_what_it_finds(fake_chi, student, tmp_path: Path) -> None:
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.server.add_existing(SERVER, "ACTIVE", fip=True)
    result = provisioning.teardown(config(), chi=fake_chi.api, state=tmp_path / "none.json")
    assert result is not None and result.deleted == []
    not_ours = "not recorded as created by this lab; delete_adopted deletes it"
    assert result.kept == [f"server {SERVER} ({not_ours})", f"lease {LEASE} ({not_ours})"]
    assert "Server.delete" not in names(fake_chi) and "Lease.delete" not in names(fake_chi)
    result = provisioning.teardown(config(), chi=fake_chi.api, state=tmp_path / "none.json",
                                   delete_adopted=True)
    assert result is not None
    assert result.deleted == [f"server {SERVER}", f"floating IP {FLOATING_IP}", f"lease {LEASE}"]
    assert fake_chi.network.floating_ips == []  # the adopted server's IP went with it


def test_a_free_floating_ip_of_the_project_is_left_alone(fake_chi, student, tmp_path: Path,
                                                         capsys) -> None:
    """A project's free IPs are shared (possibly another student's, between two of their runs): this run
    allocates its own and releases it at teardown; the free one is never taken."""
    free = fake_chi.network.add_existing()  # 129.114.108.7: allocated earlier, not bound to anything
    state = tmp_path / "state.json"
    provisioning.launch(config(), chi=fake_chi.api, state=state)
    ours = "129.114.108.8"
    assert ("network.get_network_id", ("public",), {}) in fake_chi.rec.calls
    body = {"floatingip": {"floating_network_id": "net-public",
                           "description": "serve-system-lab: node-serve-system-alice"}}
    assert ("neutron.create_floatingip", (body,), {}) in fake_chi.rec.calls
    assert ("neutron.update_floatingip", (f"fip-{ours}", {"floatingip": {"port_id": "port-server-1"}}), {}) \
        in fake_chi.rec.calls
    assert "network.get_or_create_floating_ip" not in names(fake_chi)
    assert ("floating_ip", ours, "created", "live") in records(state)
    out = capsys.readouterr().out
    assert f"Associated floating IP {ours} (allocated for this run; released at teardown)" in out
    result = provisioning.teardown(config(), chi=fake_chi.api, state=state)
    assert result is not None and f"floating IP {ours}" in result.deleted
    assert fake_chi.network.floating_ips == [free] and free["port_id"] is None  # untouched, still free


def unbound(fake_chi, address: str, description: str = "", tags: tuple[str, ...] = ()) -> None:
    """An IP of the project bound to nothing (a cut run's leak, a classmate's, a reservation's)."""
    fake_chi.network.floating_ips.append({"id": f"fip-{address}", "floating_ip_address": address,
                                          "port_id": None, "fixed_ip_address": None, "tags": list(tags),
                                          "description": description})


def test_08_lists_only_the_unbound_ips_this_lab_allocated_for_your_server(fake_chi, student, tmp_path: Path,
                                                                         capsys, monkeypatch) -> None:
    """IPs leaked by cut runs pile up against the project's quota: 08 lists, after its teardown, those this
    lab allocated for the student's server (their Neutron description), with how to release one. In a class
    project the others are a classmate's (between allocate and associate, or leaked by their cut run), the
    instructor's, or held by a Blazar floating IP reservation (tag ``reservation:<id>``): only counted."""
    fake_chi.network.add_existing()  # 129.114.108.7: someone's, free
    fake_chi.network.add_existing(port_id="port-x")  # bound: not counted
    state = tmp_path / "state.json"
    provisioning.launch(config(), chi=fake_chi.api, state=state)  # allocates 129.114.108.9 for this run
    provisioning.teardown(config(), chi=fake_chi.api, state=state)
    unbound(fake_chi, "129.114.108.40", "serve-system-lab: node-serve-system-alice")  # Alice's cut run
    unbound(fake_chi, "129.114.108.50", "serve-system-lab: node-serve-system-bob")  # Bob's, a second ago
    unbound(fake_chi, "129.114.108.60", "serve-system-lab: node-serve-system-alice",
            ("blazar", "reservation:res-77"))  # a reservation holds it, whatever its description
    capsys.readouterr()
    assert provisioning.unbound_ips(config(), chi=fake_chi.api) == ["129.114.108.40"]
    assert capsys.readouterr().out == (
        "Floating IPs this lab allocated for server node-serve-system-alice and bound to no server (1; each "
        "counts against project CHI-231095's floating IP quota until released): 129.114.108.40. Release one, "
        "from the lab's folder: python -m provisioning release-ip --project CHI-231095 --site CHI@TACC "
        "--server-name node-serve-system-alice --floating-ip ADDRESS\n"
        "3 other floating IPs of project CHI-231095 are bound to no server: not listed, and not yours to "
        "release (a classmate's between two steps, an instructor's, or held by a reservation)\n")
    assert not [n for n in names(fake_chi)[-2:] if "deallocate" in n]  # listed, never released by the lab
    # the printed line, run as printed (project and site selected as every action does)
    from provisioning import __main__ as cli

    for var, value in {"OS_AUTH_TYPE": "v3applicationcredential", "OS_APPLICATION_CREDENTIAL_ID": "a",
                       "OS_APPLICATION_CREDENTIAL_SECRET": "s"}.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setattr("provisioning.checks.real_chi", lambda: fake_chi.api)
    line = ["release-ip", "--project", "CHI-231095", "--site", "CHI@TACC", "--server-name",
            "node-serve-system-alice", "--floating-ip"]
    refusals = (("129.114.108.50", "was not allocated by this lab for server node-serve-system-alice (for "
                                   "server node-serve-system-bob): it may be a classmate's"),
                ("129.114.108.7", "(with no description)"),
                ("129.114.108.60", "is held by reservation res-77 (a lease's floating IP reservation)"))
    for refused, why in refusals:
        assert cli.main([*line, refused]) == 1
        err = capsys.readouterr().err
        assert why in err and err.rstrip().endswith("not released; add --force (force=True) to release it "
                                                    "anyway"), err
    assert "neutron.delete_floatingip" not in names(fake_chi)[-12:]
    assert cli.main([*line, "129.114.108.40"]) == 0
    assert fake_chi.rec.calls[-1] == ("neutron.delete_floatingip", ("fip-129.114.108.40",), {})  # by its id
    assert cli.main([*line, "129.114.108.50", "--force"]) == 0  # the instructor, who knows whose it is
    assert provisioning.unbound_ips(config(), chi=fake_chi.api) == []
    assert cli.main([*line, "129.114.108.9"]) == 0  # already released by the teardown: said, not an error
    assert "has no floating IP 129.114.108.9: nothing to release" in capsys.readouterr().out
    fake_chi.rec.failures["network.list_floating_ips"] = RuntimeError("boom")
    assert provisioning.unbound_ips(config(), chi=fake_chi.api) == []  # only information: no error
    assert "Could not list project CHI-231095's floating IPs (RuntimeError: boom)" in capsys.readouterr().out


def test_a_floating_ip_given_by_address_is_used_and_kept(fake_chi, student, tmp_path: Path) -> None:
    given = fake_chi.network.add_existing()["floating_ip_address"]  # the instructor's, free in the project
    state = tmp_path / "state.json"
    provisioning.launch(config(floating_ip=given), chi=fake_chi.api, state=state)
    assert ("network.get_floating_ip", (given,), {}) in fake_chi.rec.calls
    assert "neutron.create_floatingip" not in names(fake_chi)
    assert ("floating_ip", given, "adopted", "live") in records(state)
    result = provisioning.teardown(config(floating_ip=given), chi=fake_chi.api, state=state)
    assert result is not None
    assert f"floating IP {given} (adopted: found, not created, by this lab)" in result.kept
    assert "neutron.delete_floatingip" not in names(fake_chi)
    assert [ip["floating_ip_address"] for ip in fake_chi.network.floating_ips] == [given]
    assert from_env(env={"CHI_FLOATING_IP": given}).floating_ip == given


@pytest.mark.parametrize(("bound", "message"), [
    (True, r"floating IP 129\.114\.108\.7 is already in use \(bound to port port-x, another server's, "
           r"possibly another student's\): give a free floating IP of project CHI-231095"),
    (False, r"looking up floating IP 129\.114\.108\.99 in project CHI-231095 failed \(ValueError: Floating "
            r"IP 129\.114\.108\.99 not found\): give a free floating IP"),
])
def test_a_given_floating_ip_that_cannot_be_used_is_one_line(fake_chi, student, bound, message) -> None:
    fake_chi.network.add_existing(port_id="port-x" if bound else None)
    address = "129.114.108.7" if bound else "129.114.108.99"
    with pytest.raises(ProvisioningError, match=message) as caught:
        provisioning.launch(config(floating_ip=address), chi=fake_chi.api)
    assert "\n" not in str(caught.value)
    assert "neutron.update_floatingip" not in names(fake_chi)
    assert "neutron.create_floatingip" not in names(fake_chi)


# ----------------------------------------------------------------------------- lease start and waiting
def test_a_pending_lease_made_ahead_is_waited_for_and_kept(fake_chi, student, tmp_path: Path,
                                                           capsys) -> None:
    fake_chi.lease.add_existing(LEASE, "PENDING", starts_in=timedelta(minutes=20))  # made in the GUI
    state = tmp_path / "state.json"
    node = provisioning.launch(config(), chi=fake_chi.api, state=state)
    assert node is not None
    waited = sum(fake_chi.clock.slept)
    assert 20 * 60 < waited < 25 * 60  # until its start (+ Blazar's minute), not a fixed 600 s timeout
    out = capsys.readouterr().out
    assert "Reusing lease serve_system_alice (PENDING; adopted by this lab: kept at teardown" in out
    assert f"Lease {LEASE} is PENDING: starts in 20 min (2026-11-23 09:20 CST at CHI@TACC (16:20 CET here))" \
        in out
    assert out.count(f"Lease {LEASE} is PENDING") >= 10  # the time left, each minute in the last ten
    assert "lease.Lease" not in names(fake_chi)
    result = provisioning.teardown(config(), chi=fake_chi.api, state=state)
    assert result is not None and "Lease.delete" not in names(fake_chi)
    assert result.kept == [f"lease {LEASE} (adopted: found, not created, by this lab)"]


def test_a_lease_starting_later_than_the_wait_stops_cleanly(fake_chi, student, tmp_path: Path,
                                                            capsys) -> None:
    fake_chi.lease.add_existing(LEASE, "PENDING", starts_in=timedelta(hours=2))
    state = tmp_path / "state.json"
    lease = provisioning.reserve(config(), chi=fake_chi.api, state=state)  # notebook 01: returned, PENDING
    assert lease is not None and lease.status == "PENDING"
    line = (f"Lease {LEASE} starts 2026-11-23 11:00 CST at CHI@TACC (18:00 CET here), in 2 h 00 min: more "
            "than the 30 min this step waits, so it is kept reserved; run this step again after it starts")
    assert line in capsys.readouterr().out
    with pytest.raises(LeaseNotStarted) as caught:
        provisioning.launch(config(), chi=fake_chi.api, state=state)
    assert str(caught.value) == line
    assert fake_chi.clock.slept == [] and "server.Server" not in names(fake_chi)
    provisioning.teardown(config(), chi=fake_chi.api, state=state)
    assert "Lease.delete" not in names(fake_chi)


def test_a_class_slot_reserved_ahead_prints_the_line_that_deletes_it(fake_chi, student, tmp_path: Path,
                                                                     capsys, monkeypatch) -> None:
    """The instructor reserves a student's slot (``reserve --lease-start --lease-name``); the student's 02
    adopts it and the student's 08 keeps it. reserve printed the one line that deletes it: run as
    printed after the class, it does, and nothing else: not the other slots the same state file records,
    not the instructor's own server."""
    import shlex

    from provisioning import __main__ as cli

    state = tmp_path / "slots" / "class.json"
    slot = config(lease_name="serve_system_bob", lease_start="+3h")
    lease = provisioning.reserve(slot, chi=fake_chi.api, state=state)
    command = (f"python -m provisioning teardown --project CHI-231095 --site CHI@TACC --lease-id {lease.id} "
               f"--state {state} --lease-only --delete-adopted")
    assert (f"To delete it (after the class, or to cancel it), from the lab's folder: {command}"
            in capsys.readouterr().out)
    carol = provisioning.reserve(config(lease_name="serve_system_carol", lease_start="+27h"),
                                 chi=fake_chi.api, state=state)  # tomorrow's slot, in the same file
    fake_chi.clock.at += timedelta(hours=3, minutes=2)  # the class: Bob's 02 and 08 adopt and keep it
    bob = config(lease_name="serve_system_bob")
    provisioning.launch(bob, chi=fake_chi.api, state=tmp_path / "bob-hub" / "state.json")
    provisioning.teardown(bob, chi=fake_chi.api, state=tmp_path / "bob-hub" / "state.json")
    assert "Lease.delete" not in names(fake_chi)
    for var, value in {"OS_AUTH_TYPE": "v3applicationcredential", "OS_APPLICATION_CREDENTIAL_ID": "a",
                       "OS_APPLICATION_CREDENTIAL_SECRET": "s"}.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setattr("provisioning.checks.real_chi", lambda: fake_chi.api)
    before = len(names(fake_chi))
    capsys.readouterr()
    assert cli.main(shlex.split(command)[3:]) == 0  # after the class, as printed
    plan = capsys.readouterr().out
    assert f"delete lease {shlex.split(command)[9]} alone (lease_only" in plan and "delete server" not in plan
    with pytest.raises(SystemExit):  # a lease-only anything else would be silently ignored
        cli.main(["reserve", "--lease-only"])
    assert names(fake_chi)[-1] == "Lease.delete" and lease.status == "DELETED"
    assert carol.status != "DELETED" and names(fake_chi)[before:].count("Lease.delete") == 1
    touched = [n.lower() for n in names(fake_chi)[before:]]
    assert not [n for n in touched if n.startswith("server") or "floating" in n]


@pytest.mark.parametrize("recorded", [True, False], ids=["in-the-slots-state-file", "08-with-its-id"])
def test_an_ended_lease_named_by_id_is_already_gone(fake_chi, student, tmp_path: Path, capsys, monkeypatch,
                                                    recorded: bool) -> None:
    """Issue 42: once the slot has ended (Blazar keeps it listed as TERMINATED), its delete line exited 1
    with "teardown incomplete ... run teardown again", and so did 08 given the ended slot's lease_id:
    nothing is left to delete, and that is said."""
    import shlex

    from provisioning import __main__ as cli

    state = tmp_path / "slots" / "class.json"
    if recorded:
        slot = config(lease_name="serve_system_bob", lease_start="+3h")
        lease = provisioning.reserve(slot, chi=fake_chi.api, state=state)
    else:
        lease = fake_chi.lease.add_existing("serve_system_bob", "ACTIVE")
    lease.status = "TERMINATED"  # the class is over: the slot ended by itself
    for var, value in {"OS_AUTH_TYPE": "v3applicationcredential", "OS_APPLICATION_CREDENTIAL_ID": "a",
                       "OS_APPLICATION_CREDENTIAL_SECRET": "s"}.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setattr("provisioning.checks.real_chi", lambda: fake_chi.api)
    capsys.readouterr()
    line = (f"teardown --project CHI-231095 --site CHI@TACC --lease-id {lease.id} --state {state} "
            f"{'--lease-only ' if recorded else ''}--delete-adopted")
    assert cli.main(shlex.split(line)) == 0
    out = capsys.readouterr()
    assert "error" not in out.err and "Lease.delete" not in names(fake_chi)
    assert out.out.rstrip().endswith("Teardown: deleted nothing; already gone: lease serve_system_bob")


def test_lease_start_makes_an_advance_reservation_used_later(fake_chi, student, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    cfg = config(lease_start="2026-11-24 09:00")  # no offset: CHI@TACC's time, 15:00 UTC
    start = datetime(2026, 11, 24, 15, 0, tzinfo=timezone.utc)
    provisioning.reserve(cfg, chi=fake_chi.api, state=state)
    # python-chi's Lease(duration=...) would end it 2 h 50 min after *now*: the end is passed instead
    end = start + timedelta(hours=2, minutes=50)
    assert ("lease.Lease", (LEASE,), {"start_date": start, "end_date": end}) in fake_chi.rec.calls
    lease = fake_chi.lease.leases[0]
    assert (lease.start_date, lease.end_date) == (datetime(2026, 11, 24, 15), datetime(2026, 11, 24, 17, 50))
    saved = json.loads(state.read_text())["resources"][0]
    assert saved["origin"] == "created" and saved["keep"] == "starts 2026-11-24 15:00 UTC"
    result = provisioning.teardown(cfg, chi=fake_chi.api, state=state, keep_lease=False)
    assert result is not None and "Lease.delete" not in names(fake_chi)  # reserved for a later run
    assert result.kept == [f"lease {LEASE} (reserved ahead for a later run: starts 2026-11-24 15:00 UTC)"]
    fake_chi.clock.at = start - timedelta(minutes=5)  # the next morning, a little before the start
    provisioning.launch(cfg, chi=fake_chi.api, state=state)
    assert json.loads(state.read_text())["resources"][0]["keep"] == ""  # used now: this lab's to delete
    provisioning.teardown(cfg, chi=fake_chi.api, state=state)
    assert names(fake_chi)[-1] == "Lease.delete"


def test_a_lease_the_lab_reserved_ahead_goes_at_teardown_once_started(fake_chi, student, tmp_path: Path,
                                                                      capsys) -> None:
    """Notebook 01 reserved ahead (lease_start) for the class; on the day 08 runs without a 02 on this state
    file: the lease has started, so it was this class's and the lab's own — deleted, not kept for later."""
    state = tmp_path / "state.json"
    cfg = config(lease_start="2026-11-24 09:00")
    provisioning.reserve(cfg, chi=fake_chi.api, state=state)
    fake_chi.clock.at = datetime(2026, 11, 24, 16, 0, tzinfo=timezone.utc)  # class day, an hour in
    assert fake_chi.lease.leases[0].status == "ACTIVE"
    result = provisioning.teardown(config(), chi=fake_chi.api, state=state)
    assert result is not None and result.deleted == [f"lease {LEASE}"] and result.kept == []
    assert names(fake_chi)[-1] == "Lease.delete"
    assert "Still on Chameleon" not in capsys.readouterr().out


def test_a_lease_reserved_ahead_found_by_name_in_08_is_still_the_labs(fake_chi, student, tmp_path: Path,
                                                                     capsys) -> None:
    """01 recorded the advance reservation in one state file; 08 runs with another one (a new run folder)
    and finds the lease by name: it is taken over as created (not adopted), kept while it has not started
    (with until when and how to delete it), deleted once it has."""
    first = tmp_path / "01" / "chameleon-state.json"
    provisioning.reserve(config(lease_start="+3h"), chi=fake_chi.api, state=first)
    later = tmp_path / "08" / "chameleon-state.json"
    result = provisioning.teardown(config(), chi=fake_chi.api, state=later)
    out = capsys.readouterr().out
    assert result is not None and "Lease.delete" not in names(fake_chi)
    assert result.kept == [f"lease {LEASE} (reserved ahead for a later run: starts 2026-11-23 18:00 UTC)"]
    assert f"lease {LEASE} was reserved ahead by this lab ({first}): it is this lab's to delete" in out
    assert (f"  lease {LEASE} (PENDING, reserved from 2026-11-23 12:00 CST at CHI@TACC (19:00 CET here) "
            "until 2026-11-23 14:50 CST at CHI@TACC (21:50 CET here); created by this lab)") in out
    assert ("lease", LEASE, "created", "live") in records(later)
    fake_chi.clock.at += timedelta(hours=3, minutes=5)  # it started: this class's, the lab's to delete
    result = provisioning.teardown(config(), chi=fake_chi.api, state=later)
    assert result is not None and result.deleted == [f"lease {LEASE}"]
    assert names(fake_chi)[-1] == "Lease.delete"


def test_a_kept_lease_is_named_with_its_end_and_the_command_that_deletes_it(fake_chi, student,
                                                                           tmp_path: Path, capsys,
                                                                           monkeypatch) -> None:
    """A lease reserved ahead in the GUI stays (adopted): 08 prints until when and the one command that
    deletes it; that command, run as printed, deletes it."""
    import shlex

    from provisioning import __main__ as cli

    made = fake_chi.lease.add_existing(LEASE, "ACTIVE")
    state = tmp_path / "state.json"
    provisioning.launch(config(), chi=fake_chi.api, state=state)
    result = provisioning.teardown(config(), chi=fake_chi.api, state=state)
    out = capsys.readouterr().out
    assert result is not None and "Lease.delete" not in names(fake_chi)
    command = (f"python -m provisioning teardown --project CHI-231095 --site CHI@TACC --lease-id {made.id} "
               f"--state {state} --delete-adopted")
    assert result.delete_command == command
    assert result.reserved_text() in out
    assert ("Still on Chameleon after this teardown (the lease keeps its node, and its hours are charged to "
            "the project, until it ends):\n"
            f"  lease {LEASE} (ACTIVE, reserved until 2026-11-23 11:00 CST at CHI@TACC (18:00 CET here); "
            "adopted by this lab)\n"
            f"Delete it now, from the lab's folder: {command}\n"
            "  (or, in notebook 08, set delete_adopted = True and run it again)") in out
    for var, value in {"OS_AUTH_TYPE": "v3applicationcredential", "OS_APPLICATION_CREDENTIAL_ID": "a",
                       "OS_APPLICATION_CREDENTIAL_SECRET": "s"}.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setattr("provisioning.checks.real_chi", lambda: fake_chi.api)
    assert cli.main(shlex.split(command)[3:]) == 0
    assert names(fake_chi)[-1] == "Lease.delete" and made.status == "DELETED"


def test_the_lease_name_looked_for_is_said_when_none_is_found(fake_chi, student, tmp_path: Path,
                                                             capsys) -> None:
    fake_chi.lease.add_existing("serve_system_ab1234", "ACTIVE")  # the original lab's name, made in the GUI
    state = tmp_path / "state.json"
    provisioning.teardown(config(), chi=fake_chi.api, state=state)
    assert (f"No live lease named '{LEASE}' (lease_name) in project CHI-231095 at CHI@TACC: none to delete. "
            "A lease under another name (the original lab's is serve_system_<netID>) is not looked for: set "
            "lease_name or lease_id to it") in capsys.readouterr().out
    provisioning.reserve(config(), chi=fake_chi.api, state=state)
    assert (f"No live lease named '{LEASE}' (lease_name) in project CHI-231095 at CHI@TACC: creating it. If "
            "you meant a lease made another way (the original lab names it serve_system_<netID> in the GUI), "
            "set lease_name or lease_id to that one") in capsys.readouterr().out
    provisioning.reserve(config(lease_name="serve_system_ab1234"), chi=fake_chi.api, state=state)
    assert "Reusing lease serve_system_ab1234 (ACTIVE; adopted" in capsys.readouterr().out


def test_a_lease_that_never_becomes_active_is_an_error_after_its_start(fake_chi, student) -> None:
    fake_chi.lease.add_existing(LEASE, "PENDING", starts_in=timedelta(minutes=5))
    fake_chi.lease.activation_lag = timedelta(hours=1)
    with pytest.raises(ProvisioningError, match=r"still PENDING after waiting up to 10 min past its start "
                                                r"time: check it in the GUI .*it is kept"):
        provisioning.launch(config(), chi=fake_chi.api)
    assert 15 * 60 <= sum(fake_chi.clock.slept) <= 16 * 60


@pytest.mark.parametrize(("text", "expected"), [
    ("", None), ("now", None),
    ("2026-11-24 09:00", datetime(2026, 11, 24, 15, 0, tzinfo=timezone.utc)),  # CST, UTC-6
    ("2026-07-01T09:00", datetime(2026, 7, 1, 14, 0, tzinfo=timezone.utc)),  # CDT, UTC-5
    ("2026-11-24T15:00Z", datetime(2026, 11, 24, 15, 0, tzinfo=timezone.utc)),
    ("2026-11-24T16:30:20+01:00", datetime(2026, 11, 24, 15, 31, tzinfo=timezone.utc)),  # up to the minute
    ("+90m", NOW + timedelta(minutes=90)), ("+2h", NOW + timedelta(hours=2)),
    ("+1d", NOW + timedelta(days=1)),
])
def test_lease_start_formats(text: str, expected: datetime | None) -> None:
    assert times.parse_start(text, "CHI@TACC", now=NOW) == expected


def test_lease_start_errors_are_one_line(fake_chi, student) -> None:
    with pytest.raises(ProvisioningError, match=r"lease_start='tomorrow' is not a time: use ISO 8601 "
                                                r"\(e\.g\. 2026-11-24 09:00 in CHI@TACC's time zone, "
                                                r"America/Chicago"):
        config(lease_start="tomorrow")
    assert from_env(env={"CHI_LEASE_START": "+2h", "CHI_LEASE_ID": "abc",
                         "CHI_LEASE_WAIT_MINUTES": "5"}).lease_id == "abc"
    with pytest.raises(ProvisioningError, match=r"lease_start .* is in the past: give a later time"):
        provisioning.reserve(config(lease_start="2026-11-23 07:00"), chi=fake_chi.api)
    assert "lease.Lease" not in names(fake_chi)


def test_times_are_shown_in_the_site_zone_and_here(fake_chi) -> None:
    at = datetime(2026, 11, 24, 23, 30, tzinfo=timezone.utc)
    assert times.show_time(at, "CHI@UC") == "2026-11-24 17:30 CST at CHI@UC (2026-11-25 00:30 CET here)"
    assert times.show_time(at, "CHI@Mars") == "2026-11-24 23:30 UTC at CHI@Mars (2026-11-25 00:30 CET here)"
    plan = format_plan(provision_plan(config(lease_start="2026-11-24 09:00")))
    assert ("from 2026-11-24 09:00 CST at CHI@TACC (16:00 CET here) to 2026-11-24 11:50 CST at CHI@TACC "
            "(18:50 CET here) (2 h 50 min; an advance reservation)") in plan
    assert "starting now, for 2 h 50 min" in format_plan(provision_plan(config()))


def test_a_lease_given_by_id_is_adopted(fake_chi, student, tmp_path: Path) -> None:
    made = fake_chi.lease.add_existing("made-in-the-gui", "ACTIVE")
    state = tmp_path / "state.json"
    provisioning.launch(config(lease_id=made.id), chi=fake_chi.api, state=state)
    assert ("server.Server", (SERVER,), {"reservation_id": "res-made-in-the-gui",
                                         "image_name": "CC-Ubuntu24.04-CUDA", "key_name": None}) \
        in fake_chi.rec.calls
    assert ("lease", "made-in-the-gui", "adopted", "live") in records(state)
    provisioning.teardown(config(lease_id=made.id), chi=fake_chi.api, state=state)
    assert "Server.delete" in names(fake_chi) and "Lease.delete" not in names(fake_chi)
    provisioning.teardown(config(lease_id=made.id), chi=fake_chi.api, state=state, delete_adopted=True)
    assert names(fake_chi)[-1] == "Lease.delete"
    with pytest.raises(ProvisioningError, match=r"no lease with id nope in project CHI-231095 at CHI@TACC"):
        provisioning.reserve(config(lease_id="nope"), chi=fake_chi.api)


# ----------------------------------------------------------------------------- teardown goes on
def test_the_lease_is_deleted_even_when_the_server_delete_fails(fake_chi, student, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    provisioning.launch(config(), chi=fake_chi.api, state=state)
    fake_chi.rec.failures["Server.delete"] = RuntimeError("Conflict: instance is locked (HTTP 409)")
    with pytest.raises(TeardownError) as caught:
        provisioning.teardown(config(), chi=fake_chi.api, state=state)
    message = str(caught.value)
    assert message.startswith(f"teardown incomplete: deleting server {SERVER} failed (RuntimeError: Conflict")
    assert "\n" not in message and "run teardown again" in message
    assert caught.value.result.deleted == [f"floating IP {FLOATING_IP}", f"lease {LEASE}"]
    assert names(fake_chi)[-1] == "Lease.delete"
    assert ("server", SERVER, "created", "live") in records(state)  # still to delete, with the reason
    fake_chi.rec.failures["Lease.delete"] = RuntimeError("Blazar is down")
    fake_chi.rec.failures.pop("Server.delete")
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    provisioning.reserve(config(), chi=fake_chi.api, state=state)  # a new lease: adopted (not made here)
    fake_chi.rec.failures["Server.delete"] = RuntimeError("Conflict")
    with pytest.raises(TeardownError) as both:
        provisioning.teardown(config(), chi=fake_chi.api, state=state, delete_adopted=True)
    assert f"deleting server {SERVER} failed" in str(both.value)
    assert f"deleting lease {LEASE} failed (RuntimeError: Blazar is down)" in str(both.value)


def test_teardown_plan_reads_the_state_file(fake_chi, student, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    provisioning.launch(config(), chi=fake_chi.api, state=state)
    text = format_plan(teardown_plan(config(), state=state))
    assert f"delete server {SERVER} if recorded as created (recorded: {SERVER} (created))" in text
    assert f"(recorded: {FLOATING_IP} (created))" in text
    assert f"delete lease {LEASE} if recorded as created (recorded: {LEASE} (created))" in text
    empty = format_plan(teardown_plan(config(), state=tmp_path / "none.json"))
    assert "recorded: none recorded; as it stands: kept" in empty


# ----------------------------------------------------------------------------- ./lab run --target chameleon
class Shell:
    """The node over SSH: the lab run does ``on_run`` (e.g. a signal) and fails; nothing to fetch."""

    def __init__(self, on_run=None, code: int = 0) -> None:
        self.calls: list[str] = []
        self.on_run = on_run
        self.code = code

    def capture(self, command: str, timeout: float) -> tuple[int, str]:
        """The detached lab run (servelab.targets.detached): started, then over with ``code``."""
        self.calls.append(command)
        if "setsid nohup" in command:
            if self.on_run:
                self.on_run()
            return 0, "started\n"
        return 0, f"{self.code}\n\n"  # a poll: the exit code, no output

    def run(self, command: str, timeout: float) -> int:
        self.calls.append(command)
        return 1  # the pack: the node made no results

    def get(self, remote_path: str, local_path: Path) -> None:
        raise AssertionError("nothing to fetch")


def run(tmp_path: Path, fake_chi, shell: Shell, cfg=None, **options: object):
    run_dir, outcome, _ = run_chameleon("quick", results_base=tmp_path / "runs", config=cfg or config(),
                                        chi=fake_chi.api, shell_for=lambda node: shell, report=False,
                                        **options)
    return run_dir, outcome, json.loads((run_dir / "run.json").read_text())


def test_a_run_keeps_the_lease_made_ahead_and_deletes_what_it_made(fake_chi, student, tmp_path: Path) -> None:
    fake_chi.lease.add_existing(LEASE, "PENDING", starts_in=timedelta(minutes=3))
    run_dir, outcome, summary = run(tmp_path, fake_chi, Shell())
    assert [s.step for s in outcome.steps] == ["preflight", "reserve", "launch", "node run", "fetch",
                                               "teardown"]
    assert "Lease.delete" not in names(fake_chi) and "Server.delete" in names(fake_chi)
    assert summary["chameleon"] | {"resources": []} == {
        "created": [f"server {SERVER}", f"floating ip {FLOATING_IP}"], "adopted": [f"lease {LEASE}"],
        "deleted": [f"server {SERVER}", f"floating ip {FLOATING_IP}"], "already_gone": [],
        "left": [f"lease {LEASE}"], "resources": []}
    assert summary["steps"][-1]["detail"] == (
        f"deleted server {SERVER}, floating IP {FLOATING_IP}; kept lease {LEASE} (adopted: found, not "
        "created, by this lab)")
    assert (run_dir / "chameleon-state.json").is_file()


def test_a_run_failing_before_the_lease_is_active_leaves_it(fake_chi, student, tmp_path: Path) -> None:
    fake_chi.lease.add_existing(LEASE, "PENDING", starts_in=timedelta(minutes=3))
    fake_chi.lease.activation_lag = timedelta(hours=1)  # it never becomes ACTIVE in time
    _, outcome, summary = run(tmp_path, fake_chi, Shell())
    assert [(s.step, s.ok) for s in outcome.steps] == [("preflight", True), ("reserve", False),
                                                       ("teardown", True)]
    assert "Lease.delete" not in names(fake_chi) and "server.Server" not in names(fake_chi)
    assert summary["chameleon"]["left"] == [f"lease {LEASE}"] and summary["chameleon"]["deleted"] == []


def test_a_run_with_a_far_start_reserves_and_stops(fake_chi, student, tmp_path: Path) -> None:
    _, outcome, summary = run(tmp_path, fake_chi, Shell(), cfg=config(lease_start="+3h"))
    reserve = outcome.steps[1]
    assert (reserve.step, reserve.ok) == ("reserve", False)
    assert reserve.detail.startswith(f"Lease {LEASE} starts 2026-11-23 12:00 CST at CHI@TACC (19:00 CET "
                                     "here), in 3 h 00 min: more than the 30 min this step waits")
    assert "Lease.delete" not in names(fake_chi)
    assert summary["chameleon"]["created"] == [f"lease {LEASE}"] == summary["chameleon"]["left"]


def test_the_run_after_a_far_start_deletes_the_lease_the_lab_reserved(fake_chi, student,
                                                                      tmp_path: Path) -> None:
    """README: "run it again after the start". That later run (a new folder, a new state file) takes
    the lease the first run created over as created, and its teardown deletes it."""
    first, _, _ = run(tmp_path, fake_chi, Shell(), cfg=config(lease_start="+3h"))
    fake_chi.clock.at += timedelta(hours=3, minutes=1)
    time.sleep(1.1)  # the run folder's name has a one-second resolution
    second, outcome, summary = run(tmp_path, fake_chi, Shell())
    assert second != first and [s.step for s in outcome.steps][-1] == "teardown"
    assert f"lease {LEASE}" in summary["chameleon"]["created"] and summary["chameleon"]["adopted"] == []
    assert f"lease {LEASE}" in summary["chameleon"]["deleted"] and names(fake_chi)[-1] == "Lease.delete"
    handed = [r for r in json.loads((first / "chameleon-state.json").read_text())["resources"]]
    assert handed[0]["detail"].startswith("handed on to ")


def test_delete_adopted_deletes_the_lease_made_ahead(fake_chi, student, tmp_path: Path) -> None:
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    _, outcome, summary = run(tmp_path, fake_chi, Shell(), delete_adopted=True)
    assert outcome.steps[-1].ok and names(fake_chi)[-1] == "Lease.delete"
    assert summary["chameleon"]["deleted"] == [f"lease {LEASE}", f"server {SERVER}",
                                               f"floating ip {FLOATING_IP}"]


def test_keep_node_names_what_is_left_and_how_to_delete_it(fake_chi, student, tmp_path: Path, capsys) -> None:
    run_dir, _, summary = run(tmp_path, fake_chi, Shell(), keep_node=True)
    out = capsys.readouterr().out
    left = f"lease {LEASE}, server {SERVER}, floating ip {FLOATING_IP}"
    assert f"--keep-node: left running: {left}; tear down with: python -m provisioning teardown --state " \
           f"{run_dir / 'chameleon-state.json'}" in out
    assert len(summary["chameleon"]["left"]) == 3


def test_sigterm_fails_the_step_and_tears_down(fake_chi, student, tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    shell = Shell(on_run=lambda: os.kill(os.getpid(), signal.SIGTERM))
    _, outcome, summary = run(tmp_path, fake_chi, shell)
    assert [(s.step, s.ok) for s in outcome.steps][-3:] == [("stopped", False), ("fetch", False),
                                                            ("teardown", True)]
    assert outcome.steps[-3].detail == "stopped by SIGTERM during node run"
    # after a signal, one time-limited try at what the node has (its pack fails here), then the teardown
    assert len(shell.calls) == 2 and "tar -czf" in shell.calls[1]
    assert "Server.delete" in names(fake_chi) and names(fake_chi)[-1] == "Lease.delete"
    assert summary["ok"] is False and len(summary["chameleon"]["deleted"]) == 3
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored


def _at(signum: int, handler: object) -> Iterator[None]:
    previous = signal.signal(signum, handler)  # type: ignore[arg-type]
    try:
        yield
    finally:
        signal.signal(signum, previous)


@pytest.fixture
def sighup_handled() -> Iterator[None]:
    """SIGHUP at its default for the test: under ``nohup`` (a test run kept past its terminal) it comes
    ignored, and the guard rightly leaves an inherited ignored SIGHUP ignored."""
    yield from _at(signal.SIGHUP, signal.SIG_DFL)


@pytest.fixture
def sigint_handled() -> Iterator[None]:
    """SIGINT as Python sets it (KeyboardInterrupt) for the test: a run started in the background by a
    script (``cmd &``) inherits it ignored, and the guard rightly leaves it ignored."""
    yield from _at(signal.SIGINT, signal.default_int_handler)


def test_sighup_during_the_teardown_waits_for_it(fake_chi, student, tmp_path: Path, capsys,
                                                 monkeypatch, sighup_handled) -> None:
    fake_server = type(fake_chi.server.Server("probe"))  # the stand-in's class
    fake_chi.rec.calls.clear()
    original = fake_server.delete

    def delete_and_hang_up(self, idempotent: bool = False, delete_ips: bool = True) -> None:
        os.kill(os.getpid(), signal.SIGHUP)
        original(self, idempotent=idempotent, delete_ips=delete_ips)

    monkeypatch.setattr(fake_server, "delete", delete_and_hang_up)
    _, outcome, _ = run(tmp_path, fake_chi, Shell())
    assert outcome.steps[-1].step == "teardown" and outcome.steps[-1].ok
    assert names(fake_chi)[-1] == "Lease.delete"
    assert "SIGHUP received during the teardown: finishing it first" in capsys.readouterr().out


def test_ctrl_c_during_notebook_08s_teardown_still_deletes_the_lease(
        fake_chi, student, tmp_path: Path, capsys, monkeypatch, sigint_handled) -> None:
    """A kernel interrupt (SIGINT) while the server is deleted: the floating IP and lease still go."""
    state = tmp_path / "state.json"
    provisioning.launch(config(), chi=fake_chi.api, state=state)
    fake_server = type(fake_chi.server.Server("probe"))
    original = fake_server.delete

    def delete_and_interrupt(self, idempotent: bool = False, delete_ips: bool = True) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        original(self, idempotent=idempotent, delete_ips=delete_ips)

    monkeypatch.setattr(fake_server, "delete", delete_and_interrupt)
    before = signal.getsignal(signal.SIGINT)
    provisioning.teardown(config(), chi=fake_chi.api, state=state)
    assert names(fake_chi)[-1] == "Lease.delete"
    assert "SIGINT received during the teardown: finishing it first" in capsys.readouterr().out
    assert signal.getsignal(signal.SIGINT) is before


def test_the_lab_cli_passes_the_lifecycle_flags(monkeypatch) -> None:
    from servelab.lab import runner

    seen: dict[str, object] = {}

    def fake_run_chameleon(preset, only, **options):
        seen.update(options)
        raise SystemExit(0)

    monkeypatch.setattr(runner, "run_chameleon", fake_run_chameleon)
    with pytest.raises(SystemExit):
        runner.main(["run", "--target", "chameleon", "--delete-adopted", "--lease-start", "+1h",
                     "--lease-id", "abc"])
    assert seen == {"keep_node": False, "delete_adopted": True,
                    "settings": {"lease_start": "+1h", "lease_id": "abc"}}
    assert runner.main(["run", "--target", "local", "--lease-id", "abc"]) == 2


def test_the_provisioning_cli_takes_the_lease_settings(tmp_path: Path) -> None:
    import subprocess
    import sys

    from servelab.core.paths import REPO_ROOT

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "TZ": "Europe/Berlin", "USER": "alice"}
    done = subprocess.run([sys.executable, "-m", "provisioning", "plan", "--code-source", "git", "--repo-url",
                           REPO, "--lease-start", "2026-11-24 09:00", "--lease-wait-minutes", "5", "--state",
                           str(tmp_path / "s.json")], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "from 2026-11-24 09:00 CST at CHI@TACC (16:00 CET here)" in done.stdout
    assert "more than 5 min from now is left reserved" in done.stdout
    assert "record what is created or adopted in ~/s.json" in done.stdout  # no machine's path
