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


def describe(run: Path) -> str:
    """One line naming a reference run: its GPU, date, preset and target, and where it is kept."""
    facts: dict[str, Any] = json.loads((Path(run) / "run.json").read_text())
    machine = facts.get("machine", {})
    where = os.path.relpath(run, RESULTS_DIR.parent) if Path(run).is_relative_to(RESULTS_DIR.parent) else run
    notebooks = ", ".join(n["name"][:2] for n in facts.get("notebooks", []))
    return (f"the lab's reference run on {machine.get('gpu') or 'no GPU'} ({where}; "
            f"{str(facts.get('started', '?'))[:10]}, preset {facts.get('preset')}, "
            f"target {facts.get('target')}, notebooks {notebooks})")


def reference_rows(table: str, run: Path | None = None) -> pd.DataFrame:
    """The reference run's ``table`` as ``RunData`` names it ("fastapi", "triton", "llm": Triton's with
    the short column names); empty without a reference."""
    import pandas as pd

    from servelab.results.schema import RunData

    run = run if run is not None else reference_run()
    return getattr(RunData.load(run), table) if run is not None else pd.DataFrame()
