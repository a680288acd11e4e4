"""Where a run ran, as the site shows it on every page: CPU, GPU or none, date, target, preset.

Read from the run's ``run.json`` (the runner records the machine there); a ``--target chameleon`` run's
machine and start are the node's, in the ``node-run.json`` fetched from it (its own run.json describes
the controller's steps). A run written before the runner recorded them falls back to the facts stored
with its measurements and to its folder's name; what none holds is said to be unrecorded, never guessed.
Where each measurement ran is its row's own ``device`` (``measured_on``, ``Provenance.where``): a GPU
machine's measurement on its CPU says CPU. ``Run`` is a run as the pages read it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import nbformat

from servelab.core.lab_steps import and_list, ranges
from servelab.results.code import describe_code
from servelab.results.reference import device_kind

UNRECORDED = "not recorded"
_RUN_ID = re.compile(r"^(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})")


class RunFolderError(ValueError):
    """The folder is not a lab run the site can be built from; the message says what to give instead."""


@dataclass(frozen=True)
class Provenance:
    """One run's facts: its folder's name and where, when and how it ran."""

    run: str
    cpu: str
    gpu: str
    date: str
    target: str
    preset: str
    ok: bool | None
    code: str = "not recorded"  # which commit ran, and whether with uncommitted changes (describe_code)
    notebooks: tuple[str, ...] = ()  # the notebooks it ran ("03", "09")
    stopped: tuple[str, ...] = ()  # those that stopped
    commit: str = ""  # the commit that ran, where known and without uncommitted changes; else ""

    @property
    def on_gpu(self) -> bool:
        return self.gpu not in ("none", UNRECORDED, "")

    def line(self) -> str:
        """One line for a page's banner."""
        device = f"GPU {self.gpu}" if self.on_gpu else f"no GPU ({self.gpu})" if self.gpu == UNRECORDED \
            else "no GPU"
        return (f"run {self.run}: {self.date}, target {self.target}, preset {self.preset}, "
                f"CPU {self.cpu}, {device}; code {self.code}")

    def where(self, devices: dict[str, str]) -> str:
        """Where measurements of this run ran, from their rows' own ``device`` (``measured_on``): a row
        of a GPU machine that ran on its CPU is CPU. Rows that record none ran on the CPU when the machine
        has no GPU, else their device is said to be unrecorded."""
        machine_cpu = f"CPU ({self.cpu})" if self.cpu != UNRECORDED else "CPU"
        kinds = {step: device_kind(d) if d else ("" if self.on_gpu else "CPU") for step, d in devices.items()}
        known = set(kinds.values())
        if not kinds or known == {""}:
            machine = f"GPU {self.gpu}" if self.on_gpu else "no GPU"
            return f"device not recorded in its rows (the machine: {machine}, {machine_cpu})"
        if known == {"GPU"}:
            return f"GPU {self.gpu}" if self.on_gpu else "GPU"
        if known == {"CPU"}:
            return machine_cpu + (f", not its GPU {self.gpu}" if self.on_gpu else "")
        named: dict[str, list[str]] = {}  # where → the steps that ran there, in order
        for step, kind in kinds.items():
            where = (kind + (f" ({devices[step]})" if devices[step] and kind not in ("CPU", "GPU") else "")
                     if kind else "a device their rows do not record")
            named.setdefault(where, []).append(step)
        parts = ", ".join(f"{and_list(steps)} on {where}" for where, steps in named.items())
        gpu = f"GPU {self.gpu}" if self.on_gpu else "GPU"
        return f"{gpu} and {machine_cpu}: {parts}"

    def ran(self) -> str:
        """The notebooks it ran and how they went: "03 and 09, both passed", or their ``spans`` and which
        stopped."""
        if not self.notebooks:
            return UNRECORDED
        gone = (f"{and_list(self.stopped)} stopped" if self.stopped else "all passed" if self.ok is not False
                else "the run stopped between notebooks")
        return f"{spans(self.notebooks)}: {gone}"

    def facts(self) -> dict[str, str]:
        """The same facts as a table's rows."""
        return {"run": self.run, "date": self.date, "target": self.target, "preset": self.preset,
                "CPU": self.cpu, "GPU": self.gpu, "code": self.code, "notebooks it ran": self.ran()}


def spans(numbers: tuple[str, ...]) -> str:
    """Notebook numbers, three or more in a row joined (``servelab.core.lab_steps.ranges``)."""
    return ranges(numbers)


def _stamp(text: Any) -> datetime | None:
    for fmt in ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S.%f%z"):
        try:
            return datetime.strptime(str(text), fmt)
        except ValueError:
            continue
    return None


def ran_between(executed: Any) -> tuple[datetime, datetime] | None:
    """When an executed notebook, or one of its cells, ran (papermill's start and end), or None when it
    does not say."""
    meta = executed.metadata.get("papermill", {}) if executed is not None else {}
    start, end = (datetime.fromisoformat(str(meta[k])) if meta.get(k) else None
                  for k in ("start_time", "end_time"))
    return (start, end) if start and end else None


