"""The site's command: a real Sphinx build of a small run (a change to a notebook's source is on the page of
the next build, nothing re-executed), and bad input as one line, never a traceback."""

from __future__ import annotations

import base64
import getpass
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from servelab.core.lab_steps import and_list, measuring
from servelab.core.paths import REPO_ROOT
from servelab.results.reference import REFERENCE_SETTING
from servelab.site import build
from servelab.site import guides as guide_pages
from servelab.site.__main__ import main as site_main
from servelab.site.links import JUPYTERHUB, Links
from tests.unit.lab_script import stubbed_lab
from tests.unit.site.phone import COVERED_BY_COPY, OVERFLOWING_OUTPUTS, PHONE

# the measuring notebooks the lab's GPU reference run (03 and 09) did not run
NOT_RAN = and_list([n for n in measuring() if n not in ("03", "09")], "or")

pytestmark = pytest.mark.slow  # two Sphinx builds of two pages (seconds)


@pytest.fixture(autouse=True, scope="module")
def _no_guides() -> Iterator[None]:
    """These builds are of notebooks' pages; the guides' are tests/unit/site/test_guides.py's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(guide_pages, "guide_paths", lambda *_: [])
        yield


def _small_run(tmp_path: Path) -> tuple[Path, Path]:
    source = tmp_path / "nb" / "03_demo.py"
    source.parent.mkdir()
    source.write_text('# %% [markdown]\n# # 3. A notebook\n#\n# First prose.\n\n# %%\nprint("hello")\n')
    run = tmp_path / "20261125-140000-quick"
    run.mkdir()
    cell = nbformat.v4.new_code_cell('print("hello")', execution_count=1, outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="hello from the run\n")])
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), run / "03_demo.ipynb")
    (run / "run.json").write_text(json.dumps({"preset": "quick", "target": "local", "ok": True,
                                              "notebooks": [{"name": "03_demo", "ok": True, "seconds": 1}]}))
    (run / "report.html").write_text("<html><body>report</body></html>")
    return source, run


def test_a_changed_source_changes_the_page_and_nothing_runs(tmp_path: Path) -> None:
    source, run = _small_run(tmp_path)
    out = build.build(run, sources=[source])
    page = (out / "03_demo.html").read_text()
    assert "First prose." in page and "hello from the run" in page
    assert "run 20261125-140000-quick" in page  # the banner
    assert (out / "report.html").is_file() and (out / "data" / "run.json").is_file()
    assert sorted(p.name for p in run.iterdir()) == ["03_demo.ipynb", "report.html", "run.json", "site"]
    source.write_text(source.read_text().replace("First prose.", "Second prose."))
    out = build.build(run, sources=[source])
    page = (out / "03_demo.html").read_text()
    assert "Second prose." in page and "First prose." not in page and "hello from the run" in page


def test_a_folder_that_is_not_a_site_is_never_replaced(tmp_path: Path) -> None:
    source, run = _small_run(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(build.SiteError, match="is not a site built here"):
        build.build(run, out=tmp_path / "mine", sources=[source])
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize(("args", "message"), [
    (["{tmp}/nowhere"], "is not a folder: give a run's folder"),
    (["{tmp}"], "has no run.json: give a folder written by ./lab run"),
    (["{tmp}", "--compare", "{tmp}/nowhere"], "--compare"),
])
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], message: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    assert site_main([a.format(tmp=tmp_path) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1


def test_the_command_line_says_what_it_built(tmp_path: Path) -> None:
    source, run = _small_run(tmp_path)
    done = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                           "from servelab.site import build; "
                           f"build.lab_sources = lambda: [Path({str(source)!r})]; "
                           "from servelab.site.__main__ import main; sys.exit(main(sys.argv[1:]))", str(run)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert f"site: built {run / 'site'}" in done.stdout
    assert f"python3 -m http.server -d {run / 'site'} 8000" in done.stdout


def test_lab_site_uses_the_full_environment_where_set_up_made_one(tmp_path: Path) -> None:
    lab, log, env = stubbed_lab(tmp_path)
    (tmp_path / "venv" / ".servelab-stamp").write_text("full abc\n")
    done = subprocess.run(["bash", str(lab), "site", "results/x", "--serve"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == ["setup ", "python -m servelab.site results/x --serve"]


@pytest.mark.parametrize("stamp", [None, "controller abc\n"])
def test_lab_site_without_the_full_set_up_makes_only_the_small_environment(tmp_path: Path,
                                                                          stamp: str | None) -> None:
    """No full environment (a fresh clone, CI's site job, an instructor's controller-only one): set-up's
    ``--site`` and that environment's Python, never the full set-up."""
    lab, log, env = stubbed_lab(tmp_path)
    if stamp:
        (tmp_path / "venv" / ".servelab-stamp").write_text(stamp)
    small = tmp_path / "small" / "bin" / "python"
    small.parent.mkdir(parents=True)
    small.write_text(f'#!/usr/bin/env bash\necho "small python $*" >> {log}\n')
    small.chmod(0o755)
    env["SITE_VENV"] = str(small.parent.parent)
    done = subprocess.run(["bash", str(lab), "site", "--out", "site"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == ["setup --site", "small python -m servelab.site --out site"]


def test_the_small_environment_holds_what_rendering_imports() -> None:
    """requirements/site.txt: pinned in constraints.txt, part of the full set-up (lab.txt), and enough for
    the site's modules, which import nothing of the lab's heavy packages (checked in a fresh interpreter)."""
    site = [line.strip() for line in (REPO_ROOT / "requirements" / "site.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    pins = {line.split("==")[0].lower() for line in (REPO_ROOT / "constraints.txt").read_text().splitlines()
            if "==" in line}
    assert site and all(name.lower() in pins for name in site), site
    assert "-r site.txt" in (REPO_ROOT / "requirements" / "lab.txt").read_text().splitlines()
    heavy = ["torch", "pandas", "matplotlib", "numpy", "papermill", "tritonclient", "ray", "transformers"]
    probe = ("import sys; import servelab.site.__main__, servelab.site.build, servelab.site.pages; "
             f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# A small run and a GPU run beside it, built once with a real Sphinx and read back with an HTML parser as a
# reader's browser gets it: the handout's promises checked on the built pages.
USER = getpass.getuser()
LESSONS = ("| lesson | needs |\n|---|---|\n| Queuing (03) | any machine |\n\n"
           "Why: docs/decisions/2026-11-24-gpu-expectations.md")


def _nb(cells: list[tuple[str, list[dict]]], stamps: dict[int, tuple[str, str]], run: Path, lab: str) -> dict:
    nb = nbformat.v4.new_notebook(metadata={"papermill": {
        "input_path": f"{lab}/notebooks/x.ipynb", "output_path": f"/elsewhere/{run.name}/x.ipynb",
        "start_time": "2026-11-26T09:20:00+00:00", "end_time": "2026-11-26T09:30:00+00:00"}})
    for index, (code, outputs) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(code, execution_count=index + 1,
                                         outputs=[nbformat.from_dict(o) for o in outputs])
        if index in stamps:
            begin, end = stamps[index]
            cell.metadata["papermill"] = {"start_time": begin + "+00:00", "end_time": end + "+00:00"}
        nb.cells.append(cell)
    return nb


def _measured_run(folder: Path, gpu: str, devices: dict[str, str], lab: str,
                  notebooks: tuple[str, ...] = ("00_intro", "03_demo")) -> Path:
    figure = {"output_type": "display_data", "metadata": {}, "data": {
        "image/png": base64.b64encode(PNG_BYTES).decode(), "text/plain": "<Figure>"}}
    table = {"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": {
        "text/html": f"<table><tr><th>measurement</th></tr><tr><td>{folder.name} onnx</td></tr></table>",
        "text/plain": "table"}}
    printed = {"output_type": "stream", "name": "stdout", "text": (
        f"plot saved: {folder}/plots/a.png\n$ {lab}/.venv/bin/python -m gunicorn --chdir {lab}\n"
        f"lease serve_system_{USER} in {Path.home()}\n"
        "GPU %: not sampled (docs/decisions/2026-11-26-gpu-utilisation.md)\n" + LONG_LINE + "\n")}
    listing = {"output_type": "stream", "name": "stdout",
               "text": ("# servelab/x.py, lines 1-1: f\n"
                        "def f(): pass  # docs/decisions/2026-11-25-handout-site.md\n")}
    folder.mkdir(parents=True)
    nbformat.write(_nb([("step.lessons()", [{"output_type": "execute_result", "execution_count": 1,
                                            "metadata": {}, "data": {"text/markdown": LESSONS,
                                                                     "text/plain": "lessons"}}])],
                       {}, folder, lab), folder / "00_intro.ipynb")
    cells = [('common.show_code("servelab/x.py", "f")', [listing]), ("measure()", [table, printed]),
             ("plot()", [figure])]
    measuring = {1: ("2026-11-26T09:24:00", "2026-11-26T09:24:05")}
    nbformat.write(_nb(cells, measuring, folder, lab), folder / "03_demo.ipynb")
    (folder / "run.json").write_text(json.dumps({
        "preset": "quick", "target": "local", "started": "2026-11-26 09:20:00 UTC", "ok": True,
        "machine": {"cpu_model": "AMD EPYC", "cpu_count": 2, "gpu": gpu}, "code": CODE,  # both: one commit
        "notebooks": [{"name": n, "ok": True, "seconds": 1} for n in notebooks]}))
    (folder / "fastapi.jsonl").write_text("".join(json.dumps({
        # PyTorch's rows before the measuring cell, ONNX Runtime's while it ran
        "experiment": "fastapi", "step": step, "device": device, "note": f"{lab}/x",
        "timestamp": "2026-11-26T09:23:00+0000" if step == "fastapi_pt" else "2026-11-26T09:24:01+0000"})
        + "\n" for step, device in devices.items()))
    (folder / "report.html").write_text(f"<!doctype html><html><head><title>r</title></head><body>"
                                        f"<table class='data'><tr><td>{lab}</td></tr></table></body></html>")
    return folder


PNG_BYTES = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
CODE = {"commit": "e83ba46" + "0" * 33, "dirty": False, "changed": [], "changed_count": 0}
# a reading as a verdict prints it: one line of several hundred characters (a phone shows about 40)
LONG_LINE = ("observed in this run: FastAPI onnx: with many clients the median latency is ≥ 4× one client's "
             "(queuing) — 28 ms → 267 ms (9.7×) (spread 125 ms); " * 4).strip()


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(the built site, the CPU run, the GPU run): the GPU run's ONNX rows ran on its CPU."""
    base = tmp_path_factory.mktemp("compared")
    (base / "nb").mkdir()
    (base / "nb" / "00_intro.py").write_text(
        "# %% [markdown]\n# # 0. Introduction\n#\n# The overview.\n\n# %%\nstep.lessons()\n")
    (base / "nb" / "03_demo.py").write_text(
        "# %% [markdown]\n# # 3. A demo\n#\n# Why: docs/decisions/2026-11-25-handout-site.md and\n"
        "# `docs/ci/gitlab-ci.yml`.\n\n# %%\ncommon.show_code(\"servelab/x.py\", \"f\")\n\n"
        "# %%\nmeasure()\n\n"
        "# %%\nplot()\n")
    cpu = _measured_run(base / "20261126-092000-quick", "none", {"fastapi_onnx": "cpu"}, str(REPO_ROOT))
    gpu = _measured_run(base / "gpu" / "20261126-h100", "NVIDIA H100 80GB HBM3",
                        {"fastapi_pt": "cuda", "fastapi_onnx": "cpu"}, "/home/someone/lab",
                        ("03_demo", "09_llm_serving"))
    site = build.build(cpu, out=base / "site", compare=base / "gpu",  # a folder of runs: its newest
                       sources=[base / "nb" / "00_intro.py", base / "nb" / "03_demo.py"],
                       links=Links(repo="", ref="abc"))
    return site, cpu, gpu


def _soup(path: Path):
    from bs4 import BeautifulSoup

    return BeautifulSoup(path.read_text(), "html.parser")


def test_a_markdown_outputs_table_is_a_table(compared: tuple[Path, Path, Path]) -> None:
    site, _, _ = compared
    output = _soup(site / "00_intro.html").select_one("div.cell_output")
    assert output is not None and output.find("table") is not None, output
    assert "|---|" not in output.get_text()


def test_the_compared_figure_names_each_sides_device_with_the_other_runs_table_and_report(
        compared: tuple[Path, Path, Path]) -> None:
    site, _, _ = compared
    page = _soup(site / "03_demo.html")
    blocks = [b for b in page.select("div.servelab-compare") if b.find("figure")]
    assert len(blocks) == 1
    this, other = blocks[0].select("div.servelab-run")
    assert this.select_one(".servelab-where").get_text() == (
        "This run: CPU (AMD EPYC, 2 cores) (run 20261126-092000-quick, target local)")
    assert other.select_one(".servelab-where").get_text() == (
        "Beside: GPU NVIDIA H100 80GB HBM3 and CPU (AMD EPYC, 2 cores): fastapi_pt on GPU, "
        "fastapi_onnx on CPU (run 20261126-h100, target local)")
    assert other.select_one(".servelab-table table td").get_text() == "20261126-h100 onnx"
    report = other.select_one(".servelab-report a")["href"]
    assert report == "compare/report.html" and (site / report).is_file()
    # the table's own block: the rows that cell stored, the GPU run's ONNX Runtime on its CPU
    table_block = next(b for b in page.select("div.servelab-compare") if not b.find("figure"))
    assert table_block.select_one(".servelab-where").get_text().startswith(
        "Beside: CPU (AMD EPYC, 2 cores), not its GPU NVIDIA H100 80GB HBM3")


def test_no_page_holds_the_machines_paths_or_user_name(compared: tuple[Path, Path, Path]) -> None:
    site, cpu, gpu = compared
    kinds = (".html", ".ipynb", ".json", ".jsonl")
    published = [p for p in site.rglob("*") if p.is_file() and (p.suffix in kinds or p.name == build.MARKER)]
    forbidden = [str(REPO_ROOT), str(cpu), str(gpu), str(Path.home()), "/home/someone",
                 f"serve_system_{USER}"]
    found = {str(p.relative_to(site)): [f for f in forbidden if f in p.read_text()] for p in published}
    assert {k: v for k, v in found.items() if v} == {}
    text = _soup(site / "03_demo.html").get_text()
    assert "$LAB/.venv/bin/python -m gunicorn --chdir $LAB" in text and "serve_system_<netID>" in text


def test_every_docs_reference_is_a_link(compared: tuple[Path, Path, Path]) -> None:
    site, _, _ = compared
    for name in ("00_intro", "03_demo"):
        article = _soup(site / f"{name}.html").select_one("article")
        # prose, markdown outputs and printouts alike; code (a cell's own, a show_code listing) stays code
        loose = [str(t) for t in article.find_all(string=lambda s: "docs/" in s)
                 if t.find_parent("a") is None and t.find_parent(class_="cell_input") is None
                 and t.find_parent(class_="highlight-python") is None]
        if name == "03_demo":  # its show_code listing names a docs/ file: it stays code, unlinked
            listing = article.select_one("div.cell_output div.highlight-python")
            assert listing is not None and not listing.select("a")
        assert loose == [], (name, loose)
        for link in article.select("a.servelab-doc"):
            assert (site / link["href"]).is_file() and link["href"].endswith(".html"), link  # a page here


def test_the_docs_a_page_names_are_pages_of_the_site(compared: tuple[Path, Path, Path]) -> None:
    """A decision note is rendered (headings, paragraphs, tables), declared UTF-8, with no mojibake; a YAML
    file is a page holding it as code; the notes those name are pages too, linked from where they sit."""
    site, _, _ = compared
    note = site / "docs" / "decisions" / "2026-11-25-handout-site.html"
    page = _soup(note)
    assert page.select_one('meta[charset="utf-8"]') is not None
    assert page.select_one("article h1").get_text().startswith("The handout site")
    assert page.select_one("article table") is not None and "|---|" not in page.get_text()
    text = page.select_one("article").get_text()
    assert "00–09" in text and "â€" not in text and "Ã" not in text
    linked = [a["href"] for a in page.select("article a.servelab-doc")]
    assert "2026-11-26-handout-site-second-pass.html" in linked  # the note it names, relative to it
    assert (note.parent / "2026-11-26-handout-site-second-pass.html").is_file()
    yml = _soup(site / "docs" / "ci" / "gitlab-ci.yml.html")
    assert yml.select_one("article div.highlight-yaml") is not None
    assert not list(site.rglob("*.md")), "the notes are pages, not raw markdown"


def test_each_page_has_a_download_and_a_launch_link_and_the_index_names_pages_as_the_sidebar(
        compared: tuple[Path, Path, Path]) -> None:
    site, _, _ = compared
    for name in ("00_intro", "03_demo"):
        page = _soup(site / f"{name}.html")
        download = page.select_one("a.servelab-download")
        assert download is not None and download.has_attr("download")
        saved = nbformat.read(site / download["href"], as_version=4)
        assert any(c.get("outputs") for c in saved.cells if c.cell_type == "code")
        launch = page.select_one("a.servelab-launch")["href"]  # the notebook itself, in the student's clone
        assert launch == f"{JUPYTERHUB}hub/user-redirect/lab/tree/{REPO_ROOT.name}/notebooks/{name}.ipynb"
    index = _soup(site / "index.html")
    sidebar = [a.get_text() for a in index.select(".sidebar-tree a.reference.internal")]
    listed = [a.get_text() for a in index.select("article table a.reference.internal")]
    assert sidebar == listed == ["0. Introduction", "3. A demo"]


def test_every_output_image_links_to_its_full_size(compared: tuple[Path, Path, Path]) -> None:
    site, _, _ = compared
    images = [(name, img) for name in ("00_intro", "03_demo")
              for img in _soup(site / f"{name}.html").select("article img")]
    assert len(images) == 2
    for name, img in images:
        link = img.find_parent("a")
        assert link is not None and link["href"] == img["src"], (name, img)
        assert (site / link["href"]).read_bytes() == PNG_BYTES


def test_a_shown_project_file_is_highlighted(compared: tuple[Path, Path, Path]) -> None:
    site, _, _ = compared
    output = _soup(site / "03_demo.html").select_one("div.cell_output")
    assert output.select_one("div.highlight-python span.k") is not None, output


def test_the_copied_reports_fit_a_phone_and_lead_back_to_the_handout(
        compared: tuple[Path, Path, Path]) -> None:
    site, _, _ = compared
    for report, back in (("report.html", "index.html"), ("compare/report.html", "../index.html")):
        page = _soup(site / report)
        assert page.select_one('meta[name="viewport"]')["content"] == "width=device-width, initial-scale=1"
        assert page.select_one(".servelab-back a")["href"] == back and (site / report).parent.joinpath(
            back).is_file()
        stylesheet = page.select_one('link[rel="stylesheet"]')["href"]
        assert (site / report).parent.joinpath(stylesheet).is_file()


def test_the_reference_run_is_put_beside_unless_told_otherwise(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --compare the newest committed reference run (results/reference/<name>/, by its start) goes
    beside; $SERVELAB_REFERENCE picks one or, as none, leaves it out, and so does --no-compare."""
    base = tmp_path / "reference"
    for name, started in (("h100", "2026-11-26 09:23:32 UTC"), ("p100", "2026-11-20 10:00:00 UTC")):
        (base / name).mkdir(parents=True)
        (base / name / "run.json").write_text(json.dumps({"started": started}))
    monkeypatch.delenv(REFERENCE_SETTING, raising=False)
    assert build.default_compare(base) == base / "h100"
    monkeypatch.setenv(REFERENCE_SETTING, str(base / "p100"))
    assert build.default_compare(base) == base / "p100"
    monkeypatch.setenv(REFERENCE_SETTING, "none")
    assert build.default_compare(base) is None
    monkeypatch.setenv(REFERENCE_SETTING, str(base / "p100"))
    built: list[object] = []
    monkeypatch.setattr("servelab.site.__main__.build", lambda run, out, compare, links: built.append(compare)
                        or tmp_path / "site")
    _, run = _small_run(tmp_path)
    assert site_main([str(run)]) == 0 and site_main([str(run), "--no-compare"]) == 0
    assert built == [base / "p100", None]
    assert "the reference run" in capsys.readouterr().out


def test_each_banner_names_the_node_and_says_what_sits_beside_that_page(
        compared: tuple[Path, Path, Path]) -> None:
    """The GPU run beside ran 03 and 09 only: "beside them" on 03's page, where its figure sits, and not on
    00's, where nothing of it does; every banner names the student's node and the code that ran; the index
    says what the second run covers and never that "every notebook passed" for a run of two."""
    site, _, _ = compared
    banner = {name: _soup(site / f"{name}.html").select_one(".announcement-content").get_text(" ", strip=True)
              for name in ("00_intro", "03_demo", "index")}
    covers = "run 20261126-h100 (NVIDIA H100 80GB HBM3; notebooks 03 and 09 only)"
    assert f"Beside them on this page: {covers}." in banner["03_demo"]
    assert f"Nothing of {covers} beside this page." in banner["00_intro"]
    assert "Beside them" not in banner["00_intro"]
    assert f"Beside the notebooks' outputs: {covers}" in banner["index"]
    for text in banner.values():
        assert "Your node: 2×P100" in text and "code commit e83ba46, no uncommitted changes" in text
    index = _soup(site / "index.html").select_one("article").get_text(" ", strip=True)
    assert "two NVIDIA P100 GPUs" in index and "every notebook passed" not in index
    assert f"notebooks 03 and 09 only, not {NOT_RAN}" in index
    assert "03 and 09: all passed" in index
    # a page deeper in the site (a note) reaches the report from where it is
    note = _soup(site / "docs" / "decisions" / "2026-11-25-handout-site.html")
    assert note.select_one(".announcement-content a")["href"] == "../../report.html"


def test_on_a_phone_every_printed_line_wraps_inside_its_box(compared: tuple[Path, Path, Path]) -> None:
    """03's page in Chromium as a 390 px mobile browser: the verdict line of several hundred characters wraps,
    no output line runs past its box, and no copy button covers a line of code or output."""
    from playwright.sync_api import sync_playwright

    site, _, _ = compared
    chromium = Path("/usr/bin/chromium")
    assert chromium.is_file(), f"{chromium} is missing: the lab's set-up installs Debian's chromium package"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"])
        try:
            context = browser.new_context(**PHONE)
            page = context.new_page()
            page.goto((site / "03_demo.html").as_uri())
            page.wait_for_load_state("load")
            assert page.evaluate("document.documentElement.clientWidth") == 390
            shown = page.locator("article div.cell_output pre", has_text=LONG_LINE[:40]).first
            assert shown.is_visible() and shown.evaluate("e => e.getBoundingClientRect().height") > 100
            assert page.evaluate(OVERFLOWING_OUTPUTS) == []
            assert page.locator("button.servelab-copy").count() >= 3
            assert page.evaluate(COVERED_BY_COPY) == []
        finally:
            browser.close()


def test_the_reference_runs_data_files_hold_no_temporary_path() -> None:
    """Issue 52: the site's compare/data/llm.csv carried the reference run's `--out /tmp/tmp…/run.json` (its
    load client wrote to a temporary folder then). That run's own folders (/tmp/proj, /tmp/runA) are
    redacted as every run's are; a temporary folder never was, so the reference's rows no longer name it."""
    reference = REPO_ROOT / "results" / "reference" / "h100"
    redactor = build._redactor(reference)
    data = [p for p in reference.iterdir() if p.suffix in build.DATA_SUFFIXES]
    assert data
    left = {p.name: re.findall(r"/tmp/\S*", redactor.text(p.read_text())) for p in data}
    assert {k: v for k, v in left.items() if v} == {}
