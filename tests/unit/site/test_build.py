"""The site's command: a real Sphinx build of a small run (a change to a notebook's source is on the page of
the next build, nothing re-executed), and bad input as one line, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from servelab.core.paths import REPO_ROOT
from servelab.site import build
from servelab.site.__main__ import main as site_main
from tests.unit.lab_script import stubbed_lab

pytestmark = pytest.mark.slow  # two Sphinx builds of two pages (seconds)


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


def test_lab_site_sets_up_then_runs_the_site_command(tmp_path: Path) -> None:
    lab, log, env = stubbed_lab(tmp_path)
    done = subprocess.run(["bash", str(lab), "site", "results/x", "--serve"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == ["setup ", "python -m servelab.site results/x --serve"]
