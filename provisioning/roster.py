"""A class's leases from a roster: ``python -m provisioning class plan|reserve|status|cleanup --roster FILE``.

The roster is a CSV with a header: ``student``, then ``hub_user`` (the student's Chameleon Jupyter user:
the lease is ``serve_system_<hub_user>``, as the student's 01 and 02 look for it) or ``lease_name``, then
``slot_start`` (ISO 8601, the site's time zone when no offset is given). Each row is one lease of one
``gpu_p100`` node for the lab's lease length, starting at the slot.

- ``plan`` prints every lease it would make and their node-hours, and calls nothing on Chameleon.
- ``reserve`` makes each lease not yet made (``provisioning.lease.create_lease``), recording each in one
  class state file (``--state``, default ``<roster>.state.json`` beside the roster); a lease already
  there is recorded as adopted. A slot that fails is said and the others go on.
- ``status`` shows each slot's lease, the student's server and its floating IP.
- ``cleanup`` deletes the leases the class file records as made by it (``teardown.run_teardown``, one lease
  each), then releases the unbound floating IPs this lab allocated for the class's servers; nothing else.

Why: docs/decisions/2026-12-01-the-lab-as-a-course.md
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from provisioning import messages as msg
from provisioning import times
from provisioning.chi_api import ChiApi
from provisioning.config import ChameleonConfig, ProvisioningError, from_env, with_changes
from provisioning.credentials import check_credentials
from provisioning.errors import describe, one_line, step
from provisioning.floating_ip import for_server, unbound_floating_ips
from provisioning.lease import ENDED, create_lease, find_lease
from provisioning.server import find_server
from provisioning.state import ADOPTED, CREATED, LIVE, State
from provisioning.teardown import run_teardown

LEASE_PREFIX = "serve_system_"  # the lab's lease name for a user (config.ChameleonConfig)
SERVER_PREFIX = "node-serve-system-"  # and its server's
COLUMNS = ("student", "hub_user|lease_name", "slot_start")


class RosterError(ProvisioningError):
    """The roster cannot be read; the message names the line and what to fix."""


@dataclass(frozen=True)
class Slot:
    """One student's lease: who, its name, the server the student's 02 will launch on it, when."""

    student: str
    lease_name: str
    server_name: str
    start: datetime  # aware UTC
    end: datetime
    line: int

    @property
    def node_hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")


def read_roster(path: Path, site: str, duration: timedelta) -> list[Slot]:
    """The roster's slots, in its order; a RosterError naming the line for anything it cannot use."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise RosterError(msg.ROSTER_UNREADABLE(path=path, error=exc.strerror)) from None
    rows = list(csv.DictReader(text.splitlines()))
    header = [h.strip() for h in (csv.reader(text.splitlines()[:1]).__next__() if text.strip() else [])]
    who = "hub_user" if "hub_user" in header else "lease_name" if "lease_name" in header else ""
    if "student" not in header or "slot_start" not in header or not who:
        raise RosterError(msg.ROSTER_COLUMNS(path=path, header=",".join(header) or "empty"))
    slots: list[Slot] = []
    for number, row in enumerate(rows, start=2):
        row = {k.strip(): (v or "").strip() for k, v in row.items() if k}
        if not any(row.values()):
            continue
        student, given, start_text = row.get("student", ""), row.get(who, ""), row.get("slot_start", "")
        if not student or not given or not start_text:
            raise RosterError(msg.ROSTER_FIELD_MISSING(path=path, line=number, who=who))
        user = _safe(given.removeprefix(LEASE_PREFIX))
        lease_name = _safe(given) if who == "lease_name" else f"{LEASE_PREFIX}{user}"
        try:
            start = times.parse_start(start_text, site)
        except ProvisioningError as exc:
            raise RosterError(msg.ROSTER_BAD_START(path=path, line=number, error=exc)) from None
        if start is None or start_text.startswith("+"):
            raise RosterError(msg.ROSTER_START_NOT_A_TIME(path=path, line=number, start=start_text))
        slots.append(Slot(student, lease_name, f"{SERVER_PREFIX}{user}", start, start + duration, number))
    if not slots:
        raise RosterError(msg.ROSTER_EMPTY(path=path))
    names = [s.lease_name for s in slots]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # two live leases of one name: the student's 02 could not tell which (lease.find_lease)
        raise RosterError(msg.ROSTER_NAME_TWICE(path=path, names=", ".join(twice)))
    return slots


