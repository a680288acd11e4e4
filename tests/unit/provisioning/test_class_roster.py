"""A class's leases from a roster (issue 50), against the recording python-chi: ``class plan`` prints every
lease and the node-hours and calls nothing; ``reserve`` makes one lease per slot into one class state file;
``status`` shows lease, server and floating IP; ``cleanup`` deletes only what the class file recorded as
made, and the unbound floating IPs this lab allocated for the class's servers."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from provisioning import __main__ as cli
from provisioning import roster
from provisioning.floating_ip import ip_description

PROJECT = "CHI-231095"


def write_roster(path: Path, count: int, start: str = "2026-11-24 09:00") -> Path:
    """``count`` students: eight slots at a time, each round of slots three hours after the last."""
    day, hour = start.split()
    lines = ["student,hub_user,slot_start"]
    for n in range(count):
        minutes = int(hour[:2]) * 60 + 180 * (n // 8)
        lines.append(f"Student {n:02d},user{n:02d},{day} {minutes // 60:02d}:{minutes % 60:02d}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_plan_on_forty_students_prints_forty_leases_and_calls_nothing(fake_chi, student, tmp_path: Path,
                                                                      capsys) -> None:
    path = write_roster(tmp_path / "class.csv", 40)
    assert cli.main(["class", "plan", "--roster", str(path), "--project", PROJECT, "--nodes", "8"]) == 0
    out = capsys.readouterr().out
    leases = [line for line in out.splitlines() if ": lease serve_system_user" in line]
    assert len(leases) == 40 and len({line.split()[3] for line in leases}) == 40
    assert "Node-hours: 113.3 (40 × 2.83 h)" in out
    assert "At most 8 leases at once" in out and "5 rounds of 2 h 50 min" in out
    assert roster.main(["plan", "--roster", str(path), "--project", PROJECT], chi=fake_chi.api) == 0
    assert fake_chi.rec.calls == []  # nothing reached Chameleon, let alone created
    assert not (tmp_path / "class.state.json").exists()


def test_reserve_makes_one_lease_per_slot_in_one_class_file(fake_chi, student, tmp_path: Path,
                                                            capsys) -> None:
    path = write_roster(tmp_path / "class.csv", 10)
    existing = fake_chi.lease.add_existing("serve_system_user03", "PENDING", starts_in=timedelta(days=1))
    assert roster.main(["reserve", "--roster", str(path), "--project", PROJECT], chi=fake_chi.api) == 0
    made = [call for call in fake_chi.rec.calls if call[0] == "lease.Lease"]
    assert len(made) == 9 and "serve_system_user03" not in [call[1][0] for call in made]
    assert all(set(call[2]) == {"start_date", "end_date"} for call in made)  # advance reservations
    first = made[0][2]
    assert first["end_date"] - first["start_date"] == timedelta(hours=2, minutes=50)
    records = json.loads((tmp_path / "class.state.json").read_text())["resources"]
    assert [(r["name"], r["origin"]) for r in records].count(("serve_system_user03", "adopted")) == 1
    assert sum(r["origin"] == "created" for r in records) == 9
    assert existing.status == "PENDING"
    calls = len(fake_chi.rec.calls)
    assert roster.main(["reserve", "--roster", str(path), "--project", PROJECT], chi=fake_chi.api) == 0
    assert "lease.Lease" not in fake_chi.rec.names()[calls:]  # again: each is already there


def test_a_slot_that_fails_is_said_and_the_others_are_made(fake_chi, student, tmp_path: Path,
                                                           capsys) -> None:
    path = write_roster(tmp_path / "class.csv", 3)
    path.write_text(path.read_text() + "Late Student,late,2020-01-01 09:00\n")  # in the past
    assert roster.main(["reserve", "--roster", str(path), "--project", PROJECT], chi=fake_chi.api) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: 1 failed: Late Student (line 5): lease_start")
    assert len(err.splitlines()) == 1
    assert fake_chi.rec.names().count("Lease.submit") == 3


def test_status_shows_each_slots_lease_server_and_floating_ip(fake_chi, student, tmp_path: Path,
                                                              capsys) -> None:
    path = write_roster(tmp_path / "class.csv", 2)
    assert roster.main(["reserve", "--roster", str(path), "--project", PROJECT], chi=fake_chi.api) == 0
    server = fake_chi.server.add_existing("node-serve-system-user01", "ACTIVE")
    fake_chi.network.floating_ips.append({"id": "fip-1", "floating_ip_address": "129.114.108.50",
                                          "port_id": server._port, "description": "", "tags": []})
    capsys.readouterr()
    assert roster.main(["status", "--roster", str(path), "--project", PROJECT], chi=fake_chi.api) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0] == "Student 00 | serve_system_user00: PENDING (created by the class) | none | none"
    assert rows[1] == ("Student 01 | serve_system_user01: PENDING (created by the class) | "
                       "node-serve-system-user01: ACTIVE | 129.114.108.50")


def test_cleanup_deletes_only_what_the_class_file_recorded(fake_chi, student, tmp_path: Path, capsys) -> None:
    path = write_roster(tmp_path / "class.csv", 3)
    adopted = fake_chi.lease.add_existing("serve_system_user02", "PENDING", starts_in=timedelta(days=1))
    assert roster.main(["reserve", "--roster", str(path), "--project", PROJECT], chi=fake_chi.api) == 0
    mine = fake_chi.lease.add_existing("serve_system_instructor", "ACTIVE")  # not the class's
    network = fake_chi.network
    for address, description, tags in (
            ("129.114.108.60", ip_description("node-serve-system-user00"), []),  # a class server's leak
            ("129.114.108.61", ip_description("node-serve-system-someone"), []),  # another student's
            ("129.114.108.62", "", []),  # the project's own
            ("129.114.108.63", ip_description("node-serve-system-user01"), ["reservation:r1"])):  # reserved
        network.floating_ips.append({"id": f"fip-{address}", "floating_ip_address": address, "port_id": None,
                                     "description": description, "tags": tags})
    capsys.readouterr()
    assert roster.main(["cleanup", "--roster", str(path), "--project", PROJECT], chi=fake_chi.api) == 0
    out = capsys.readouterr().out
    deleted = [call[1][0] for call in fake_chi.rec.calls if call[0] == "Lease.delete"]
    assert sorted(deleted) == ["serve_system_user00", "serve_system_user01"]
    assert adopted.status == "PENDING" and mine.status == "ACTIVE"
    assert "Kept lease serve_system_user02 (adopted" in out
    released = [call[1][0] for call in fake_chi.rec.calls if call[0] == "network.deallocate_floating_ip"]
    assert released == ["129.114.108.60"]
    records = json.loads((tmp_path / "class.state.json").read_text())["resources"]
    assert {r["name"]: r["fate"] for r in records} == {"serve_system_user00": "deleted",
                                                       "serve_system_user01": "deleted",
                                                       "serve_system_user02": "live"}
    touched = [name for name in fake_chi.rec.names() if name.startswith(("Server.", "server.Server"))]
    assert touched == []  # no server is deleted or made: the leases' end takes the students' servers


@pytest.mark.parametrize(("text", "message"), [
    ("name,slot\nAda,1\n", "must name the columns student, hub_user (or lease_name) and slot_start"),
    ("student,hub_user,slot_start\nAda,,2026-12-01 09:00\n", "line 2: student, hub_user and slot_start"),
    ("student,hub_user,slot_start\nAda,ada,tomorrow\n", "line 2: lease_start='tomorrow' is not a time"),
    ("student,hub_user,slot_start\nAda,ada,+2h\n", "must be a date and time"),
    ("student,lease_name,slot_start\nAda,serve_system_ada,2026-12-01 09:00\nAda,serve_system_ada,"
     "2026-12-02 09:00\n", "appears on two lines"),
    ("student,hub_user,slot_start\n", "has no slot"),
])
def test_a_roster_it_cannot_use_is_one_line_naming_what_to_fix(fake_chi, student, tmp_path: Path, capsys,
                                                               text: str, message: str) -> None:
    path = tmp_path / "class.csv"
    path.write_text(text)
    assert cli.main(["class", "plan", "--roster", str(path), "--project", PROJECT]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1
    assert fake_chi.rec.calls == []
