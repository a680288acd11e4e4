"""The student's side of a notebook: predictions recorded and compared, checks, model answers.

Every record lands in the run's data (``exercise.csv``/``.jsonl`` under ``results/``, as every
measurement does), so a hand-in carries it (``servelab.lab.handin``). A prediction is a yes or no on
one of the step's expected effects (the claim names it as ``what_this_run_shows`` does); ``compare``
sets it beside what this run measured. A check that fails raises ``CheckFailed``: one line in the
notebook saying what to do, never a traceback (``_render_traceback_``). The notebooks' solutions
(between ``BEGIN SOLUTION`` and ``END SOLUTION``) and their model answers (cells tagged
``answer-key``) are the instructor's; ``servelab.lab.classwork`` takes them out of the student release.
Why: docs/decisions/2026-12-01-exercise-layer.md
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pandas as pd

from servelab.core.notices import SaidPlainly
from servelab.results.store import append_rows, read_rows, results_dir

EXERCISE = "exercise"  # the experiment name of the records (exercise.csv, exercise.jsonl)
KEY_TAG = "answer-key"  # a model answer: the instructor's only
ANSWER_TAG = "answer"  # the student's answer cell (a prompt in the release)
CODE_STUB = "# YOUR CODE HERE"  # a comment in Python, in config.pbtxt and in a shell command alike
TEXT_STUB = "YOUR ANSWER HERE"
GUESSES = ("yes", "no")


class StudentError(SaidPlainly, Exception):
    """Something the student's own cell must change: shown as its lines, without a traceback."""


class CheckFailed(StudentError):
    """A check of the student's work that did not pass; the message says what to do."""


def notebook_of(step: ModuleType | str) -> str:
    """The notebook's number ("04") from its step module (``servelab.lab.step04_triton_python``)."""
    name = step if isinstance(step, str) else step.__name__
    tail = name.rsplit(".", 1)[-1]
    return tail[4:6] if tail.startswith("step") else tail[:2]


def _record(kind: str, step: ModuleType | str, key: str, **fields: Any) -> None:
    append_rows(EXERCISE, [{"kind": kind, "notebook": notebook_of(step), "key": key, **fields}])


def records(kind: str | None = None, notebook: str | None = None) -> pd.DataFrame:
    """This run's exercise records (every kind, or one), oldest first."""
    rows = pd.DataFrame(read_rows(EXERCISE))
    if rows.empty:
        return rows
    if kind is not None:
        rows = rows[rows["kind"] == kind]
    if notebook is not None:
        rows = rows[rows["notebook"].astype(str) == notebook]
    return rows.reset_index(drop=True)


def predict(step: ModuleType, claim: str, guess: str | None, why: str = "") -> None:
    """Record a yes/no prediction on ``claim`` (words of one of ``step``'s expected effects)."""
    if guess is None or str(guess).strip() == "":
        print(f"no prediction recorded for “{claim}”: set guess to \"yes\" or \"no\" and run this cell again")
        return
    said = str(guess).strip().lower()
    if said not in GUESSES:
        raise StudentError(f"guess must be \"yes\" or \"no\", not {guess!r}: change it and run the cell "
                           "again")
    _record("prediction", step, claim, guess=said, why=why)
    print(f"recorded: you predict {said.upper()} to “{claim}”" + (f" ({why})" if why else ""))


def _prediction(step: ModuleType, claim: str) -> dict[str, Any] | None:
    rows = records("prediction", notebook_of(step))
    rows = rows[rows["key"] == claim] if not rows.empty else rows
    return None if rows.empty else dict(rows.iloc[-1])


def _verdict(checks: list[Any], claim: str) -> Any:
    """The verdict on ``claim``: the first check whose effect says it, else one of the preconditions the
    checks measured (a ``Need``: met is observed, not met is not observed), else None."""
    from types import SimpleNamespace

    found = next((c for c in checks if claim in c.effect), None)
    if found is not None:
        return found
    need = next((n for c in checks for n in c.needs if claim in n.what), None)
    if need is None:
        return None
    status = {True: "observed", False: "not observed"}.get(need.met, "not measured")
    return SimpleNamespace(effect=need.what, status=status,
                           evidence=need.reached or "the run has no numbers for it")


def compare(step: ModuleType, claim: str) -> None:
    """"you predicted X; this run measured Y": the latest prediction on ``claim`` beside the step's
    verdict on it, scored (holds, does not hold, or the run cannot tell) and recorded."""
    from servelab.results.schema import RunData

    made = _prediction(step, claim)
    measured = _verdict(step.rules(RunData.load(results_dir())), claim)
    if measured is None:
        seen = "this run has no verdict on it yet: run the measuring cells above first"
        score = "no verdict"
    elif measured.status in ("observed", "not observed"):
        seen = f"{measured.status} — {measured.evidence}"
        score = "n/a" if made is None else (
            "holds" if (made["guess"] == "yes") == (measured.status == "observed") else "does not hold")
    else:
        seen = f"{measured.status}: {measured.evidence}"
        score = "the run cannot tell"
    guess = f"you predicted {made['guess'].upper()}" if made else "you predicted nothing (no guess recorded)"
    print(f"{guess} to “{claim}”; this run measured: {seen}"
          + (f" → your prediction {score}" if score in ("holds", "does not hold") else
             f" → {score}" if made else ""))
    _record("score", step, claim, guess=made["guess"] if made else "", status=measured.status if measured
            else "no verdict", score=score)


def check(step: ModuleType | str, name: str, passed: bool, fix: str, passed_line: str = "") -> None:
    """Record one check of the student's work; a failure raises ``CheckFailed`` with ``fix``."""
    _record("check", step, name, passed=bool(passed), said=passed_line if passed else fix)
    if not passed:
        raise CheckFailed(f"check “{name}”: {fix}")
    print(f"✓ check “{name}”: {passed_line or 'passed'}")


def check_predictions(step: ModuleType, claims: list[str]) -> None:
    """Every prediction of the notebook recorded (a check per notebook)."""
    made = {c for c in claims if _prediction(step, c) is not None}
    missing = [c for c in claims if c not in made]
    check(step, "predictions recorded", not missing,
          f"{len(missing)} of {len(claims)} predictions have no guess: set guess to \"yes\" or \"no\" in the "
          f"cells that ask for “{missing[0] if missing else ''}”… and run them again",
          f"{len(claims)} of {len(claims)} predictions recorded")


def evidence(step: ModuleType, claim: str) -> str:
    """The figures of ``step``'s verdict on ``claim`` in this run (what a model answer cites), or why there
    are none."""
    from servelab.results.schema import RunData

    verdict = _verdict(step.rules(RunData.load(results_dir())), claim)
    return f"{verdict.status}: {verdict.evidence}" if verdict else f"no verdict on “{claim}” in this run"


def model_answer(number: int, text: str) -> None:
    """The instructor's model answer to question ``number``, its figures computed from this run."""
    import re

    text = re.sub(r"\b(?:nan|None)\b", "(not measured in this run)", text)  # a figure the run lacks
    print(f"Model answer to question {number}: {text}")