def most_at_once(slots: Sequence[Slot]) -> tuple[int, datetime | None]:
    """The most slots that overlap at one moment, and the first moment it happens."""
    events = sorted([(s.start, 1) for s in slots] + [(s.end, -1) for s in slots], key=lambda e: (e[0], e[1]))
    now = best = 0
    when = None
    for at, change in events:
        now += change
        if now > best:
            best, when = now, at
    return best, when


def rounds(students: int, nodes: int) -> int:
    """How many rounds of slots ``students`` need on ``nodes`` nodes (one lease each at a time)."""
    return math.ceil(students / max(1, nodes))


def plan_text(slots: Sequence[Slot], config: ChameleonConfig, nodes: int | None = None,
              su_per_node_hour: float = 1.0) -> str:
    """What ``reserve`` would make, one line a lease, then the node-hours (and SUs at the rate given)."""
    lines = [f"Class plan (plan only: nothing is created): {len(slots)} leases of 1 × {config.node_type} at "
             f"{config.site}, {config.duration_text} each, project {config.project or '(not set)'}"]
    for slot in slots:
        start, end = times.show_time(slot.start, config.site), times.show_time(slot.end, config.site)
        lines.append(f"  {slot.student}: lease {slot.lease_name} from {start} to {end} (server "
                     f"{slot.server_name})")
    hours = sum(s.node_hours for s in slots)
    lines.append(f"Node-hours: {hours:.1f} ({len(slots)} × {slots[0].node_hours:.2f} h); at "
                 f"{su_per_node_hour:g} SU per node-hour, {hours * su_per_node_hour:.0f} SUs")
    peak, when = most_at_once(slots)
    if when is not None:
        lines.append(f"At most {peak} leases at once (first at {times.show_time(when, config.site)})"
                     + (f": more than the {nodes} nodes given; Blazar refuses a lease when no node is free"
                        if nodes and peak > nodes else ""))
    if nodes:
        lines.append(f"On {nodes} node(s), {len(slots)} slots take {rounds(len(slots), nodes)} rounds of "
                     f"{config.duration_text}")
    return "\n".join(lines)


def _slot_config(config: ChameleonConfig, slot: Slot, lease_id: str = "") -> ChameleonConfig:
    return with_changes(config, lease_name=slot.lease_name, server_name=slot.server_name,
                        lease_start=slot.start, lease_id=lease_id)


def _select(config: ChameleonConfig, chi: ChiApi | None) -> ChiApi:
    """python-chi with the class's project and site selected (credentials checked first, as preflight)."""
    from provisioning.checks import check_project, select_context, start_chi

    if chi is None:
        check_credentials()
    chi = start_chi(config, chi)
    select_context(config, chi)
    check_project(config, chi)
    return chi


def reserve(slots: Sequence[Slot], config: ChameleonConfig, chi: ChiApi | None, state: Path) -> list[str]:
    """Make each slot's lease not yet made, recording it in ``state``; the slots that failed, each in one
    line (the others are made all the same)."""
    chi = _select(config, chi)
    records = State(state)
    with step("listing the project's leases"):
        leases = list(chi.lease.list_leases())
    failed = []
    for slot in slots:
        slot_config = _slot_config(config, slot)
        try:
            found = find_lease(slot_config, chi, leases)
            if found is not None:
                records.record("lease", found.name, str(found.id), ADOPTED, slot_config)
                print(f"{slot.student}: lease {slot.lease_name} is already there ({found.status}): recorded "
                      "as adopted, kept at cleanup", flush=True)
                continue
            lease = create_lease(slot_config, chi, records)
            print(f"{slot.student}: lease {lease.name} reserved ({lease.id})", flush=True)
        except ProvisioningError as exc:
            error = one_line(str(exc))
            failed.append(msg.CLASS_SLOT_FAILED(student=slot.student, line=slot.line, error=error))
            print(msg.CLASS_SLOT_NOT_RESERVED(student=slot.student, error=error), flush=True)
    made = len([e for e in records.resources if e.kind == "lease" and e.origin == CREATED and e.fate == LIVE])
    print(f"Class state file: {records.path} ({made} leases made by this class, live)")
    return failed


