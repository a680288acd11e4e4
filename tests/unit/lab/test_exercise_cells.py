"""Every Question has an answer cell and a model answer; every Predict prompt records a guess that a later
cell compares with what the run measured (issue 51's second "must hold"), read from the notebooks' sources."""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest

from servelab.core.lab_steps import lab_step, measuring
from servelab.lab.classwork import ANSWER_TAG, KEY_TAG

ROOT = Path(__file__).resolve().parents[3]
# the steps that measure (the registry's): each asks for predictions and ends with questions
EXPERIMENTS = [ROOT / "notebooks" / f"{lab_step(n).name}.py" for n in measuring()]
RULES = "\n".join(p.read_text() for p in (ROOT / "servelab" / "lab").glob("step*.py"))
RULES += RULES.replace("{backend}", "pt") + RULES.replace("{backend}", "onnx")  # the per-engine effects
RULES += RULES.replace("{name}", "queue depth")  # 10's per-policy effects
PREDICT = re.compile(r'exercise\.predict\((\w+), "([^"]+)", ')
COMPARE = re.compile(r'exercise\.compare\((\w+), "([^"]+)"\)')


def _cells(source: Path) -> list[tuple[str, list[str], str]]:
    return [(c.cell_type, c.metadata.get("tags", []), c.source) for c in jupytext.read(source).cells]


@pytest.mark.parametrize("source", EXPERIMENTS, ids=lambda p: p.stem)
def test_every_question_has_an_answer_cell_and_a_model_answer_from_the_run(source: Path) -> None:
    cells = _cells(source)
    [at] = [i for i, (kind, _, text) in enumerate(cells)
            if kind == "markdown" and text.startswith("## Questions")]
    numbers = [int(n) for n in re.findall(r"^(\d+)\. ", cells[at][2], re.M)]
    assert numbers == list(range(1, len(numbers) + 1)) and numbers
    after = cells[at + 1:]
    for n in numbers:
        answer = [text for kind, tags, text in after if ANSWER_TAG in tags and kind == "markdown"
                  and text.startswith(f"**Your answer to {n}.**")]
        assert len(answer) == 1, f"question {n}: no answer cell"
        assert "BEGIN SOLUTION" in answer[0] and "END SOLUTION" in answer[0], "a prompt replaces it"
        key = [text for kind, tags, text in after if KEY_TAG in tags and kind == "code"
               and f"exercise.model_answer({n}, " in text]
        assert len(key) == 1, f"question {n}: no model answer cell (tagged {KEY_TAG})"
        assert re.search(r"f\"[^\"]*\{[^}]+\}", key[0]), f"question {n}'s model answer computes no figure"
        assert not re.search(r"\d+(?:\.\d+)? ?(?:ms|infer/s|%)\b", re.sub(r"\{[^}]*\}", "", key[0].split(
            "docs/decisions")[0]).replace("52 images/s", "")), f"question {n}: a figure typed into the answer"


@pytest.mark.parametrize("source", EXPERIMENTS, ids=lambda p: p.stem)
def test_every_predict_prompt_records_a_guess_that_a_later_cell_compares(source: Path) -> None:
    cells = _cells(source)
    prompts = [i for i, (kind, _, text) in enumerate(cells) if kind == "markdown" and "**Predict.**" in text]
    assert prompts
    for i in prompts:
        kind, tags, text = cells[i + 1]
        assert kind == "code" and "prediction" in tags, f"the next cell records the guess: {text[:60]}"
        assert "BEGIN SOLUTION" in text and "END SOLUTION" in text, "the instructor's guess is a solution"
        claims = PREDICT.findall(text)
        assert claims, f"no exercise.predict in {text[:60]}"
        later = "\n".join(t for _, _, t in cells[i + 2:])
        for module, claim in claims:
            assert (module, claim) in COMPARE.findall(later), f"no later cell compares “{claim}”"
            assert claim in RULES, f"“{claim}” names none of the steps' expected effects"
    guesses = [t for _, tags, t in cells if "prediction" in tags]
    assert len(guesses) == len(prompts), "a prediction cell without its prompt"
