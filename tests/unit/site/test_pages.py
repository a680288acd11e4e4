"""A page joins a notebook's source with a run's outputs: unchanged cells get theirs, a changed cell says so,
an unrun notebook says so, papermill's parameters are kept, and a second run's figures sit beside.
The provenance comes from run.json, else from the measurements and the run's name, never guessed.
Built on small notebooks written here; the real run's site is tested in tests/lab/test_site.py."""

from __future__ import annotations

import base64
import getpass
import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from servelab.core.paths import REPO_ROOT
from servelab.site import build, pages, provenance
from servelab.site.links import Links, web_address

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
         target: str = "local", code: dict | None = None) -> provenance.Run:
    folder.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for stem, nb in (notebooks or {}).items():
        nbformat.write(nb, folder / f"{stem}.ipynb")
        outcomes.append({"name": stem, "seconds": 1.0, "ok": ok, "error": "" if ok else "cell 3 raised X"})
    (folder / "run.json").write_text(json.dumps({
        "preset": "quick", "target": target, "started": "2026-11-25 14:00:00 UTC", "ok": ok,
        "machine": {"cpu_model": "AMD EPYC", "cpu_count": 2, "gpu": gpu}, "notebooks": outcomes,
        **({"code": code} if code is not None else {})}))
    return build._run(folder)


STREAM = {"output_type": "stream", "name": "stdout", "text": "hello\n"}
CODE = {"commit": "e83ba46" + "0" * 33, "dirty": False, "changed": [], "changed_count": 0}
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
    page = pages.page(source, run, None, tmp_path / "figures")[0]
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
    page = pages.page(source, run, None, tmp_path / "figures")[0]
    changed = next(c for c in _code(page) if "bonjour" in c.source)
    assert changed.outputs == []
    following = page.cells[page.cells.index(changed) + 1]
    assert following.cell_type == "markdown" and "changed after run run" in following.source
    assert "New prose." in page.cells[0].source  # a change to the notebook is on the next page
    assert _code(page)[-1].outputs  # the cells after it still match
    assert page.metadata["servelab"]["changed_cells"] == 1


def test_a_notebook_the_run_did_not_reach_is_shown_without_outputs(source: Path, tmp_path: Path) -> None:
    run = _run(tmp_path / "run")
    page = pages.page(source, run, None, tmp_path / "figures")[0]
    assert "did not run this notebook" in page.cells[0].source
    assert "Download this notebook (.ipynb, without outputs" in page.cells[2].source  # under the title
    assert all(c.outputs == [] for c in _code(page))
    stopped = _run(tmp_path / "stopped", ok=False, notebooks={"03_demo": _executed(
        ["target = None", 'print("hello")', "plot()"], [[], [STREAM], []])})
    assert "stopped" in pages.page(source, stopped, None, tmp_path / "f2")[0].cells[0].source


TABLE = {"output_type": "execute_result", "execution_count": 1, "metadata": {},
         "data": {"text/html": "<table><tr><th>measurement</th></tr><tr><td>onnx 5.8 ms</td></tr></table>",
                  "text/plain": "onnx 5.8 ms"}}
READING = {"output_type": "stream", "name": "stdout",
           "text": "onnx: median 6 ms\nplot saved: /somewhere/else/runA/plots/x.png\n"}
EMBEDDED = {"output_type": "display_data", "metadata": {}, "data": {
    "text/html": f'<figure><img src="data:image/png;base64,{PNG}" alt="fastapi_onnx: up to 633 req/s">'
                 "<figcaption>fastapi_onnx: up to 633 req/s</figcaption></figure>", "text/plain": "monitor"}}
COMPARED = SOURCE + "\n# %%\nmeasure()\n\n# %%\nmonitor()\n"


def _timed(nb, start: str, cells: dict[int, tuple[str, str]]) -> dict:
    """``nb`` as papermill leaves it: when it ran, and when each of the code cells named by index ran."""
    nb.metadata["papermill"] = {"start_time": f"{start}+00:00", "end_time": "2026-11-26T09:30:00+00:00"}
    code = [c for c in nb.cells if c.cell_type == "code" and "injected-parameters" not in c.metadata.get(
        "tags", [])]
    for index, (begin, end) in cells.items():
        code[index].metadata["papermill"] = {"start_time": f"{begin}+00:00", "end_time": f"{end}+00:00"}
    return nb


def _rows(folder: Path, rows: list[tuple[str, str, str]]) -> None:
    """Measurement rows (step, device, timestamp) as the lab stores them (``fastapi.jsonl``)."""
    (folder / "fastapi.jsonl").write_text("".join(json.dumps({
        "experiment": "fastapi", "step": step, "device": device, "timestamp": stamp, "gpu": "x"}) + "\n"
        for step, device, stamp in rows))


