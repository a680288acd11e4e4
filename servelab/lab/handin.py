"""A student's hand-in: one zip with the executed notebooks, answers, checks and report.

``pack`` (notebook 08, on the hub after the node's work is copied back) gathers the executed notebooks
(the run's own and those saved under ``notebooks/``), the run's exercise records (predictions, scores,
checks: ``servelab.lab.exercise``), the answers read from the notebooks' answer cells, and the run's
report, with a manifest naming the student. ``summarise`` reads one back into a class table's row
(``python -m servelab.lab.classwork class-table``).
"""

from __future__ import annotations

import getpass
import json
import os
import time
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
ANSWERS = "answers.json"


def student_name() -> str:
    """The hub's user (Chameleon's Jupyter sets JUPYTERHUB_USER), else this machine's."""
    return os.environ.get("JUPYTERHUB_USER") or getpass.getuser()


def _text(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def answers_in(nb: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer cells of one notebook (its JSON; tagged ``answer``): their text, and whether it was
    written. Read as JSON, not with nbformat: the hub's kernel need not have it."""
    from servelab.lab.exercise import ANSWER_TAG, TEXT_STUB

    out = []
    for cell in (c for c in nb.get("cells", []) if ANSWER_TAG in c.get("metadata", {}).get("tags", [])):
        lines = _text(cell).splitlines()
        text = "\n".join(line for line in lines[1:] if "SOLUTION" not in line).strip()  # below its heading
        out.append({"question": lines[0].strip("*# ") if lines else "", "answer": text,
                    "answered": bool(text) and text != TEXT_STUB})
    return out


def executed(nb: dict[str, Any]) -> bool:
    """The notebook ran: at least one code cell has an execution count."""
    return any(c.get("cell_type") == "code" and c.get("execution_count") for c in nb.get("cells", []))


def _notebooks(folders: Iterable[Path]) -> dict[str, Path]:
    """name → path of the executed notebooks in ``folders`` (the first folder's copy wins)."""
    found: dict[str, Path] = {}
    for folder in folders:
        for path in sorted(Path(folder).rglob("[0-9][0-9]_*.ipynb")):
            if ".ipynb_checkpoints" not in path.parts:
                found.setdefault(path.name, path)
    return found


def pack(results: Path, notebooks: Iterable[Path] = (), out: Path | None = None,
         student: str | None = None) -> Path:
    """Write ``handin-<student>.zip`` (into ``results`` unless ``out``) and say what it holds."""
    from servelab.lab.exercise import EXERCISE

    results, student = Path(results), student or student_name()
    out = Path(out) if out else results / f"handin-{student}.zip"
    found = _notebooks([results, *notebooks])
    answers, ran = {}, []
    for name, path in found.items():
        nb = json.loads(path.read_text())
        answers[name] = answers_in(nb)
        ran += [name] if executed(nb) else []
    records = [p for p in (results / f"{EXERCISE}.jsonl", results / f"{EXERCISE}.csv") if p.is_file()]
    report = results / "report.html"
    manifest = {"student": student, "packed": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "notebooks": sorted(found), "executed": sorted(ran), "report": report.is_file()}
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(MANIFEST, json.dumps(manifest, indent=1))
        zf.writestr(ANSWERS, json.dumps(answers, indent=1))
        for name, path in found.items():
            zf.write(path, f"notebooks/{name}")
        for path in [*records, *([report] if report.is_file() else [])]:
            zf.write(path, path.name)
    written = sum(a["answered"] for notebook in answers.values() for a in notebook)
    print(f"hand-in: {out.name} for {student}: {len(ran)} executed notebooks, {written} answers, "
          f"{'the exercise records' if records else 'no exercise records'}, "
          f"{'the report' if report.is_file() else 'no report'}; hand in this one file")
    return out


def hand_in(fetched: Any | None = None) -> Path:
    """Notebook 08's hand-in: from the node's work copied to the hub (``provisioning.fetch_work``'s
    answer), else from this machine's results and saved notebooks (a run here, or a headless run's folder)."""
    from servelab.core.paths import REPO_ROOT
    from servelab.results.store import results_dir

    if fetched is not None:
        return pack(fetched.results, [fetched.notebooks])
    return pack(results_dir(), [REPO_ROOT / "notebooks"])


def summarise(path: Path) -> dict[str, Any]:
    """One hand-in's class-table row: per student, notebooks run, checks passed, predictions made,
    questions answered."""
    import pandas as pd

    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read(MANIFEST))
        answers = json.loads(zf.read(ANSWERS))
        names = set(zf.namelist())
        text = zf.read("exercise.jsonl").decode() if "exercise.jsonl" in names else ""
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    records = pd.DataFrame(rows, columns=list(dict.fromkeys(["kind", "notebook", "key", *(
        k for r in rows for k in r)])))
    checks = records[records["kind"] == "check"].drop_duplicates(["notebook", "key"], keep="last")
    predictions = records[records["kind"] == "prediction"].drop_duplicates(["notebook", "key"])
    scores = records[records["kind"] == "score"].drop_duplicates(["notebook", "key"], keep="last")
    held = int((scores.get("score", pd.Series(dtype=str)) == "holds").sum())
    questions = [a for notebook in answers.values() for a in notebook]
    return {"student": manifest["student"], "notebooks run": len(manifest["executed"]),
            "checks passed": f"{int(checks['passed'].astype(bool).sum()) if not checks.empty else 0} of "
                             f"{len(checks)}",
            "predictions made": len(predictions),
            "predictions that held": held,
            "questions answered": f"{sum(a['answered'] for a in questions)} of {len(questions)}",
            "hand-in": Path(path).name}
