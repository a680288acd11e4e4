"""Where a run ran, as the site shows it on every page: CPU, GPU or none, date, target, preset.

Read from the run's ``run.json`` (the runner records the machine there); a ``--target chameleon`` run's
machine and start are the node's, in the ``node-run.json`` fetched from it (its own run.json describes
the controller's steps). A run written before the runner recorded them falls back to the facts stored
with its measurements and to its folder's name; what none holds is said to be unrecorded, never guessed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

    @property
    def on_gpu(self) -> bool:
        return self.gpu not in ("none", UNRECORDED, "")

    def line(self) -> str:
        """One line for a page's banner."""
        device = f"GPU {self.gpu}" if self.on_gpu else f"no GPU ({self.gpu})" if self.gpu == UNRECORDED \
            else "no GPU"
        return (f"run {self.run}: {self.date}, target {self.target}, preset {self.preset}, "
                f"CPU {self.cpu}, {device}")

    def facts(self) -> dict[str, str]:
        """The same facts as a table's rows."""
        passed = UNRECORDED if self.ok is None else "yes" if self.ok else "no"
        return {"run": self.run, "date": self.date, "target": self.target, "preset": self.preset,
                "CPU": self.cpu, "GPU": self.gpu, "every notebook passed": passed}


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
    for path in sorted(Path(run_dir).glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and "gpu" in row:
                return row
    return {}


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
    return Provenance(run=Path(run_dir).resolve().name, cpu=cpu,
                      gpu=str(machine.get("gpu") or rows.get("gpu") or UNRECORDED),
                      date=_date(run_dir, summary), target=str(summary.get("target") or UNRECORDED),
                      preset=str(summary.get("preset") or UNRECORDED),
                      ok=summary.get("ok") if isinstance(summary.get("ok"), bool) else None)