def _compared(source: Path, tmp_path: Path, code: dict | None, gpu_code: dict | None) -> tuple[Any, list]:
    """A page of a CPU run with a GPU run beside (``code``, ``gpu_code``: what each run.json says of the code
    that ran); the page and its code cells."""
    source.write_text(COMPARED.replace("plot()", "table()\n\n# %%\nplot()"))
    cells = ["target = None", 'print("hello")', "table()", "plot()", "measure()", "monitor()"]
    mine = _executed(cells, [[], [STREAM], [TABLE], [FIGURE], [TABLE], [EMBEDDED]])
    theirs = _executed(cells, [[], [STREAM], [TABLE], [READING, FIGURE], [TABLE], [EMBEDDED]])
    times = {2: ("2026-11-26T09:24:00", "2026-11-26T09:24:05"),
             3: ("2026-11-26T09:24:06", "2026-11-26T09:24:07"),
             4: ("2026-11-26T09:24:08", "2026-11-26T09:24:09")}
    run = _run(tmp_path / "cpu", notebooks={"03_demo": _timed(mine, "2026-11-26T09:20:00", times)}, code=code)
    _rows(tmp_path / "cpu", [("fastapi_onnx", "cpu", "2026-11-26T09:24:08+0000")])
    gpu_folder = tmp_path / "gpu"
    _run(gpu_folder, notebooks={"03_demo": _timed(theirs, "2026-11-26T09:20:00", times)},
         gpu="NVIDIA H100 80GB HBM3", target="docker", code=gpu_code)
    _rows(gpu_folder, [("fastapi_pt", "cuda", "2026-11-26T09:24:01+0000"),
                       ("fastapi_onnx", "cpu", "2026-11-26T09:24:08+0000")])
    gpu = build._run(gpu_folder, "compare/report.html")
    page = pages.page(source, run, gpu, tmp_path / "figures")[0]
    return page, _code(page)


def test_a_second_runs_figures_sit_beside_this_runs_with_its_table_reading_and_report(
        source: Path, tmp_path: Path) -> None:
    """The GPU run's PyTorch rows ran on its GPU and its ONNX rows on its CPU: each side's caption says so
    from the rows' own device, the figure's block carries that run's table (the nearest before the figure),
    its reading and its report; a figure embedded in an HTML output is compared too. Both ran one commit."""
    page, code = _compared(source, tmp_path, CODE, CODE)
    plot = next(c for c in code if c.source == "plot()")
    assert plot.outputs == []  # its figure moved into the side-by-side block
    block = page.cells[page.cells.index(plot) + 1].source
    assert block.startswith("```{raw} html") and block.count("<figure>") == 2
    # the figure draws every row: the GPU run's PyTorch on its GPU, its ONNX Runtime on its CPU
    assert "This run: CPU (AMD EPYC, 2 cores) (run cpu, target local)" in block
    assert ("Beside: GPU NVIDIA H100 80GB HBM3 and CPU (AMD EPYC, 2 cores): fastapi_pt on GPU, fastapi_onnx "
            "on CPU (run gpu, target docker)") in block
    assert "<td>onnx 5.8 ms</td>" in block and "onnx: median 6 ms" in block and "plot saved" not in block
    assert 'href="compare/report.html"' in block and "own axes" in block
    # a cell that stored rows is captioned by its own: the GPU run's ONNX rows ran on its CPU
    measure = page.cells[page.cells.index(next(c for c in code if c.source == "measure()")) + 1].source
    assert "Beside: CPU (AMD EPYC, 2 cores), not its GPU NVIDIA H100 80GB HBM3 (run gpu" in measure
    assert "GPU NVIDIA H100 80GB HBM3 and" not in measure and "<figure>" not in measure
    monitor = next(c for c in code if c.source == "monitor()")
    block = page.cells[page.cells.index(monitor) + 1].source
    assert block.count("<figure>") == 2 and "<figcaption>fastapi_onnx: up to 633 req/s</figcaption>" in block
    assert monitor.outputs == []
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == [
        "03_demo-cell3-other-0.png", "03_demo-cell3-this-0.png", "03_demo-cell5-other-0.png",
        "03_demo-cell5-this-0.png"]


@pytest.mark.parametrize("gpu_code", [None, {**CODE, "commit": "96e7213" + "0" * 33},
                                      {**CODE, "dirty": True, "changed_count": 1}])
