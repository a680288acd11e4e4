"""The registry of the lab's steps (``servelab.core.lab_steps``) is the one list of notebooks: each entry
matches its notebook, every other list, range and test list derives from it (a step added to a scratch
copy shows up in all of them, with no other edit), and no literal notebook range stands in the code or in
what the notebooks print."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest

from servelab.core import lab_steps
from servelab.core.lab_steps import LAB_STEPS, LEASE, WHERE, ranges
from servelab.core.paths import REPO_ROOT
from servelab.results import schema

# a literal range of notebook numbers: "03–07", "09-11"
RANGE = re.compile(r"(?<![\w.:/-])(0\d|1\d)\s?[–-]\s?(0\d|1\d)(?![\w.:/-])")
CODE = ("servelab/", "provisioning/", "scripts/", "docker/", "notebooks/", "lab", "Makefile", ".ci/",
        ".github/")


def _files() -> list[str]:
    names = subprocess.run(["git", "-C", str(REPO_ROOT), "ls-files", "--cached", "--others",
                            "--exclude-standard"], capture_output=True, text=True, check=True).stdout.split()
    return [n for n in names if (REPO_ROOT / n).is_file()]


def test_each_entry_matches_its_notebook() -> None:
    tables = {getattr(schema, n) for n in dir(schema) if n.isupper() and isinstance(getattr(schema, n), str)}
    for step in LAB_STEPS:
        source = REPO_ROOT / "notebooks" / f"{step.name}.py"
        assert step.name[:2] == step.number and source.is_file(), step
        heading = next(line for line in source.read_text().splitlines() if line.startswith("# # "))
        assert heading.removeprefix("# # ").split(". ", 1)[-1] == step.title, (step.name, heading)
        assert step.where in WHERE and step.lease in LEASE, step
        assert (step.where == "node") == (step.lease in ("core", "optional")), step
        assert set(step.rows) <= set(step.tables) <= tables | {"fastapi", "flask", "triton", "llm"}, step
        assert bool(step.tables) == bool(step.measures) == bool(step.report), step
        for name in step.report:
            module = import_module(f"servelab.lab.{name}")
            assert callable(module.rules) and callable(module.sections), name
    assert [s.number for s in LAB_STEPS] == sorted(s.number for s in LAB_STEPS)
    assert [s.name for s in LAB_STEPS if s.last] == ["08_teardown"]


def test_ranges_read_as_the_lab_says_them() -> None:
    assert ranges(["03", "04", "05", "06", "07", "09", "10", "11"]) == "03–07 and 09–11"
    assert ranges(["09", "10"]) == "09 and 10" and ranges(["03", "09", "10", "11"], "or") == "03 or 09–11"
    assert lab_steps.on_the_node() == ranges(lab_steps.numbers("node"))
    assert lab_steps.run_order(["08_teardown", "09_llm_serving", "03_fastapi"])[-1] == "08_teardown"
    with pytest.raises(KeyError, match="no lab step '42'"):
        lab_steps.lab_step("42")


def test_no_literal_notebook_range_in_the_code_or_what_the_notebooks_print() -> None:
    """Where the lab names a span of its steps, it derives it from the registry; the registry itself, which
    defines the form, is the exception."""
    found = {}
    for name in _files():
        if not name.startswith(CODE) or name == "servelab/core/lab_steps.py" or name.endswith(
                (".ipynb", ".png", ".jpg", ".svg", ".onnx", ".json")):
            continue
        try:
            text = (REPO_ROOT / name).read_text()
        except UnicodeDecodeError:
            continue
        hits = [line.strip() for line in text.splitlines()
                if RANGE.search(line) and not re.search(r"\d{4}-\d{2}-\d{2}", line)]
        if hits:
            found[name] = hits
    assert found == {}, found


PROBE = r"""
import contextlib, io, json
from servelab.core import lab_steps, paths
from servelab.lab import common, run_report, runner, step00_introduction
from servelab.lab.lease_plan import Notebook
from servelab.report.terms import glossary
from servelab.results import reference
from servelab.site import links
from servelab.targets import compose
from tests.docker import test_lab_run
from tests.integration.lab import test_chameleon_jupyter

said = io.StringIO()
with contextlib.redirect_stdout(said):
    common.node_jupyter(None)
