"""The instructor's side of the exercises: the student release, the answer key, the class table.

``python -m servelab.lab.classwork release OUT`` copies the lab's files (``provisioning/lab-files.txt``,
as 02 uploads them) into OUT with every notebook replaced by its student version: nbgrader's
``ClearSolutions`` turns each region between ``BEGIN SOLUTION`` and ``END SOLUTION`` into a prompt
(``# YOUR CODE HERE`` in code, ``YOUR ANSWER HERE`` in an answer cell), nbconvert's
``TagRemovePreprocessor`` drops the model answers (cells tagged ``answer-key``), and no output is
kept. ``key RUN OUT.html`` renders the model answers of an executed instructor run as one page, for
the instructor only. ``class-table HANDINS`` reads a folder of hand-ins (``servelab.lab.handin``) into
one row per student. Why nbgrader: docs/decisions/2026-12-01-exercise-layer.md
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from servelab.core.paths import REPO_ROOT as ROOT
from servelab.lab.exercise import ANSWER_TAG, CODE_STUB, KEY_TAG, TEXT_STUB  # noqa: F401  (the tests' too)

RELEASE_NOTE = "STUDENT_RELEASE.md"


def student_version(nb: Any) -> Any:
    """One notebook's student version (a copy): solutions turned into prompts, model answers and
    outputs removed."""
    import copy

    from nbconvert.preprocessors import ClearOutputPreprocessor, TagRemovePreprocessor
    from nbgrader.preprocessors import ClearSolutions

    nb = copy.deepcopy(nb)
    resources: dict[str, Any] = {}
    nb, resources = TagRemovePreprocessor(remove_cell_tags={KEY_TAG}, enabled=True).preprocess(nb, resources)
    clear = ClearSolutions(enforce_metadata=False, code_stub={"python": CODE_STUB}, text_stub=TEXT_STUB,
                           begin_solution_delimeter="BEGIN SOLUTION", end_solution_delimeter="END SOLUTION")
    nb, resources = clear.preprocess(nb, resources)
    nb, resources = ClearOutputPreprocessor().preprocess(nb, resources)
    left = [i for i, c in enumerate(nb.cells)
            if "SOLUTION" in c.source or KEY_TAG in c.metadata.get("tags", [])]
    if left:
        raise RuntimeError(f"cells {left} still hold a solution after clearing: close each BEGIN SOLUTION")
    return nb


# what only the instructor's repository needs: its tests and CI hold the solutions' outcomes (a CI run of
# the release would stop at its first check, by design); 12's ensemble config is its answer, which no
# step of the lab deploys (the student's text is what 12 loads)
INSTRUCTOR_ONLY = ("tests/", ".github/", ".ci/", "models_staging/food_classifier_ensemble/config.pbtxt")


# the README's paragraph on which version it is, as the release says it instead
INSTRUCTOR_LINE = ("This repository is the **instructor's version** of the lab: it holds everything, the "
                   "answer key included.\nStudents get a release built from it (the [instructor's guide]"
                   "(docs/guides/instructor.md) says how).")
STUDENT_LINE = ("This is the **student release** of the lab, built from the instructor's version: the "
                "solutions are\nyours to write, and it holds no answer key.")


def lab_files() -> list[str]:
    """The files a release carries: the lab's own, as 02 uploads them (``git ls-files`` in a clone,
    else ``provisioning/lab-files.txt``), without the built artefacts and ``INSTRUCTOR_ONLY``."""
    from provisioning.node import _git_files, manifest_files

    listed = _git_files(ROOT) or manifest_files(ROOT) or []
    return [str(name) for name in listed if (ROOT / name).is_file()
            and not str(name).startswith(INSTRUCTOR_ONLY)]


def make_release(out: Path) -> list[Path]:
    """Write the student release into ``out`` (new or empty); returns its notebooks."""
    import jupytext

    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"error: {out} is not empty: name a new folder for the release")
    for name in lab_files():
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    written = []
    for source in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")):
        nb = student_version(jupytext.read(source))
        jupytext.write(nb, out / "notebooks" / source.name, fmt="py:percent")
        jupytext.write(nb, out / "notebooks" / f"{source.stem}.ipynb")
        written.append(out / "notebooks" / f"{source.stem}.ipynb")
    readme = out / "README.md"
    if readme.is_file():
        banner = ("> **This is the student release** of the lab (`STUDENT_RELEASE.md`): the solutions are "
                  "yours to write, and it holds no answer key.\n\n")
        text = readme.read_text().replace(INSTRUCTOR_LINE, STUDENT_LINE)
        readme.write_text(banner + text)
    (out / RELEASE_NOTE).write_text(
        "# The student release of the serve-system lab\n\nMade by `python -m servelab.lab.classwork release` "
        "from the instructor's repository: every notebook's solutions are prompts here (`# YOUR CODE HERE`, "
        "`YOUR ANSWER HERE`) and it holds no model answer. Open `notebooks/` and work through them; "
        "notebook 08 packs your hand-in.\n")
    files = sorted({*lab_files(), RELEASE_NOTE})  # the release's own list, for a copy without git
    (out / "provisioning" / "lab-files.txt").write_text("".join(f"{name}\n" for name in files))
    return written


# ---------------------------------------------------------------- the answer key
def key_notebook(run_dir: Path) -> Any:
    """The model answers of an executed run, under each notebook's questions, as one notebook."""
    import nbformat

    out = nbformat.v4.new_notebook()
    out.cells.append(nbformat.v4.new_markdown_cell(
        f"# Answer key (instructor only)\nModel answers computed by the run `{Path(run_dir).name}`: every "
        "figure is this run's. Not part of the student release or its handout."))
    for path in sorted(Path(run_dir).glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        keys = [c for c in nb.cells if KEY_TAG in c.metadata.get("tags", [])]
        if not keys:
            continue
        questions = next((c.source for c in nb.cells if c.cell_type == "markdown"
                          and c.source.startswith("## Questions")), "")
        out.cells.append(nbformat.v4.new_markdown_cell(f"## {path.stem}\n{questions.replace('## ', '### ')}"))
        out.cells.extend(keys)
    return out


def write_key(run_dir: Path, html: Path) -> Path:
    """The answer key of ``run_dir`` as one HTML page (nbconvert), code hidden, outputs kept."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(key_notebook(run_dir))
    Path(html).parent.mkdir(parents=True, exist_ok=True)
    Path(html).write_text(body)
    return Path(html)


# ---------------------------------------------------------------- the class table
def class_table(folder: Path) -> pd.DataFrame:
    """One row per hand-in in ``folder``: notebooks run, checks passed, predictions made, questions
    answered (each of how many)."""
    from servelab.lab.handin import summarise

    rows = [summarise(path) for path in sorted(Path(folder).glob("*.zip"))]
    if not rows:
        raise SystemExit(f"error: no hand-in (*.zip) in {folder}: copy the students' files there first")
    return pd.DataFrame(rows).sort_values("student", kind="stable").reset_index(drop=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servelab.lab.classwork",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rel = sub.add_parser("release", help="write the student release (solutions as prompts, no model answer)")
    rel.add_argument("out", type=Path)
    key = sub.add_parser("key", help="the answer key of an executed instructor run, as one HTML page")
    key.add_argument("run_dir", type=Path)
    key.add_argument("out", type=Path, nargs="?", help="default: RUN_DIR/answer-key.html")
    table = sub.add_parser("class-table", help="one row per student from a folder of hand-ins")
    table.add_argument("folder", type=Path)
    table.add_argument("--csv", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    if args.command == "release":
        written = make_release(args.out)
        print(f"student release: {args.out} ({len(written)} notebooks, solutions as prompts, "
              "no model answer)")
    elif args.command == "key":
        print(f"answer key: {write_key(args.run_dir, args.out or args.run_dir / 'answer-key.html')}")
    else:
        frame = class_table(args.folder)
        print(frame.to_string(index=False))
        if args.csv:
            frame.to_csv(args.csv, index=False)
            print(f"written: {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
