"""What provisioning created and what it adopted, in a small JSON file that teardown reads.

Teardown deletes exactly what this file records as ``created`` (by its id); what was found
and reused (``adopted``: a lease made ahead in the GUI, one given by ``lease_id``, an existing
server, a free floating IP of the project) is kept unless ``delete_adopted``. The file sits
in the run's folder (``<run dir>/chameleon-state.json`` for ``./lab run --target chameleon``)
or, for the notebooks, in the results folder (``$SERVELAB_RESULTS``, else ``results/``), so
notebook 08 tears down what 01 and 02 created. Entries are written as soon as a resource
exists (before anything that can fail) and never deleted: teardown sets their ``fate``.
Reasons: docs/decisions/2026-11-23-chameleon-lifecycle.md.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from provisioning import messages as msg
from provisioning import times
from provisioning.config import ChameleonConfig, ProvisioningError
from servelab.core.paths import shown

STATE_NAME = "chameleon-state.json"
CREATED, ADOPTED = "created", "adopted"
LIVE, DELETED, GONE = "live", "deleted", "gone"  # fates: still there / deleted by teardown / found missing
KINDS = {"lease": "lease", "server": "server", "floating_ip": "floating IP"}


def default_state_path() -> Path:
    """``$SERVELAB_RESULTS/chameleon-state.json``, else the checkout's ``results/chameleon-state.json``."""
    from servelab.results.store import results_dir

    return results_dir() / STATE_NAME


@dataclass
class Resource:
    """One resource a provisioning call created or adopted; ``name`` is the address of a floating IP."""

    kind: str
    name: str
    id: str | None
    origin: str
    site: str
    project: str
    fate: str = LIVE
    keep: str = ""  # why teardown keeps a resource this lab created (a lease reserved for a later run)
    detail: str = ""  # the last thing teardown did or could not do
    pending: str = ""  # the create call was sent then (UTC, ISO) and its answer not recorded: no id yet

    @property
    def label(self) -> str:
        return f"{KINDS.get(self.kind, self.kind)} {self.name}"


class State:
    """The records in one state file; every change is written at once (atomically)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_state_path()
        self.resources: list[Resource] = []
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text())
                known = {f.name for f in fields(Resource)}
                self.resources = [Resource(**{k: v for k, v in item.items() if k in known})
                                  for item in data.get("resources", [])]
            except (ValueError, TypeError, AttributeError) as exc:
                raise ProvisioningError(msg.STATE_FILE_UNREADABLE(path=shown(str(self.path)),
                                                                  error=exc)) from exc

    def _matches(self, entry: Resource, kind: str, config: ChameleonConfig) -> bool:
        return entry.kind == kind and entry.site == config.site and entry.project == config.project

    def find(self, kind: str, config: ChameleonConfig, rid: str | None, name: str = "") -> Resource | None:
        """The live record of this resource: by id; by name when either side has no id yet."""
        for entry in self.live(kind, config):
            by_name = (rid is None or entry.id is None) and name and entry.name == name
            if (rid and entry.id == rid) or by_name:
                return entry
        return None

    def live(self, kind: str, config: ChameleonConfig) -> list[Resource]:
        """The records of ``kind`` at this site and project that teardown has not found gone or deleted."""
        return [e for e in self.resources if self._matches(e, kind, config) and e.fate == LIVE]

    def projects(self) -> list[str]:
        """The projects of the records still live (not deleted or gone), the latest recorded last."""
        live = [e.project for e in self.resources if e.fate == LIVE and e.project]
        return list(dict.fromkeys(reversed(live)))[::-1]

    def record(self, kind: str, name: str, rid: str | None, origin: str, config: ChameleonConfig,
               keep: str | None = None) -> Resource:
        """Add or update the record; a resource once recorded as created stays created."""
        entry = self.find(kind, config, rid, name)
        if entry is None:
            entry = Resource(kind, name, rid, origin, config.site, config.project)
            self.resources.append(entry)
        else:
            entry.name, entry.id = name, rid or entry.id
            if entry.id:
                entry.pending = ""  # found again by name: the answer a cut create call never gave
            if entry.origin != CREATED:
                entry.origin = origin
        if keep is not None:
            entry.keep = keep
        self.save()
        return entry

    def begin(self, kind: str, name: str, config: ChameleonConfig, keep: str = "") -> Resource:
        """Record a resource as created *before* the call that creates it (no id yet, ``pending`` now): a
        stop while the call is in flight, or before its answer is recorded, leaves a record that teardown
        resolves by ``name`` (a lease's or a server's unique name; for a floating IP, ``pending_ip_name``).
        A pending record a cut run left for the same resource is taken up again, not doubled."""
        cut = [e for e in self.live(kind, config) if e.pending and e.id is None and e.name == name]
        entry = cut[0] if cut else None
        if entry is None:
            entry = Resource(kind, name, None, CREATED, config.site, config.project)
            self.resources.append(entry)
        entry.pending, entry.keep = times.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), keep
        self.save()
        return entry

    def settle(self, entry: Resource, name: str, rid: str | None) -> Resource:
        """The create call's answer: ``entry`` (from ``begin``) gets the resource's name and id."""
        entry.name, entry.id, entry.pending = name, rid, ""
        self.save()
        return entry

    def origin(self, kind: str, config: ChameleonConfig, rid: str | None, name: str = "") -> str:
        """``created`` when recorded so, else ``adopted`` (found, not made, by this lab)."""
        entry = self.find(kind, config, rid, name)
        return entry.origin if entry is not None else ADOPTED

    def reserved_earlier(self, kind: str, config: ChameleonConfig, rid: str | None) -> Path | None:
        """The state file of an earlier run that created this resource and kept it for a later one
        (a lease reserved ahead that had not started): this run takes it over as created, so that
        its teardown deletes it. Looked for beside this file and its folder's siblings."""
        if not rid:
            return None
        near = {*self.path.parent.glob(f"*/{STATE_NAME}"), *self.path.parent.parent.glob(f"*/{STATE_NAME}"),
                self.path.parent.parent / STATE_NAME, default_state_path()}
        for other in sorted(p for p in near if p.is_file() and p.resolve() != self.path.resolve()):
            try:
                earlier = State(other)
            except ProvisioningError:
                continue  # not ours to read: that file's own teardown says so
            entry = earlier.find(kind, config, rid)
            if entry is not None and entry.origin == CREATED and entry.keep:
                earlier.set_fate(entry, entry.fate, f"handed on to {self.path}")
                return other
        return None

    def set_fate(self, entry: Resource, fate: str, detail: str = "") -> None:
        entry.fate, entry.detail = fate, detail
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {
            "about": "What provisioning created (teardown deletes it) and adopted (kept unless "
                     "delete_adopted); fate: live, deleted (by teardown) or gone (found missing).",
            "resources": [asdict(e) for e in self.resources]}
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(json.dumps(data, indent=1) + "\n")
        os.replace(partial, self.path)


def load_resources(path: Path) -> list[dict[str, Any]]:
    """The records of a state file as plain dicts ([] when there is none); for run.json and reports."""
    if not Path(path).exists():
        return []
    return [asdict(e) for e in State(path).resources]
