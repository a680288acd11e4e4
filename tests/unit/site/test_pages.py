"""A page joins a notebook's source with a run's outputs: unchanged cells get theirs, a changed cell says so,
an unrun notebook says so, papermill's parameters are kept, and a second run's figures sit beside.
The provenance comes from run.json, else from the measurements and the run's name, never guessed.
Built on small notebooks written here; the real run's site is tested in tests/lab/test_site.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import nbformat
import pytest

from servelab.site import build, pages, provenance

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
SOURCE = """# %% [markdown]
# # 3. A notebook
#
# Some prose.

# %% tags=["parameters"]
target = None

# %%
print("hello")

# %%
plot()
"""


def _executed(sources: list[str], outputs: list[list[dict]],
              injected: str | None = "target = 'local'") -> dict:
    cells = [nbformat.v4.new_markdown_cell("# 3. A notebook\n\nSome prose.")]
    for source, out in zip(sources, outputs, strict=True):
        cells.append(nbformat.v4.new_code_cell(source, outputs=[nbformat.from_dict(o) for o in out],
                                               execution_count=1))
        if source == "target = None" and injected:
            cells[-1].metadata["tags"] = ["parameters"]
            cells.append(nbformat.v4.new_code_cell(f"# Parameters\n{injected}", metadata={
                "tags": ["injected-parameters"]}))
    return nbformat.v4.new_notebook(cells=cells)


def _run(folder: Path, *, notebooks: dict[str, dict] | None = None, gpu: str = "none", ok: bool = True,
         target: str = "local") -> pages.Run:
    folder.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for stem, nb in (notebooks or {}).items():
        nbformat.write(nb, folder / f"{stem}.ipynb")
        outcomes.append({"name": stem, "seconds": 1.0, "ok": ok, "error": "" if ok else "cell 3 raised X"})
    (folder / "run.json").write_text(json.dumps({
        "preset": "quick", "target": target, "started": "2026-11-25 14:00:00 UTC", "ok": ok,
        "machine": {"cpu_model": "AMD EPYC", "cpu_count": 2, "gpu": gpu}, "notebooks": outcomes}))
    return build._run(folder)


STREAM = {"output_type": "stream", "name": "stdout", "text": "hello\n"}
FIGURE = {"output_type": "display_data", "data": {"image/png": PNG, "text/plain": "<Figure>"}, "metadata": {}}


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "nb" / "03_demo.py"
    path.parent.mkdir()
    path.write_text(SOURCE)
    return path


def _code(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


def test_unchanged_cells_get_the_runs_outputs_and_the_parameters_it_was_given(source: Path,
                                                                              tmp_path: Path) -> None:
    run = _run(tmp_path / "run", notebooks={"03_demo": _executed(
        ["target = None", 'print("hello")', "plot()"], [[], [STREAM], [FIGURE]])})
    page = pages.page(source, run, None, tmp_path / "figures")
    code = _code(page)
    assert [c.source for c in code] == ["target = None", "# Parameters\ntarget = 'local'", 'print("hello")',
                                        "plot()"]
    assert code[2].outputs[0]["text"] == "hello\n" and code[3].outputs[0]["data"]["image/png"] == PNG
    assert page.cells[0].source.startswith("# 3. A notebook")  # the prose is the source's
    assert not any("changed" in c.source for c in page.cells if c.cell_type == "markdown")


def test_a_cell_changed_since_the_run_has_no_output_and_says_so(source: Path, tmp_path: Path) -> None:
    run = _run(tmp_path / "run", notebooks={"03_demo": _executed(
        ["target = None", 'print("hello")', "plot()"], [[], [STREAM], [FIGURE]])})
    source.write_text(SOURCE.replace('print("hello")', 'print("bonjour")')
                      .replace("Some prose.", "New prose."))
    page = pages.page(source, run, None, tmp_path / "figures")
    changed = next(c for c in _code(page) if "bonjour" in c.source)
    assert changed.outputs == []
    following = page.cells[page.cells.index(changed) + 1]
    assert following.cell_type == "markdown" and "changed after run run" in following.source
    assert "New prose." in page.cells[0].source  # a change to the notebook is on the next page
    assert _code(page)[-1].outputs  # the cells after it still match
    assert page.metadata["servelab"]["changed_cells"] == 1


def test_a_notebook_the_run_did_not_reach_is_shown_without_outputs(source: Path, tmp_path: Path) -> None:
    run = _run(tmp_path / "run")
    page = pages.page(source, run, None, tmp_path / "figures")
    assert "did not run this notebook" in page.cells[0].source
    assert all(c.outputs == [] for c in _code(page))
    stopped = _run(tmp_path / "stopped", ok=False, notebooks={"03_demo": _executed(
        ["target = None", 'print("hello")', "plot()"], [[], [STREAM], []])})
    assert "stopped" in pages.page(source, stopped, None, tmp_path / "f2").cells[0].source


def test_a_second_runs_figures_sit_beside_this_runs(source: Path, tmp_path: Path) -> None:
    nb = _executed(["target = None", 'print("hello")', "plot()"], [[], [STREAM], [FIGURE]])
    run = _run(tmp_path / "cpu", notebooks={"03_demo": nb})
    gpu = _run(tmp_path / "gpu", notebooks={"03_demo": nb}, gpu="Tesla P100-PCIE-16GB", target="docker")
    page = pages.page(source, run, gpu, tmp_path / "figures")
    plot = next(c for c in _code(page) if c.source == "plot()")
    assert plot.outputs == []  # its figure moved into the side-by-side block
    block = page.cells[page.cells.index(plot) + 1].source
    assert block.count(":::{figure}") == 2 and "CPU only: run cpu" in block
    assert "GPU Tesla P100-PCIE-16GB: run gpu, target docker" in block
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == [
        "03_demo-cell2-run0-0.png", "03_demo-cell2-run1-0.png"]


def test_provenance_from_run_json_else_from_the_measurements_and_the_name(tmp_path: Path) -> None:
    run = _run(tmp_path / "20261125-140000-quick", gpu="Tesla P100-PCIE-16GB", target="docker")
    line = run.provenance.line()
    assert line == ("run 20261125-140000-quick: 2026-11-25 14:00:00 UTC, target docker, preset quick, "
                    "CPU AMD EPYC, 2 cores, GPU Tesla P100-PCIE-16GB")
    old = tmp_path / "20261120-093000-quick"
    old.mkdir()
    (old / "run.json").write_text(json.dumps({"preset": "quick", "target": "local", "cpu_count": 2}))
    (old / "fastapi.jsonl").write_text(json.dumps({"host": "vm", "gpu": "none"}) + "\n")
    facts = provenance.read(old)
    assert (facts.cpu, facts.gpu, facts.date) == ("not recorded, 2 cores", "none",
                                                  "2026-11-20 09:30:00 (from the run's name)")
    assert not facts.on_gpu and facts.line().endswith("no GPU")


def test_a_chameleon_runs_provenance_is_the_nodes(tmp_path: Path) -> None:
    """The controller's run.json (target chameleon) records no machine: the node's, fetched as
    node-run.json, says where the measurements were taken."""
    run = tmp_path / "20261125-150000-quick"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"preset": "quick", "target": "chameleon", "ok": True,
                                              "steps": [], "notebooks": []}))
    (run / "node-run.json").write_text(json.dumps({
        "preset": "quick", "target": "docker", "started": "2026-11-25 15:20:00 UTC",
        "machine": {"cpu_model": "Intel Xeon E5-2670 v3", "cpu_count": 48, "gpu": "Tesla P100-PCIE-16GB, "
                    "Tesla P100-PCIE-16GB"}}))
    facts = provenance.read(run)
    assert (facts.cpu, facts.date, facts.target) == ("Intel Xeon E5-2670 v3, 48 cores",
                                                     "2026-11-25 15:20:00 UTC", "chameleon")
    assert facts.on_gpu and "GPU Tesla P100-PCIE-16GB" in facts.line()


def test_a_folder_that_is_not_a_run_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(provenance.RunFolderError, match=r"has no run\.json: give a folder written by"):
        provenance.read(tmp_path)
    (tmp_path / "run.json").write_text("{")
    with pytest.raises(provenance.RunFolderError, match="is not valid JSON"):
        provenance.read(tmp_path)
    with pytest.raises(provenance.RunFolderError, match="no run in"):
        build.newest_run(tmp_path / "empty")