def test_a_second_run_of_other_code_sets_only_its_figures_beside(source: Path, tmp_path: Path,
                                                                 gpu_code: dict | None) -> None:
    """A run whose code is not this run's (not recorded, another commit, uncommitted changes) printed its
    tables and words with that code: they are left out, a figure comes without its caption, and the block says
    where its rows are read by this run's code; a cell where it drew no figure gets no block at all."""
    page, code = _compared(source, tmp_path, CODE, gpu_code)
    plot = next(c for c in code if c.source == "plot()")
    block = page.cells[page.cells.index(plot) + 1].source
    assert block.count("<figure>") == 2 and "Only its figure" in block
    assert "<table" not in block and "onnx: median 6 ms" not in block
    assert 'href="compare/report.html"' in block
    monitor = next(c for c in code if c.source == "monitor()")
    block = page.cells[page.cells.index(monitor) + 1].source
    other = block[block.index("servelab-other"):]
    assert block.count("<figure>") == 2 and "<figcaption>" not in other  # its caption: its code's words
    for name in ("table()", "measure()"):  # tables alone: nothing beside
        cell = next(c for c in code if c.source == name)
        following = page.cells[page.cells.index(cell) + 1]
        assert "servelab-compare" not in str(following.source), name
    assert page.metadata["servelab"]["beside"] == 2


def test_a_figure_in_an_html_output_becomes_a_file_that_opens_full_size(source: Path, tmp_path: Path) -> None:
    run = _run(tmp_path / "run", notebooks={"03_demo": _executed(
        ["target = None", 'print("hello")', "plot()"], [[], [STREAM], [EMBEDDED]])})
    page = pages.page(source, run, None, tmp_path / "figures")[0]
    plot = next(c for c in _code(page) if c.source == "plot()")
    markup = plot.outputs[0]["data"]["text/html"]
    assert "data:image" not in markup
    assert '<a class="servelab-full" href="_figures/03_demo-cell2-this-0.png"' in markup
    assert (tmp_path / "figures" / "03_demo-cell2-this-0.png").read_bytes() == base64.b64decode(PNG)


def test_outputs_never_show_the_machines_paths_or_user_name(source: Path, tmp_path: Path) -> None:
    """The run's folder (where it ran, recorded by papermill, and where it is read now), the checkout's,
    the home folder and a lease named after the user: replaced, in the page and in the download."""
    user = getpass.getuser()
    text = (f"plot saved: /elsewhere/20261126-quick/plots/a.png\nThe lab's code: /srv/lab\n"
            f"{REPO_ROOT}/.venv/bin/python --chdir {REPO_ROOT}\n{Path.home()}/.cache\n"
            f"lease_name='serve_system_{user}' server node-serve-system-{user}\n")
    html_out = {"output_type": "display_data", "metadata": {},
                "data": {"text/html": f"<b>serve_system_{user}</b> {tmp_path}/20261126-quick/x.csv",
                         "text/plain": "x"}}
    nb = _executed(["target = None", 'print("hello")', "plot()"],
                   [[], [{**STREAM, "text": text}], [html_out]])
    nb.metadata["papermill"] = {"input_path": "/srv/lab/notebooks/03_demo.ipynb",
                                "output_path": "/elsewhere/20261126-quick/03_demo.ipynb"}
    run = _run(tmp_path / "20261126-quick", notebooks={"03_demo": nb})
    page, download = pages.page(source, run, None, tmp_path / "figures")
    for shown in (page, download):
        hello, plot = (next(c for c in _code(shown) if c.source == s) for s in ('print("hello")', "plot()"))
        assert hello.outputs[0]["text"] == (
            "plot saved: results/20261126-quick/plots/a.png\nThe lab's code: $LAB\n"
            "$LAB/.venv/bin/python --chdir $LAB\n~/.cache\n"
            "lease_name='serve_system_<netID>' server node-serve-system-<netID>\n")
        assert plot.outputs[0]["data"]["text/html"] == (
            "<b>serve_system_&lt;netID&gt;</b> results/20261126-quick/x.csv")


