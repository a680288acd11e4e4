"""Measurements as data: every experiment appends rows under ``results/``.

One CSV (for pandas and the report) and one JSONL (keeps nested fields such as
configs and utilisation samples) per experiment; each row carries the time and
the host facts, so rows from different runs and machines can sit together.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import time
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from servelab.core.cpu import cpu_cores
from servelab.core.paths import RESULTS_DIR

# The folder results are written to. The headless runner sets it to the run's folder for the notebooks'
# kernels (their rows land in the run); given to ``./lab run``, the run's folder is made inside it.
RESULTS_VARIABLE = "SERVELAB_RESULTS"


def results_dir() -> Path:
    """Where this process writes and reads rows: ``$SERVELAB_RESULTS``, else the checkout's results/."""
    return Path(os.environ.get(RESULTS_VARIABLE) or RESULTS_DIR)


def run_folder() -> Path | None:
    """The headless run this process belongs to (``$SERVELAB_RESULTS``), or None in a student's session."""
    value = os.environ.get(RESULTS_VARIABLE)
    return Path(value) if value else None


@cache
def host_facts() -> dict[str, Any]:
    """What a reader needs to interpret a number: machine, cores, accelerator."""
    facts: dict[str, Any] = {
        "host": platform.node(),
        "cpu_count": cpu_cores(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "gpu": "none",
    }
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
        facts["gpu"] = ", ".join(n.decode() if isinstance(n, bytes) else n for n in names) or "none"
    except Exception:  # no NVIDIA driver: a CPU host
        pass
    return facts


def _flat(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list | tuple) else value


def append_rows(experiment: str, rows: Iterable[Mapping[str, Any]],
                directory: Path | None = None) -> Path:
    """Append ``rows`` to ``<results>/<experiment>.csv`` (+ .jsonl); returns the CSV path."""
    directory = Path(directory or results_dir())
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    full = [{"experiment": experiment, "timestamp": stamp, **host_facts(), **dict(row)} for row in rows]
    if not full:
        return directory / f"{experiment}.csv"
    with (directory / f"{experiment}.jsonl").open("a") as handle:
        for row in full:
            handle.write(json.dumps(row, default=str) + "\n")
    csv_path = directory / f"{experiment}.csv"
    fields = list(dict.fromkeys(k for row in full for k in row))
    if csv_path.exists():
        with csv_path.open(newline="") as handle:
            existing = next(csv.reader(handle), [])
        fields = existing + [f for f in fields if f not in existing]
        if fields != existing:  # new columns: rewrite with the wider header
            with csv_path.open(newline="") as handle:
                old = list(csv.DictReader(handle))
            with csv_path.open("w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=fields)
                writer.writeheader()
                writer.writerows(old)
    new_file = not csv_path.exists()
    with csv_path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        if new_file:
            writer.writeheader()
        writer.writerows({k: _flat(v) for k, v in row.items()} for row in full)
    return csv_path


def read_rows(experiment: str, directory: Path | None = None) -> list[dict[str, Any]]:
    """All rows of an experiment, nested fields intact (from the JSONL)."""
    directory = Path(directory or results_dir())
    path = directory / f"{experiment}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