print(json.dumps({
    "on_the_node": paths.ON_THE_NODE, "core": paths.CORE_ON_THE_NODE, "measuring": reference.MEASURING,
    "node_notebooks": compose.NODE_NOTEBOOKS, "in_the_hub": links.IN_THE_HUB,
    "written_by": common.WRITTEN_BY, "report": [n.name for n in run_report.NOTEBOOKS],
    "runner": [p.stem for p in runner.run_order(runner.notebook_paths())],
    "table": repr(step00_introduction.lab_steps()), "glossary": " ".join(glossary(2)),
    "node_jupyter": said.getvalue(), "lease_plan": Notebook(NEW_NAME, 1, 0).where,
    "docker_tier": test_lab_run.NOTEBOOKS, "hub_test": test_chameleon_jupyter.NOTEBOOKS,
}))
"""


def _scratch(tmp_path: Path) -> Path:
    root = tmp_path / "lab"
    for name in _files():
        if name.startswith(("results/", "data/")) or name.endswith(".onnx"):
            continue
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, root / name)
    return root


def _probe(root: Path, new_name: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE.replace("NEW_NAME", repr(new_name))], cwd=root,
                          capture_output=True, text=True, timeout=300, check=False,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "HOME": str(root)})
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _pytest(root: Path, *tests: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                           *tests], cwd=root, capture_output=True, text=True, timeout=300, check=False,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "HOME": str(root)})


@pytest.mark.timeout(600)
def test_a_step_added_to_the_registry_reaches_every_list_range_and_test_list(tmp_path: Path) -> None:
    """A new node step (its notebook pair and module, then one registry entry) shows up in every derived
    list, range and test list, with no other edit; its notebook without the entry fails the tests."""
    root = _scratch(tmp_path)
    number = f"{int(LAB_STEPS[-1].number) + 1:02d}"
    name = f"{number}_response_cache"
    source = (root / "notebooks" / "05_instance_scaling.py").read_text()
    source = re.sub(r"^# # 5\. .*$", f"# # {int(number)}. Triton's response cache", source, count=1,
                    flags=re.M)
    (root / "notebooks" / f"{name}.py").write_text(source)
    subprocess.run([sys.executable, "-m", "jupytext", "--to", "ipynb", "--output",
                    str(root / "notebooks" / f"{name}.ipynb"), str(root / "notebooks" / f"{name}.py")],
                   check=True, capture_output=True, timeout=120)
    (root / "servelab" / "lab" / f"step{name}.py").write_text(
        '"""A step\'s module: its report sections and its expected effects."""\n\n\n'
        "def sections(data):\n    return []\n\n\ndef rules(data):\n    return []\n")
    unregistered = _pytest(root, "tests/unit/lab/test_sources.py::test_every_step_has_a_notebook")
    assert unregistered.returncode != 0, "an unregistered notebook went unnoticed"

    registry = root / "servelab" / "core" / "lab_steps.py"
    text = registry.read_text()
    entry = (f'    LabStep("{number}", "{name}", "Triton\'s response cache", "node", "response cache",\n'
             '            "optional", measures="perf_analyzer with and without the response cache",\n'
             '            tables=("triton",), rows={"triton": ("response_cache",)},\n'
             f'            report=("step{name}",)),\n')
    registry.write_text(text.replace("\n)\n\n\ndef lab_step(", f"\n{entry})\n\n\ndef lab_step(", 1))
    got = _probe(root, name)

    node = [*lab_steps.numbers("node"), number]
    assert got["on_the_node"] == ranges(node) and number in str(got["on_the_node"])
    assert got["core"] == lab_steps.core_on_the_node(), "an optional step leaves the core as it was"
    assert got["measuring"] == [*lab_steps.measuring(), number]
    assert ranges(node) in str(got["node_notebooks"]) and ranges(node) in str(got["node_jupyter"])
    assert got["in_the_hub"] == lab_steps.in_the_hub()
    assert str(got["written_by"]["triton"]).endswith(f", {number}")  # type: ignore[index]
    assert got["report"] == [*(s.name for s in LAB_STEPS if s.report), name]
    runner = list(got["runner"])  # type: ignore[call-overload]
    assert runner[-1] == "08_teardown" and runner[-2] == name
    assert f"{number} {name}: Triton's response cache" in str(got["table"])
    assert f"{ranges([*lab_steps.written_by('triton'), number])})" in str(got["glossary"])
    assert got["lease_plan"] == "node (optional)"
    assert got["docker_tier"] == node and got["hub_test"] == [s.name for s in LAB_STEPS if s.where == "hub"]
    registered = _pytest(root, "tests/unit/lab/test_sources.py::test_every_step_has_a_notebook",
                         f"tests/unit/lab/test_sources.py::test_ipynb_in_sync_with_source[{name}]")
    assert registered.returncode == 0, registered.stdout[-3000:]
