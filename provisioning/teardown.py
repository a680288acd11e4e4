"""Teardown: delete what the state file records as created by this lab, keep what it adopted.

Server, floating IP and lease are each tried whatever happened to the others (a failed
server delete must not leave a lease holding a P100 node); the failures are reported
together, in one line, after all three were tried. ``delete_adopted`` also deletes what this
lab found and reused (recorded as adopted, or found by the configured names), and leases
reserved ahead for a later run. Reasons: docs/decisions/2026-11-23-chameleon-lifecycle.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provisioning.chi_api import ChiApi
from provisioning.config import ChameleonConfig, ProvisioningError
from provisioning.errors import describe, hint_for, one_line
from provisioning.lease import ENDED, find_lease
from provisioning.server import delete_server, find_server, release_floating_ip
from provisioning.state import ADOPTED, CREATED, DELETED, GONE, Resource, State

NOT_OURS = "not recorded as created by this lab; delete_adopted deletes it"
GUI = "GUI: Compute → Instances, Network → Floating IPs, Reservations → Leases"


@dataclass
class TeardownResult:
    """What teardown deleted, kept (and why), found already gone, and could not delete."""

    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

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
        super().__init__(f"teardown incomplete: {'; '.join(result.errors)}: run teardown again, or delete "
                         f"what is left by hand ({GUI})")
        self.result = result


class _Teardown:
    def __init__(self, config: ChameleonConfig, chi: ChiApi, state: State, delete_adopted: bool) -> None:
        self.config, self.chi, self.state, self.delete_adopted = config, chi, state, delete_adopted
        self.result = TeardownResult()

    def wanted(self, entry: Resource) -> bool:
        return self.delete_adopted or (entry.origin == CREATED and not entry.keep)

    def why_kept(self, entry: Resource) -> str:
        if entry.keep:
            return f"{entry.label} (reserved ahead for a later run: {entry.keep})"
        return f"{entry.label} (adopted: found, not created, by this lab)"

    def failed(self, what: str, exc: BaseException, entry: Resource | None = None) -> None:
        hint = hint_for(exc)
        text = f"{what} failed ({describe(exc)}{'; ' + hint if hint else ''})"
        self.result.errors.append(one_line(text))
        print(f"Teardown: {text}", flush=True)
        if entry is not None:
            self.state.set_fate(entry, entry.fate, text)

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

    def servers(self) -> None:
        config, state = self.config, self.state
        recorded = state.live("server", config)
        try:
            server = find_server(config, self.chi)
        except Exception as exc:  # keep going: the floating IP and the lease are still worth deleting
            self.failed(f"looking up server {config.server_name}", exc)
            return
        entry = state.find("server", config, str(server.id), config.server_name) if server else None
        for other in recorded:
            if other is not entry:
                self.done(other, GONE, "not found")
        if server is None:
            return
        if entry is None and not self.delete_adopted:
            self.keep(f"server {config.server_name} ({NOT_OURS})")
            return
        if entry is None:
            entry = state.record("server", config.server_name, str(server.id), ADOPTED, config)
        if not self.wanted(entry):
            self.keep(self.why_kept(entry))
            return
        try:
            if entry.origin == ADOPTED:  # its floating IP goes with it
                address = server.get_floating_ip()
                if address:
                    state.record("floating_ip", str(address), None, ADOPTED, config)
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
                released = release_floating_ip(entry.name, entry.id, self.chi)
                self.done(entry, DELETED if released else GONE, "released" if released else "not found")
            except Exception as exc:
                self.failed(f"releasing floating IP {entry.name}", exc, entry)

    def leases(self, keep_lease: bool) -> None:
        config, state = self.config, self.state
        recorded = state.live("lease", config)
        if keep_lease:
            for entry in recorded:
                self.keep(f"{entry.label} (keep_lease)")
            return
        try:
            leases = list(self.chi.lease.list_leases())
        except Exception as exc:
            self.failed("listing the project's leases", exc)
            return
        targets: list[tuple[Resource, Any]] = []
        for entry in recorded:
            match = next((lease for lease in leases if str(lease.id) == entry.id), None)
            if match is None or match.status in ENDED:
                self.done(entry, GONE, "not found")
            else:
                targets.append((entry, match))
        try:
            found = find_lease(config, self.chi, leases)
        except ProvisioningError as exc:  # two live leases with one name: the recorded ones still go
            self.failed(f"looking up lease {config.lease_id or config.lease_name}", exc)
            found = None
        if found is not None and all(lease is not found for _, lease in targets):
            if self.delete_adopted:
                targets.append((state.record("lease", found.name, str(found.id), ADOPTED, config), found))
            else:
                self.keep(f"lease {found.name} ({NOT_OURS})")
        for entry, lease in targets:
            if not self.wanted(entry):
                self.keep(self.why_kept(entry))
                continue
            try:
                lease.delete()
                self.done(entry, DELETED, "deleted")
            except Exception as exc:
                self.failed(f"deleting {entry.label}", exc, entry)


def run_teardown(config: ChameleonConfig, chi: ChiApi, state: State, keep_lease: bool = False,
                 delete_adopted: bool = False) -> TeardownResult:
    """Server, floating IPs, then lease (project and site already selected); never raises for one of them."""
    work = _Teardown(config, chi, state, delete_adopted)
    work.servers()
    work.floating_ips()
    work.leases(keep_lease)
    return work.result