def test_outputs_never_show_a_token_a_nodes_address_or_a_resource_id(source: Path, tmp_path: Path) -> None:
    """What would let a reader reach a node or a project: replaced, in the page and in the download;
    loopback, 0.0.0.0, versions and commit digests stay."""
    token = "57820bee0226cc9c4723b49213c88de60e308cd0fbd1a2a5"
    text = (f"jupyter: http://129.114.108.7:8888/lab?token={token}\n"
            "server 3f1c2b6e-9d4a-4c1e-8b7a-2e5d6f7a8b9c "
            f"at 10.52.0.12\n{token}\nlistening on 127.0.0.1:8000 and 0.0.0.0:80; vllm 0.10.1.1, commit "
            "0f654ecb4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b\n")
    nb = _executed(["target = None", 'print("hello")'], [[], [{**STREAM, "text": text}]])
    run = _run(tmp_path / "20261126-quick", notebooks={"03_demo": nb})
    for shown in pages.page(source, run, None, tmp_path / "figures"):
        hello = next(c for c in _code(shown) if c.source == 'print("hello")')
        assert hello.outputs[0]["text"] == (
            "jupyter: http://<IP>:8888/lab?token=<token>\nserver <id> at <IP>\n<token>\nlistening on "
            "127.0.0.1:8000 and 0.0.0.0:80; vllm 0.10.1.1, commit 0f654ecb4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b\n")


def test_a_runs_data_is_its_measurements_and_summaries_never_its_state_file(tmp_path: Path) -> None:
    import json

    from servelab.site.build import _copy_run_files

    run = tmp_path / "20261126-chameleon"
    run.mkdir()
    (run / "fastapi.jsonl").write_text('{"p50_ms": 12.5}\n')
    (run / "run.json").write_text(json.dumps({"chameleon": {"resources": [
        {"kind": "server", "id": "3f1c2b6e-9d4a-4c1e-8b7a-2e5d6f7a8b9c", "detail": "129.114.108.7"}]}}))
    (run / "chameleon-state.json").write_text('{"project": "CHI-231095"}')
    (run / "settings-of-mine.json").write_text("{}")
    _, data = _copy_run_files(run, tmp_path / "extra", "", "index.html")
    assert data == ["fastapi.jsonl", "run.json"]
    published = (tmp_path / "extra" / "data" / "run.json").read_text()
    assert "<id>" in published and "<IP>" in published and "129.114" not in published


def test_a_printed_project_file_is_highlighted_code(tmp_path: Path) -> None:
    listing = ("# servelab/serving/http.py, lines 1-2: PredictRequest\nclass PredictRequest:\n    pass\n\n"
               "# docker/Dockerfile (lines 1-1 of 9)\nFROM python:3.11\n")
    source = tmp_path / "04_demo.py"
    source.write_text('# %% [markdown]\n# # 4. Demo\n\n# %%\ncommon.show_code("servelab/serving/http.py")\n')
    run = _run(tmp_path / "run", notebooks={"04_demo": _executed(
        ['common.show_code("servelab/serving/http.py")'], [[{**STREAM, "text": listing}]])})
    [cell] = _code(pages.page(source, run, None, tmp_path / "figures")[0])
    [output] = cell.outputs
    assert output["data"]["text/markdown"] == (
        "```python\n# servelab/serving/http.py, lines 1-2: PredictRequest\nclass PredictRequest:\n    pass\n"
        "```\n\n```docker\n# docker/Dockerfile (lines 1-1 of 9)\nFROM python:3.11\n```")
    assert output["data"]["text/plain"] == listing  # the text itself is unchanged


def test_every_page_links_its_download_launch_and_source_and_the_docs_it_names(source: Path,
                                                                              tmp_path: Path) -> None:
    source.write_text(SOURCE.replace("Some prose.", "Why: docs/decisions/a-note.md. And "
                                     "`docs/ci/gitlab-ci.yml`, not https://example.org/docs/x.md."))
    run = _run(tmp_path / "run", notebooks={"03_demo": _executed(
        ["target = None", 'print("hello")', "plot()"], [[], [STREAM], [FIGURE]])})
    trovi = "https://chameleoncloud.org/experiment/share/x"
    links = Links(repo="https://github.com/o/lab", ref="abc123", launch=trovi)
    page = pages.page(source, run, None, tmp_path / "figures", links, links.file)[0]
    bar = page.cells[1].source
    assert 'href="notebooks/03_demo.ipynb" download' in bar
    assert (f'<a class="servelab-launch" href="{trovi}">Launch on Chameleon (Trovi)</a> (then open '
            "notebooks/03_demo.ipynb; it runs in your node's Jupyter, whose address 02 prints)") in bar
    assert 'href="https://github.com/o/lab/blob/abc123/notebooks/03_demo.py"' in bar
    prose = page.cells[0].source
    blob = "https://github.com/o/lab/blob/abc123"
    assert (f'<a class="servelab-doc reference external" href="{blob}/docs/decisions/a-note.md">'
            "docs/decisions/a-note.md</a>.") in prose
    assert f'href="{blob}/docs/ci/gitlab-ci.yml"><code>docs/ci/gitlab-ci.yml</code></a>' in prose
    assert "https://example.org/docs/x.md" in prose and prose.count("<a ") == 2


