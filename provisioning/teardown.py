"""Teardown: delete what the state file records as created by this lab, keep what it adopted.

Server, floating IP and lease are each tried whatever happened to the others (a failed
server delete must not leave a lease holding a P100 node); the failures are reported
together, in one line, after all three were tried. ``delete_adopted`` also deletes what this
lab found and reused (recorded as adopted, or found by the configured names), and leases
reserved ahead for a later run. A lease this lab reserved ahead (``lease_start``) stays this
lab's (created) when found again by name, and goes once it has started: it was for this
class; only one that has not started yet is kept, for its later run. Whatever is kept is
listed with how long it stays reserved and the one command that deletes it.

Every read (a list, a lookup, a lease's status: a Blazar call each time in python-chi) is tried again a few
times on a failure that may pass (``errors.transient``: a 503 when a class's teardowns come at once); one
that still fails stops only the resource it was for, named with the line that deletes it. A record whose
create call was never answered (``pending``) is resolved by the lease's or server's unique name, or by the
unbound IPs the lab described for the server; an IP is released by its id only.
Reasons: docs/decisions/2026-11-23-chameleon-lifecycle.md, 2026-11-25-class-day-provisioning.md,
2026-12-01-class-day-fourth-pass.md.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from provisioning import messages as msg
from provisioning import times
from provisioning.chi_api import ChiApi
from provisioning.config import ChameleonConfig, ProvisioningError
from provisioning.errors import describe, gone, hint_for, one_line, stop_in, transient
from provisioning.floating_ip import NotOurs, release_floating_ip, release_pending
from provisioning.lease import ENDED, READ_ATTEMPTS, READ_RETRY_S, find_lease, read_status
from provisioning.server import delete_server, find_server
from provisioning.state import ADOPTED, CREATED, DELETED, GONE, Resource, State

T = TypeVar("T")
NOT_OURS = "not recorded as created by this lab; delete_adopted deletes it"


@dataclass
class TeardownResult:
    """What teardown deleted, kept (and why), found already gone, and could not delete."""

    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    still_there: list[str] = field(default_factory=list)  # kept on Chameleon, each with until when
    delete_command: str = ""  # the one command that deletes what is kept ("" when nothing is)

    def reserved_text(self) -> str:
        """What stays reserved after this teardown and the command that deletes it ("" when nothing)."""
        if not self.still_there:
            return ""
        lines = ["Still on Chameleon after this teardown (the lease keeps its node, and its hours are "
                 "charged to the project, until it ends):"]
        lines += [f"  {item}" for item in self.still_there]
        lines += [f"Delete it now, from the lab's folder: {self.delete_command}",
                  "  (or, in notebook 08, set delete_adopted = True and run it again)"]
        return "\n".join(lines)

    def line(self) -> str:
        parts = [f"deleted {', '.join(self.deleted)}" if self.deleted else "deleted nothing"]
        if self.kept:
            parts.append(f"kept {', '.join(self.kept)}")
        if self.gone:
            parts.append(f"already gone: {', '.join(self.gone)}")
        if self.errors:
            parts.append(f"FAILED: {'; '.join(self.errors)}")
        return "; ".join(parts)


class TeardownError(ProvisioningError):
    """Something could not be deleted; ``result`` says what was and what was not."""

    def __init__(self, result: TeardownResult) -> None:
        super().__init__(msg.TEARDOWN_INCOMPLETE(errors="; ".join(result.errors)))
        self.result = result


def delete_command(config: ChameleonConfig, state: Path, lease_id: str | None = None,
                   server: bool = False, lease_only: bool = False) -> str:
    """``python -m provisioning teardown ... --delete-adopted`` for this project, site, lease, state file;
    ``lease_only``: that one lease and nothing else (a class slot: the same state file records the other
    slots, and the caller's server is not the slot's)."""
    args = ["python", "-m", "provisioning", "teardown", "--project", config.project, "--site", config.site]
    lease_id = lease_id or config.lease_id
    args += ["--lease-id", lease_id] if lease_id else ["--lease-name", config.lease_name]
    if server:
        args += ["--server-name", config.server_name]
    return shlex.join([*args, "--state", str(state), *(["--lease-only"] if lease_only else []),
                       "--delete-adopted"])


def _started(lease: Any, status: str | None) -> bool:
    """The lease is running or its start time has passed (it is no longer reserved for later); a status
    that could not be read (None) goes by the start time alone."""
    start = times.to_utc(getattr(lease, "start_date", None))
    return status == "ACTIVE" or start is None or start <= times.utcnow()


def _until(lease: Any, status: str | None, site: str) -> str:
    start = times.to_utc(getattr(lease, "start_date", None))
    end = times.to_utc(getattr(lease, "end_date", None))
    when = f"until {times.show_time(end, site)}" if end is not None else "until it ends"
    if start is not None and start > times.utcnow():
        when = f"from {times.show_time(start, site)} {when}"
    return f"{status or 'status not read'}, reserved {when}"


class _Teardown:
    def __init__(self, config: ChameleonConfig, chi: ChiApi, state: State, delete_adopted: bool,
                 lease_only: bool = False) -> None:
        self.config, self.chi, self.state, self.delete_adopted = config, chi, state, delete_adopted
        self.lease_only = lease_only
        self.result = TeardownResult()
        self.kept_lease_id: str | None = None
        self.kept_server = False
        self._statuses: dict[int, str | None] = {}

    def wanted(self, entry: Resource) -> bool:
        return self.delete_adopted or (entry.origin == CREATED and not entry.keep)

    def why_kept(self, entry: Resource) -> str:
        if entry.keep:
            return f"{entry.label} (reserved ahead for a later run: {entry.keep})"
        return f"{entry.label} (adopted: found, not created, by this lab)"

    def failed(self, what: str, exc: BaseException, entry: Resource | None = None, delete: str = "") -> None:
        hint = hint_for(exc)
        text = msg.TEARDOWN_STEP_FAILED(what=what, error=describe(exc), hint=f"; {hint}" if hint else "",
                                        delete=msg.TEARDOWN_DELETE_LINE(command=delete) if delete else "")
        self.result.errors.append(one_line(text))
        print(f"Teardown: {text}", flush=True)
        if entry is not None:
            self.state.set_fate(entry, entry.fate, text)

    def tried(self, action: Callable[[], T]) -> T:
        """``action()``, tried again ``READ_RETRY_S`` apart up to ``READ_ATTEMPTS`` times when it fails in a
        way that may pass; the last failure is raised, a stop at once."""
        for attempt in range(1, READ_ATTEMPTS + 1):
            try:
                return action()
            except Exception as exc:
                stop = stop_in(exc)
                if stop is not None:
                    raise stop from None
                if attempt == READ_ATTEMPTS or not transient(exc):
                    raise
                times.sleep(READ_RETRY_S)
        raise AssertionError("unreachable")  # the loop returns or raises

    def status(self, lease: Any) -> str | None:
        """The lease's status (read once per teardown, tried again on a transient failure), or None when it
        could not be read: said once, and the teardown goes on as if the lease were live."""
        if id(lease) not in self._statuses:
            try:
                self._statuses[id(lease)] = read_status(lease)
            except Exception as exc:
                self._statuses[id(lease)] = None
                print(msg.TEARDOWN_STATUS_UNREAD(name=lease.name, error=describe(exc),
                                                 attempts=READ_ATTEMPTS), flush=True)
        return self._statuses[id(lease)]

    def lease_line(self, entry: Resource) -> str:
        return delete_command(self.config, self.state.path, entry.id, lease_only=True)

    def done(self, entry: Resource, fate: str, verb: str) -> None:
        self.state.set_fate(entry, fate, verb)
        if fate == DELETED:
            self.result.deleted.append(entry.label)
            print(f"{verb.capitalize()} {entry.label} ({entry.origin} by this lab)", flush=True)
        else:
            self.result.gone.append(entry.label)
            print(f"{entry.label.capitalize()} was already gone", flush=True)

    def keep(self, label: str) -> None:
        self.result.kept.append(label)
        print(f"Kept {label}", flush=True)

    def ip_id(self, address: str) -> str | None:
        """The id of the project's floating IP ``address`` (bound to the server about to go), else None."""
        with contextlib.suppress(Exception):
            ips = self.tried(lambda: list(self.chi.network.list_floating_ips()))
            return next((str(ip["id"]) for ip in ips if ip.get("floating_ip_address") == address), None)
        return None

    def servers(self) -> None:
        config, state = self.config, self.state
        recorded = state.live("server", config)
        try:
            server = self.tried(lambda: find_server(config, self.chi))
        except Exception as exc:  # keep going: the floating IP and the lease are still worth deleting
            self.failed(f"looking up server {config.server_name}", exc,
                        delete=delete_command(config, state.path, server=True) if recorded else "")
            return
        entry = state.find("server", config, str(server.id), config.server_name) if server else None
        for other in recorded:
            if other is not entry:
                self.done(other, GONE, "not found")
        if server is None:
            return
        if entry is None and not self.delete_adopted:
            self.keep(f"server {config.server_name} ({NOT_OURS})")
            self.kept_server = True
            self.result.still_there.append(f"server {config.server_name} ({server.status})")
            return
        if entry is None:
            entry = state.record("server", config.server_name, str(server.id), ADOPTED, config)
        elif entry.id is None:  # its launch was cut before Nova's answer: found by its unique name
            state.settle(entry, config.server_name, str(server.id))
        if not self.wanted(entry):
            self.keep(self.why_kept(entry))
            self.kept_server = True
            self.result.still_there.append(f"{entry.label} ({server.status}, {entry.origin} by this lab)")
            return
        try:
            if entry.origin == ADOPTED:  # its floating IP goes with it, by the id read while still bound here
                address = server.get_floating_ip()
                if address:
                    state.record("floating_ip", str(address), self.ip_id(str(address)), ADOPTED, config)
            delete_server(server, config, self.chi)
            self.done(entry, DELETED, "deleted")
        except Exception as exc:
            self.failed(f"deleting server {config.server_name}", exc, entry)

    def floating_ips(self) -> None:
        for entry in self.state.live("floating_ip", self.config):
            if not self.wanted(entry):
                self.keep(self.why_kept(entry))
                continue
            try:
                if entry.pending and entry.id is None:  # its allocation was never answered
                    self.release_pending(entry)
                    continue
                gone_ip = not self.tried(partial(release_floating_ip, entry.name, entry.id, self.chi,
                                                 self.config.server_name))
                self.done(entry, GONE if gone_ip else DELETED, "not found" if gone_ip else "released")
            except NotOurs as refusal:  # the address is someone else's now: ours is gone
                print(f"Teardown: {refusal}", flush=True)
                self.state.set_fate(entry, GONE, str(refusal))
                self.result.gone.append(f"{entry.label} (its address is another's now)")
            except Exception as exc:
                self.failed(f"releasing floating IP {entry.name}", exc, entry)

    def release_pending(self, entry: Resource) -> None:
        """An IP record whose allocation was never answered: the unbound IPs the lab described for the server
        are released (that allocation's, if it made one)."""
        server = self.config.server_name
        released = self.tried(lambda: release_pending(self.chi, server))
        for ip in released[1:]:
            print(f"Released floating IP {ip.get('floating_ip_address')} (allocated by this lab for server "
                  f"{server}, unbound)", flush=True)
        if released:
            self.state.settle(entry, str(released[0]["floating_ip_address"]), str(released[0]["id"]))
        self.done(entry, DELETED if released else GONE, "released" if released else "not found")

    def matched(self, entry: Resource, leases: list[Any]) -> Any | None:
        """The live lease this record is: by its id; a record whose create call was never answered by the
        lease's unique name (then recorded with its id)."""
        if entry.id is not None or not entry.pending:
            return next((lease for lease in leases if str(lease.id) == entry.id), None)
        named = [lease for lease in leases if lease.name == entry.name and self.status(lease) not in ENDED]
        if len(named) != 1:
            return None
        self.state.settle(entry, named[0].name, str(named[0].id))
        return named[0]

    def leases(self, keep_lease: bool) -> None:
        config, state = self.config, self.state
        recorded = state.live("lease", config)
        if self.lease_only:  # the one lease named, not every lease the state file records
            recorded = [e for e in recorded
                        if (e.id == config.lease_id if config.lease_id else e.name == config.lease_name)]
        if keep_lease:
            for entry in recorded:
                self.keep(f"{entry.label} (keep_lease)")
                self.kept_lease_id = entry.id
                self.result.still_there.append(f"{entry.label} (keep_lease; {entry.origin} by this lab)")
            return
        try:
            leases = self.tried(lambda: list(self.chi.lease.list_leases()))
        except Exception as exc:
            ours = [entry for entry in recorded if self.wanted(entry)]
            self.failed("listing the project's leases", exc,
                        delete="; ".join(self.lease_line(entry) for entry in ours))
            return
        targets: list[tuple[Resource, Any]] = []
        for entry in recorded:
            match = self.matched(entry, leases)
            if match is None or self.status(match) in ENDED:
                self.done(entry, GONE, "not found")
            else:
                targets.append((entry, match))
        ended = self.ended_by_id(leases, {entry.id for entry in recorded})
        found = None
        try:
            found = None if ended else find_lease(config, self.chi, leases, status=self.status)
        except ProvisioningError as exc:  # two live leases with one name: the recorded ones still go
            self.failed(f"looking up lease {config.lease_id or config.lease_name}", exc)
        if found is not None and all(lease is not found for _, lease in targets):
            earlier = state.reserved_earlier("lease", config, str(found.id))
            if earlier is not None:  # reserved ahead by this lab (another state file): still the lab's own
                print(f"lease {found.name} was reserved ahead by this lab ({earlier}): it is this lab's to "
                      "delete", flush=True)
                start = times.to_utc(found.start_date)
                keep = ("" if _started(found, self.status(found)) or start is None
                        else f"starts {start:%Y-%m-%d %H:%M} UTC")
                targets.append((state.record("lease", found.name, str(found.id), CREATED, config, keep=keep),
                                found))
            elif self.delete_adopted:
                targets.append((state.record("lease", found.name, str(found.id), ADOPTED, config), found))
            else:
                self.keep(f"lease {found.name} ({NOT_OURS})")
                self.kept_lease_id = str(found.id)
                self.result.still_there.append(
                    f"lease {found.name} ({_until(found, self.status(found), config.site)}; not recorded as "
                    "created by this lab)")
        if found is None and not targets and not ended:
            what = f"id {config.lease_id}" if config.lease_id else f"named {config.lease_name!r} (lease_name)"
            print(f"No live lease {what} in project {config.project} at {config.site}: none to delete. A "
                  "lease under another name (the original lab's is serve_system_<netID>) is not looked for: "
                  "set lease_name or lease_id to it", flush=True)
        for entry, lease in targets:
            if entry.keep and entry.origin == CREATED and _started(lease, self.status(lease)):  # this class's
                state.record("lease", entry.name, entry.id, CREATED, config, keep="")
            if not self.wanted(entry):
                self.keep(self.why_kept(entry))
                self.kept_lease_id = entry.id
                self.result.still_there.append(
                    f"{entry.label} ({_until(lease, self.status(lease), config.site)}; {entry.origin} by "
                    "this lab)")
                continue
            try:
                self.tried(lease.delete)
                self.done(entry, DELETED, "deleted")
            except Exception as exc:
                if gone(exc):  # deleted meanwhile (the GUI, another teardown)
                    self.done(entry, GONE, "not found")
                else:
                    self.failed(f"deleting {entry.label}", exc, entry, delete=self.lease_line(entry))

    def ended_by_id(self, leases: list[Any], recorded: set[str | None]) -> bool:
        """The lease ``lease_id`` names has ended (Blazar keeps it listed): already gone, not a failure. A
        class slot's delete line, or 08 given an ended slot's id, has nothing left to delete."""
        lease_id = self.config.lease_id
        ended = [lease for lease in leases if lease_id and str(lease.id) == lease_id]
        ended = [lease for lease in ended if self.status(lease) in ENDED]
        if not ended:
            return False
        if lease_id not in recorded:  # a recorded one was reported gone above
            self.result.gone.append(f"lease {ended[0].name}")
            print(f"Lease {ended[0].name} ({lease_id}) has already ended ({self.status(ended[0])}): nothing "
                  "to delete", flush=True)
        return True


def run_teardown(config: ChameleonConfig, chi: ChiApi, state: State, keep_lease: bool = False,
                 delete_adopted: bool = False, lease_only: bool = False) -> TeardownResult:
    """Server, floating IPs, then lease (project and site already selected); never raises for one of them.
    ``lease_only``: only the lease the config names (its id, else its name)."""
    work = _Teardown(config, chi, state, delete_adopted, lease_only)
    if not lease_only:
        work.servers()
        work.floating_ips()
    work.leases(keep_lease)
    if work.result.still_there:
        work.result.delete_command = delete_command(config, state.path, work.kept_lease_id, work.kept_server,
                                                    lease_only)
    return work.result
