"""The Jupytext .py files are the notebooks' source; the committed .ipynb must match and carry no outputs;
each "what this run shows" cell names a module with rules and words that pick at least one of them."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import jupytext
import nbformat
import pandas as pd
import pytest

from servelab.core.lab_steps import LAB_STEPS
from servelab.results.schema import RunData

NOTEBOOKS = Path(__file__).resolve().parents[3] / "notebooks"
SOURCES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def test_every_step_has_a_notebook() -> None:
    """The notebooks on disk are the registry's steps, one each, in order, each with its pair."""
    stems = [p.stem for p in SOURCES]
    assert stems == [s.name for s in LAB_STEPS], "register each notebook in servelab/core/lab_steps.py"
    for source in SOURCES:
        assert source.with_suffix(".ipynb").is_file(), f"{source.name} has no paired .ipynb"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_ipynb_in_sync_with_source(source: Path) -> None:
    expected = jupytext.read(source)
    committed = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    want = [(c.cell_type, c.source) for c in expected.cells]
    got = [(c.cell_type, c.source) for c in committed.cells]
    assert got == want, (f"{source.with_suffix('.ipynb').name} is out of sync with {source.name}: "
                         f"run .venv/bin/jupytext --sync notebooks/{source.name}")


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_committed_notebook_has_no_outputs(source: Path) -> None:
    nb = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not cell.outputs, f"cell {index} of {source.stem} carries outputs"
            assert cell.execution_count is None, f"cell {index} of {source.stem} has an execution count"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_parameters_cell_then_validation(source: Path) -> None:
    nb = jupytext.read(source)
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{source.stem}: exactly one cell tagged 'parameters'"
    cell = nb.cells[tagged[0]].source
    # None: $SERVELAB_TARGET (docker in the node's Jupyter container), else local; a headless run passes it
    assert "target = None" in cell and "$SERVELAB_TARGET" in cell and 'preset = "quick"' in cell
    following = nb.cells[tagged[0] + 1]
    assert following.cell_type == "code" and "params.resolve(" in following.source, \
        f"{source.stem}: the cell after the parameters validates them"
    # papermill reads every parameter with its help (issue 52: "Unable to parse line 9 'repo_url = None #
    # for code_source = "git": …'" on every ./lab run: a comment holding " = " is not one it parses)
    from papermill.translators import PythonTranslator

    assigned = [line.split("=", 1)[0].strip() for line in cell.splitlines() if line and line[0].isalpha()]
    parsed = [p.name for p in PythonTranslator.inspect(nb.cells[tagged[0]])]
    assert parsed == assigned, f"{source.stem}: papermill parses {parsed}, the cell assigns {assigned}"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_code_cells_stay_short(source: Path) -> None:
    nb = jupytext.read(source)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "parameters" not in cell.metadata.get("tags", []):
            statements = len(ast.parse(cell.source).body)
            assert statements <= 5, f"{source.stem} cell {index}: {statements} statements (move logic out)"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_what_this_run_shows_names_rules_and_effects_that_exist(source: Path) -> None:
    code = [ast.parse(c.source) for c in jupytext.read(source).cells if c.cell_type == "code"]
    imports = [node for tree in code for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module == "servelab.lab"]
    modules = {alias.asname or alias.name: f"servelab.lab.{alias.name}"
               for node in imports for alias in node.names}
    calls = [node for tree in code for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr == "what_this_run_shows"]
    for call in calls:
        name = ast.unparse(call.args[0])
        assert name in modules, f"{source.stem}: what_this_run_shows({name}, …) names no servelab.lab import"
        module = importlib.import_module(modules[name])
        assert hasattr(module, "rules"), f"{source.stem}: {modules[name]} has no rules() to show"
        empty = pd.DataFrame()
        effects = [c.effect for c in module.rules(RunData(empty, empty, empty))]
        for words in (ast.literal_eval(arg) for arg in call.args[1:]):
            assert any(words in effect for effect in effects), \
                f"{source.stem}: no expected effect of {modules[name]} contains {words!r}"


def test_every_show_code_cell_names_code_that_exists(capsys: pytest.CaptureFixture[str]) -> None:
    """A notebook's ``common.show_code(path, names...)`` fails its cell when a name moved (the LLM engine's
    split once stopped the headless run at 09, minutes in); read here, it fails in seconds."""
    from servelab.lab import common

    shown = 0
    for source in SOURCES:
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "common.show_code" \
                    and all(isinstance(a, ast.Constant) for a in node.args):
                try:
                    common.show_code(*(a.value for a in node.args))
                except (LookupError, OSError) as exc:
                    pytest.fail(f"{source.name}: {ast.unparse(node)}: {exc}")
                shown += 1
    capsys.readouterr()
    assert shown >= 10  # the notebooks show their real code in many cells