def test_launch_opens_the_notebook_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """By default the notebook in the student's clone on Chameleon's JupyterHub (the clone named as git clone
    names it); a launch address with {notebook} gets the page's notebook; one without stays as it is."""
    monkeypatch.delenv("SERVELAB_LAUNCH_URL", raising=False)
    links = Links(repo="https://github.com/o/serve-system-lab")
    assert links.launch_for("01_reserve_node") == (
        "https://jupyter.chameleoncloud.org/hub/user-redirect/lab/tree/serve-system-lab/notebooks/"
        "01_reserve_node.ipynb")
    assert links.launch_label("01_reserve_node") == "Open it in Chameleon's Jupyter"
    assert links.launch_note("01_reserve_node") == "in your clone of the lab, serve-system-lab/"
    assert "it runs in your node's Jupyter" in links.launch_note("05_instance_scaling")
    monkeypatch.setenv("SERVELAB_LAUNCH_URL", "https://hub.example.org/user-redirect/lab/tree/lab/{notebook}")
    found = Links.find(repo="https://github.com/o/x")
    assert found.launch_for("03_fastapi") == "https://hub.example.org/user-redirect/lab/tree/lab/notebooks/03_fastapi.ipynb"


def test_the_repository_is_found_in_the_documented_order(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    """--repo, $SERVELAB_REPO_URL, the CI's, pyproject.toml's [project.urls], then origin."""
    from servelab.site import links as links_module

    for name in ("SERVELAB_REPO_URL", "GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "CI_PROJECT_URL"):
        monkeypatch.delenv(name, raising=False)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n\n[project.urls]\nRepository = "https://github.com/o/declared"\n')
    assert links_module.declared_repository(pyproject) == "https://github.com/o/declared"
    assert links_module.declared_repository(tmp_path / "none.toml") == ""
    monkeypatch.setattr(links_module, "declared_repository", lambda: "")
    monkeypatch.setattr(links_module, "_git", lambda *args: "git@github.com:o/origin.git")
    assert links_module.repository() == "https://github.com/o/origin"
    monkeypatch.setattr(links_module, "declared_repository", lambda: "https://github.com/o/declared")
    assert links_module.repository() == "https://github.com/o/declared"
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "o/ci")
    assert links_module.repository() == "https://github.com/o/ci"
    monkeypatch.setenv("SERVELAB_REPO_URL", "https://github.com/o/setting.git")
    assert links_module.repository() == "https://github.com/o/setting"
    assert links_module.repository("git@gitlab.com:o/given.git") == "https://gitlab.com/o/given"


@pytest.mark.parametrize(("remote", "address"), [
    ("git@github.com:o/serve-system-lab.git", "https://github.com/o/serve-system-lab"),
    ("https://token@github.com/o/lab.git", "https://github.com/o/lab"),
    ("https://gitlab.example.org/course/lab", "https://gitlab.example.org/course/lab"),
    ("/work/main", ""),
])
def test_a_remote_as_the_repositorys_web_address(remote: str, address: str) -> None:
    assert web_address(remote) == address


def test_provenance_from_run_json_else_from_the_measurements_and_the_name(tmp_path: Path) -> None:
    run = _run(tmp_path / "20261125-140000-quick", gpu="Tesla P100-PCIE-16GB", target="docker")
    line = run.provenance.line()
    assert line == ("run 20261125-140000-quick: 2026-11-25 14:00:00 UTC, target docker, preset quick, "
                    "CPU AMD EPYC, 2 cores, GPU Tesla P100-PCIE-16GB; code not recorded")
    old = tmp_path / "20261120-093000-quick"
    old.mkdir()
    (old / "run.json").write_text(json.dumps({"preset": "quick", "target": "local", "cpu_count": 2}))
    (old / "fastapi.jsonl").write_text(json.dumps({"host": "vm", "gpu": "none"}) + "\n")
    facts = provenance.read(old)
    assert (facts.cpu, facts.gpu, facts.date) == ("not recorded, 2 cores", "none",
                                                  "2026-11-20 09:30:00 (from the run's name)")
    assert not facts.on_gpu and facts.line().endswith("no GPU; code not recorded")


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


def test_the_newest_run_is_the_one_that_began_last_whatever_was_written_last(tmp_path: Path) -> None:
    import os

    for name, began in (("later", "2026-11-26 09:00:00 UTC"), ("earlier", "2026-11-25 09:00:00 UTC")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text(json.dumps({"started": began}))
    os.utime(tmp_path / "later" / "run.json", (1, 1))  # e.g. copied back from the node after the other
    assert build.newest_run(tmp_path) == tmp_path / "later"