def status_rows(slots: Sequence[Slot], config: ChameleonConfig, chi: ChiApi | None,
                state: Path) -> list[tuple[str, str, str, str]]:
    """(student, lease and its state, server and its state, floating IP) for every slot."""
    chi = _select(config, chi)
    records = State(state)
    with step("listing the project's leases"):
        leases = list(chi.lease.list_leases())
    rows = []
    for slot in slots:
        entry = next((e for e in records.resources if e.kind == "lease" and e.name == slot.lease_name), None)
        lease = next((x for x in leases if entry is not None and entry.id and str(x.id) == entry.id), None)
        by_name = (x for x in leases if x.name == slot.lease_name and x.status not in ENDED)
        lease = lease or next(by_name, None)
        where = f"{entry.origin} by the class" if entry is not None else "not in the class file"
        lease_text = f"{slot.lease_name}: {lease.status} ({where})" if lease is not None else \
            f"{slot.lease_name}: none ({where})"
        server_text, address = "none", ""
        try:
            server = find_server(_slot_config(config, slot), chi)
            if server is not None:
                server_text = f"{slot.server_name}: {server.status}"
                address = str(server.get_floating_ip() or "")
        except Exception as exc:  # one slot's look-up failing says so and the others are still shown
            server_text = f"{slot.server_name}: could not be read ({describe(exc)})"
        rows.append((slot.student, lease_text, server_text, address or "none"))
    return rows


def cleanup(slots: Sequence[Slot], config: ChameleonConfig, chi: ChiApi | None, state: Path) -> list[str]:
    """Delete the leases ``state`` records as made by the class, then release the unbound floating IPs this
    lab allocated for the class's servers; returns what failed (each in one line)."""
    chi = _select(config, chi)
    records = State(state)
    failed: list[str] = []
    for entry in [e for e in records.resources if e.kind == "lease" and e.fate == LIVE]:
        if entry.origin != CREATED:
            print(f"Kept lease {entry.name} (adopted: it was there before the class reserved it)")
            continue
        slot_config = with_changes(config, lease_name=entry.name, lease_id=entry.id or "", lease_start=None)
        if entry.keep:  # made for a later slot: the class's own to cancel, started or not
            records.record("lease", entry.name, entry.id, CREATED, slot_config, keep="")
        result = run_teardown(slot_config, chi, records, lease_only=True)
        failed += result.errors
    servers = {slot.server_name for slot in slots}
    with step("listing the project's floating IPs"):
        unbound = unbound_floating_ips(chi)
    for ip in unbound:
        owner = next((name for name in servers if for_server(ip, name)), None)
        if owner is None:
            continue
        address = str(ip.get("floating_ip_address"))
        try:
            chi.network.deallocate_floating_ip(address)
            print(f"Released floating IP {address} (allocated by this lab for {owner})", flush=True)
        except Exception as exc:
            failed.append(msg.CLASS_IP_NOT_RELEASED(address=address, error=describe(exc)))
    return failed


def default_state(roster: Path) -> Path:
    return Path(roster).with_name(Path(roster).stem + ".state.json")


def main(argv: Sequence[str] | None = None, chi: ChiApi | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m provisioning class",
                                     description="a class's leases from a roster (see provisioning.roster)")
    parser.add_argument("action", choices=["plan", "reserve", "status", "cleanup"])
    parser.add_argument("--roster", required=True, type=Path,
                        help="CSV with the columns student, hub_user (or lease_name), slot_start")
    parser.add_argument("--state", type=Path, help="the class state file (default <roster>.state.json)")
    parser.add_argument("--project")
    parser.add_argument("--site")
    parser.add_argument("--node-type")
    parser.add_argument("--minutes", type=int, help="each lease's length in minutes (default 170)")
    parser.add_argument("--nodes", type=int, help="plan: how many nodes the class can use at once")
    parser.add_argument("--su-per-node-hour", type=float, default=1.0,
                        help="plan: the SU rate of the node type (Chameleon: 1 SU per node-hour, more for "
                             "certain resources: check your allocation's charges)")
    args = parser.parse_args(argv)
    state = args.state or default_state(args.roster)
    try:
        config = from_env(project=args.project, site=args.site, node_type=args.node_type,
                          duration=args.minutes)
        slots = read_roster(args.roster, config.site, config.duration)
        if args.action == "plan":
            print(plan_text(slots, config, args.nodes, args.su_per_node_hour))
            return 0
        if args.action == "status":
            for row in status_rows(slots, config, chi, state):
                print(" | ".join(row))
            return 0
        failed = (reserve if args.action == "reserve" else cleanup)(slots, config, chi, state)
    except ProvisioningError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 1
    except Exception as exc:  # python-chi, keystoneauth: still one line
        print(f"error: {describe(exc)}", file=sys.stderr)
        return 1
    if failed:
        print(f"error: {msg.CLASS_FAILED(count=len(failed), failures='; '.join(failed))}", file=sys.stderr)
        return 1
    return 0
