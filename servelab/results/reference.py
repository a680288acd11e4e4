"""The lab's committed GPU reference runs (``results/reference/<gpu>/``): a run's folder as the runner
wrote it on a GPU host, kept in the repository so every CPU report, notebook and handout can set what
a GPU measured beside its own numbers. ``results/reference/README.md`` says how each was made."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servelab.core.paths import RESULTS_DIR

if TYPE_CHECKING:  # pandas stays out of the import: the site's small venv reads reference_run too
    import pandas as pd

REFERENCE_DIR = RESULTS_DIR / "reference"
REFERENCE_SETTING = "SERVELAB_REFERENCE"  # a reference run's folder, or "none"


def reference_run(base: Path = REFERENCE_DIR) -> Path | None:
    """The reference run reports and notebooks set beside theirs: ``$SERVELAB_REFERENCE`` (a folder,
    or ``none``), else the newest folder under ``base`` with a run.json; None when there is none."""
    setting = os.environ.get(REFERENCE_SETTING, "").strip()
    if setting.lower() == "none":
        return None
    if setting:
        return Path(setting) if (Path(setting) / "run.json").is_file() else None
    runs = sorted(base.glob("*/run.json"), key=lambda p: str(json.loads(p.read_text()).get("started", "")))
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
