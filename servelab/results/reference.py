"""The lab's committed GPU reference runs (``results/reference/<gpu>/``): a run's folder as the runner
wrote it on a GPU host, kept in the repository so every CPU report, notebook and handout can set what
a GPU measured beside its own numbers. ``results/reference/README.md`` says how each was made."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servelab.core.lab_steps import and_list, measuring, ranges
from servelab.core.paths import RESULTS_DIR

if TYPE_CHECKING:  # pandas stays out of the import: the site's small venv reads reference_run too
    import pandas as pd

REFERENCE_DIR = RESULTS_DIR / "reference"
REFERENCE_SETTING = "SERVELAB_REFERENCE"  # a reference run's folder, or "none"
_SAID: set[str] = set()  # wrong settings already said (once per process)


def reference_run(base: Path = REFERENCE_DIR) -> Path | None:
    """The reference run reports and notebooks set beside theirs: ``$SERVELAB_REFERENCE`` (a folder,
    or ``none``), else the newest folder under ``base`` with a run.json; None when there is none. A setting
    naming a folder without a run.json is said once on stderr, with what to set instead, and reads None."""
    setting = os.environ.get(REFERENCE_SETTING, "").strip()
    if setting.lower() == "none":
        return None
    if setting:
        if (Path(setting) / "run.json").is_file():
            return Path(setting)
        if setting not in _SAID:
            _SAID.add(setting)
            print(f"note: {REFERENCE_SETTING}={setting} holds no run.json, so no reference run is set beside "
                  f"this one: set it to a run's folder (results/<run>/ or results/reference/<gpu>/), "
                  f"or to none", file=sys.stderr)
        return None
    return newest(base)


def started(run_json: Path) -> str:
    """When the run began, as the runner writes it ("2026-11-26 13:00:00 UTC"); the file's time where
    it says none or cannot be read, so every run sorts."""
    when = None
    for name in (run_json.name, "node-run.json"):  # a Chameleon run: the node's own run.json says it
        try:
            facts = json.loads((run_json.parent / name).read_text())
        except (OSError, ValueError):
            continue
        when = facts.get("started") if isinstance(facts, dict) else None
        if when:
            break
    if when:
        return str(when)
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(run_json.stat().st_mtime))


def newest(base: Path) -> Path | None:
    """The run folder under ``base`` that began last (``started``), or None: the one order the reports,
    the notebooks and the site pick runs by."""
    runs = sorted(Path(base).glob("*/run.json"), key=started)
    return runs[-1].parent if runs else None


# the node a student reserves (provisioning.config.DEFAULT_NODE_TYPE, gpu_p100): what the expectations are for
STUDENT_NODE = "2×P100"
STUDENT_NODE_LONG = "a gpu_p100 node at CHI@TACC: two NVIDIA P100 GPUs"
# the notebooks that measure, on the node (the registry of the lab's steps): what a reference can cover
MEASURING = tuple(measuring())


def run_facts(run: Path) -> dict[str, Any]:
    """The run's run.json ({} where it cannot be read)."""
    try:
        facts = json.loads((Path(run) / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    return facts if isinstance(facts, dict) else {}


def notebooks_ran(run: Path) -> list[str]:
    """The numbers of the notebooks the run executed ("03", "09"), in its order."""
    return [str(n.get("name", ""))[:2] for n in run_facts(run).get("notebooks", []) if isinstance(n, dict)]


def coverage(run: Path) -> str:
    """Which of the lab's measuring notebooks the run ran: "notebooks 03 and 09 only, not 04, 05, 06, 07
    or 10", or "every measuring notebook (" the registry's range ")"."""
    ran = [n for n in notebooks_ran(run) if n in MEASURING]
    missing = [n for n in MEASURING if n not in ran]
    if not ran:
        return f"none of the measuring notebooks ({ranges(MEASURING)})"
    if not missing:
        return f"every measuring notebook ({ranges(MEASURING)})"
    return f"notebook{'s' * (len(ran) > 1)} {and_list(ran)} only, not {and_list(missing, 'or')}"


def describe(run: Path) -> str:
    """One line naming a reference run: its host (GPU and CPU), where it is kept, its date, preset and code,
    and the notebooks it ran."""
    from servelab.results.code import describe_code

    facts = run_facts(run)
    machine = facts.get("machine") or {}
    where = os.path.relpath(run, RESULTS_DIR.parent) if Path(run).is_relative_to(RESULTS_DIR.parent) else run
    cores = machine.get("cpu_count") or facts.get("cpu_count")
    cpu = f"{cores}-core CPU" if cores else "CPU"
    gpu = machine.get("gpu") or "machine without a GPU"
    return (f"the lab's reference run on one {gpu} host with a {cpu} "
            f"({where}; {str(facts.get('started', '?'))[:10]}, preset {facts.get('preset')}, "
            f"code {describe_code(facts.get('code'))}; it ran {coverage(run)})")


def device_kind(device: Any) -> str:
    """"GPU" or "CPU" for a row's ``device`` (``cuda``, ``cuda:0``, ``cpu``, ``KIND_GPU``…); "" when the
    row records none, else the value as it is."""
    text = "" if device is None or device != device else str(device).strip().lower()
    if not text:
        return ""
    if "cuda" in text or "gpu" in text:
        return "GPU"
    return "CPU" if "cpu" in text else str(device)


NAMED_BY = ("backend", "model", "engine", "batching", "policy", "step")  # what a row's engine is called


def computed_on(rows: pd.DataFrame, run: Path) -> str:
    """Where ``rows`` of the reference computed, from their own ``device``, one part per engine: "pt on its
    GPU (NVIDIA H100 80GB HBM3); onnx on its CPU (16 cores): a CPU figure, not a GPU one"; rows that record
    no device say so, never guessed."""
    machine = run_facts(run).get("machine") or {}
    gpu, cores = machine.get("gpu") or "GPU", machine.get("cpu_count")
    key = next((k for k in NAMED_BY if k in rows and rows[k].notna().any()), None)
    names = list(dict.fromkeys(rows[key].dropna().astype(str))) if key else [""]
    parts = []
    for name in names:
        picked = rows[rows[key].astype(str) == name] if key else rows
        kinds = list(dict.fromkeys(device_kind(d) for d in picked.get("device", [None] * len(picked))))
        cpu = f"its CPU ({cores} cores)" if cores else "its CPU"
        named = {"GPU": f"its GPU ({gpu})", "CPU": f"{cpu}: a CPU figure, not a GPU one"}
        shown = [named.get(k, k) for k in kinds if k]
        where = " and ".join(shown) if shown else "a device its rows do not record"
        parts.append(f"{name} on {where}" if name else f"on {where}")
    return "; ".join(parts)


def reference_rows(table: str, run: Path | None = None) -> pd.DataFrame:
    """The reference run's ``table`` as ``RunData`` names it ("fastapi", "triton", "llm": Triton's with
    the short column names); empty without a reference."""
    import pandas as pd

    from servelab.results.schema import RunData

    run = run if run is not None else reference_run()
    return getattr(RunData.load(run), table) if run is not None else pd.DataFrame()