def measured_on(run_dir: Path, window: tuple[datetime, datetime] | None = None,
                keep_unrecorded: bool = False) -> dict[str, str]:
    """Each measurement's ``step`` (else its ``experiment``) → the ``device`` its rows recorded, for the
    rows stored within ``window`` (a notebook's or a cell's run; None: every row), in the order first
    stored. A step whose rows record no device maps to "", and is left out when others record one (unless
    ``keep_unrecorded``: a whole run's summary)."""
    found: dict[str, list[str]] = {}
    for row in _rows(run_dir):
        stamp = _stamp(row.get("timestamp"))  # whole seconds: a row stored at 12.9 s says 12 s
        if window is not None and (stamp is None or not (window[0].replace(microsecond=0) <= stamp
                                                         <= window[1])):
            continue
        step = str(row.get("step") or row.get("experiment") or "measurement")
        device = str(row.get("device") or "")
        seen = found.setdefault(step, [])
        if device and device not in seen:
            seen.append(device)
    devices = {step: " and ".join(seen) for step, seen in found.items()}
    recorded = {step: device for step, device in devices.items() if device}
    return devices if keep_unrecorded else recorded or devices


def _rows(run_dir: Path) -> tuple[dict[str, Any], ...]:
    """Every measurement row the run stored (its ``*.jsonl``)."""
    found = []
    for path in sorted(Path(run_dir).glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                found.append(row)
    return tuple(found)


def run_json(run_dir: Path) -> dict[str, Any]:
    """The run's ``run.json``; a clear error when the folder is not a run."""
    path = Path(run_dir) / "run.json"
    if not path.is_file():
        raise RunFolderError(f"{run_dir} has no run.json: give a folder written by ./lab run "
                             "(results/<run>)")
    try:
        return dict(json.loads(path.read_text()))
    except ValueError as exc:
        raise RunFolderError(f"{path} is not valid JSON ({exc}): give another run's folder") from exc


def _row_facts(run_dir: Path) -> dict[str, Any]:
    """The host facts stored with the run's first measurement (``servelab.results.store``)."""
    return next((row for row in _rows(run_dir) if "gpu" in row), {})


def _node_summary(run_dir: Path) -> dict[str, Any]:
    """The node's own run.json of a chameleon run (``node-run.json``, fetched from the node), else {}."""
    path = Path(run_dir) / "node-run.json"
    try:
        found = json.loads(path.read_text()) if path.is_file() else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _date(run_dir: Path, summary: dict[str, Any]) -> str:
    if summary.get("started"):
        return str(summary["started"])
    match = _RUN_ID.match(Path(run_dir).name)
    if match:
        y, mo, d, h, mi, s = match.groups()
        return f"{y}-{mo}-{d} {h}:{mi}:{s} (from the run's name)"
    return UNRECORDED


def read(run_dir: Path) -> Provenance:
    """The provenance of the run in ``run_dir``."""
    summary = run_json(run_dir)
    node = _node_summary(run_dir)  # where a chameleon run measured: the node
    machine = summary.get("machine") or node.get("machine") or {}
    if not summary.get("started") and node.get("started"):
        summary = {**summary, "started": node["started"]}
    rows = _row_facts(run_dir)
    cores = machine.get("cpu_count") or summary.get("cpu_count")
    cpu = str(machine.get("cpu_model") or UNRECORDED)
    if cores:
        cpu += f", {cores} cores"
    outcomes = [n for n in summary.get("notebooks", []) if isinstance(n, dict) and n.get("name")]
    names = [str(n["name"]) for n in outcomes if str(n["name"])[:2].isdigit()]
    return Provenance(run=Path(run_dir).resolve().name, cpu=cpu,
                      gpu=str(machine.get("gpu") or rows.get("gpu") or UNRECORDED),
                      date=_date(run_dir, summary), target=str(summary.get("target") or UNRECORDED),
                      preset=str(summary.get("preset") or UNRECORDED),
                      ok=summary.get("ok") if isinstance(summary.get("ok"), bool) else None,
                      code=describe_code(summary.get("code") or node.get("code")),
                      notebooks=tuple(n[:2] for n in sorted(names)),
                      stopped=tuple(str(n["name"])[:2] for n in outcomes if n.get("ok") is False
                                    and str(n["name"])[:2].isdigit()),
                      commit=_clean_commit(summary.get("code") or node.get("code")))


def _clean_commit(code: Any) -> str:
    """run.json's commit when it is known and the checkout had no uncommitted changes, else ""."""
    if isinstance(code, dict) and code.get("commit") and code.get("dirty") is False:
        return str(code["commit"])
    return ""


@dataclass(frozen=True)
class Run:
    """A run as the pages read it: its folder, its provenance and its notebooks' outcomes (run.json)."""

    folder: Path
    provenance: Provenance
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    report: str = ""  # the site's link to the run's report, "" when it has none

    def executed(self, stem: str) -> Any | None:
        """The run's executed copy of notebook ``stem``, or None when the run has none."""
        path = self.folder / f"{stem}.ipynb"
        return nbformat.read(path, as_version=4) if path.is_file() else None

    def where(self, executed: Any, cell: Any = None) -> str:
        """Where the measurements were taken (their rows' ``device``) that ``cell`` of the executed notebook
        stored, else (a cell that draws what earlier ones stored) that the whole notebook stored."""
        window = ran_between(cell)
        devices = measured_on(self.folder, window) if window is not None else {}
        return self.provenance.where(devices or measured_on(self.folder, ran_between(executed)))
