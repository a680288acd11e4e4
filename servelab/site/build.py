"""Build the handout site for one run: Sphinx with myst-nb, nothing executed, a folder any static host serves.

``build(run_dir)`` writes ``run_dir/site/`` (or ``out``): an index with the run's provenance and the
notebooks in order, one page per notebook (``servelab.site.pages``), the run's ``report.html`` and its
data files (``data/``). Every page carries the run's provenance in its banner. ``compare`` names a
second run (a GPU node's) whose figures are set beside this run's. Why Sphinx + myst-nb and what a
build costs: docs/decisions/2026-11-25-handout-site.md
"""

from __future__ import annotations

import html
import io
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import nbformat

from servelab.lab.runner import notebook_paths
from servelab.results.store import results_dir
from servelab.site import pages
from servelab.site.provenance import Provenance, RunFolderError, read, run_json

MARKER = ".servelab-site"  # in a built site: a rebuild may replace that folder, and only that
DATA_SUFFIXES = (".csv", ".jsonl", ".json")
STYLE = """
/* outputs and side-by-side figures scroll in their own box; the text never makes the page wider */
div.cell_output, div.cell_input, div.output, .highlight { overflow-x: auto; max-width: 100%; }
div.cell_output img, .servelab-compare img { max-width: 100%; height: auto; }
div.cell_output table { display: block; overflow-x: auto; max-width: 100%; }
.servelab-compare { display: grid; grid-template-columns: repeat(auto-fit, minmax(18rem, 1fr)); gap: 1rem; }
.servelab-compare figure { margin: 0; }
.servelab-compare figcaption { font-size: 0.85rem; }
/* the provenance banner wraps instead of scrolling: it is read on every page, phones included */
.announcement { height: auto; min-height: var(--header-height); }
.announcement-content { white-space: normal; font-size: 0.85rem; line-height: 1.4; overflow-wrap: anywhere; }
.announcement-content a { color: inherit; text-decoration: underline; }
"""
CONF = """# written by servelab.site.build: the site's Sphinx configuration
import json
from pathlib import Path

settings = json.loads((Path(__file__).parent / "settings.json").read_text())
project = settings["title"]
html_title = settings["title"]
extensions = ["myst_nb"]
nb_execution_mode = "off"  # the run's outputs, never re-executed
nb_merge_streams = True
myst_enable_extensions = ["colon_fence"]
html_theme = "furo"
html_theme_options = {"announcement": settings["announcement"]}
html_static_path = ["_static"]
html_css_files = ["servelab.css"]
html_extra_path = ["_extra"]
html_copy_source = False
html_show_copyright = False
html_show_sourcelink = False
exclude_patterns = ["_extra", "_build", "settings.json"]
suppress_warnings = ["mystnb.unknown_mime_type"]
"""


class SiteError(RuntimeError):
    """The site could not be built; the message says what to fix."""


def newest_run(base: Path | None = None) -> Path:
    """The most recent run folder under ``results/`` (``$SERVELAB_RESULTS``) that has a run.json."""
    base = Path(base or results_dir())
    runs = sorted((p for p in base.glob("*/run.json")), key=lambda p: p.stat().st_mtime)
    if not runs:
        raise RunFolderError(f"no run in {base}: run the lab first (./lab run) or name a run's folder")
    return runs[-1].parent


def _announcement(run: Provenance, compare: Provenance | None, has_report: bool) -> str:
    text = f"Outputs from {html.escape(run.line())}."
    if compare is not None:
        text += f" Figures beside them: {html.escape(compare.line())}."
    if has_report:
        text += ' <a href="report.html">The run\'s report</a>.'
    return text


def _index(run: Provenance, compare: Provenance | None, stems: Sequence[str], outcomes: dict,
           has_report: bool, data: Sequence[str]) -> str:
    rows = "\n".join(f"| {k} | {v} |" for k, v in run.facts().items())

    def row(stem: str) -> str:
        if stem not in outcomes:
            return f"| [{stem}]({stem}.ipynb) | not run | |"
        outcome = outcomes[stem]
        status = "ok" if outcome.get("ok") else "stopped"
        return f"| [{stem}]({stem}.ipynb) | {status} | {outcome.get('seconds', '')} |"

    ran = "\n".join(row(stem) for stem in stems)
    parts = [
        "# serve-system lab: the handout",
        "Read the lab before your lease: every notebook in order, with its code, configs and commands, "
        "and the outputs of one real run of the whole lab. Outputs come from the run named below and "
        "from nowhere else; your own run, on your own node, measures its own numbers.",
        "## Where these outputs come from", "| fact | value |\n|---|---|\n" + rows,
    ]
    if compare is not None:
        other = "\n".join(f"| {k} | {v} |" for k, v in compare.facts().items())
        parts += ["Figures from a second run are shown beside this run's where both drew one:",
                  "| fact | value |\n|---|---|\n" + other]
    parts += ["## The notebooks", "| notebook | in this run | seconds |\n|---|---|---|\n" + ran]
    if has_report:
        parts.append("The run's report, its verdict and every expected effect checked on its data: "
                     '<a href="report.html">report.html</a>.')
    if data:
        links = ", ".join(f'<a href="data/{name}">{name}</a>' for name in data)
        parts.append(f"The run's measurements: {links}.")
    parts.append("```{toctree}\n:hidden:\n:maxdepth: 1\n\n" + "\n".join(stems) + "\n```")
    return "\n\n".join(parts) + "\n"


def _check_out(out: Path) -> None:
    """A rebuild replaces a site built here, or fills an empty folder; anything else is left alone."""
    if out.exists() and not (out / MARKER).exists() and any(out.iterdir()):
        raise SiteError(f"{out} exists and is not a site built here: name an empty or new folder (--out)")


def _run(folder: Path) -> pages.Run:
    outcomes = {n["name"]: n for n in run_json(folder).get("notebooks", []) if isinstance(n, dict)}
    return pages.Run(Path(folder), read(folder), outcomes)


def lab_sources() -> list[Path]:
    """The lab's notebooks in order, each as its Jupytext source (``NN_name.py``) where it has one."""
    return [p.with_suffix(".py") if p.with_suffix(".py").is_file() else p for p in notebook_paths()]


def build(run_dir: Path, out: Path | None = None, compare: Path | None = None,
          sources: Sequence[Path] | None = None, log: io.TextIOBase | None = None) -> Path:
    """Build the site for the run in ``run_dir`` into ``out`` (default ``run_dir/site``); returns ``out``.

    ``sources``: the notebooks to render, in order (default: the lab's, ``lab_sources()``).
    """
    from sphinx.application import Sphinx
    from sphinx.util.console import nocolor

    say = log if log is not None else sys.stdout
    run_dir = Path(run_dir)
    run = _run(run_dir)
    other = _run(Path(compare)) if compare is not None else None
    out = Path(out) if out is not None else run_dir / "site"
    _check_out(out)
    sources = list(sources) if sources is not None else lab_sources()
    stems = [p.stem for p in sources]
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="servelab-site-") as tmp:
        src = Path(tmp) / "src"
        (src / "_static").mkdir(parents=True)
        (src / "_extra" / "data").mkdir(parents=True)
        print(f"site: {len(sources)} notebooks with the outputs of {run_dir}", file=say, flush=True)
        for path in sources:
            nbformat.write(pages.page(path, run, other, src / pages.FIGURES), src / f"{path.stem}.ipynb")
        has_report = (run_dir / "report.html").is_file()
        if has_report:
            shutil.copy2(run_dir / "report.html", src / "_extra" / "report.html")
        data = sorted(p.name for p in run_dir.iterdir() if p.is_file() and p.suffix in DATA_SUFFIXES)
        for name in data:
            shutil.copy2(run_dir / name, src / "_extra" / "data" / name)
        (src / "index.md").write_text(_index(run.provenance, other.provenance if other else None, stems,
                                             run.outcomes, has_report, data))
        (src / "_static" / "servelab.css").write_text(STYLE)
        settings = {"title": "serve-system lab",
                    "announcement": _announcement(run.provenance, other.provenance if other else None,
                                                  has_report)}
        (src / "settings.json").write_text(json.dumps(settings))
        (src / "conf.py").write_text(CONF)
        print(f"site: rendering {len(sources) + 1} pages with Sphinx (nothing is executed)", file=say,
              flush=True)
        warnings = io.StringIO()
        nocolor()
        # built under the temporary folder, then copied: myst-nb writes beside Sphinx's output folder
        html_dir = Path(tmp) / "build" / "html"
        app = Sphinx(str(src), str(src), str(html_dir), str(Path(tmp) / "build" / "doctrees"), "html",
                     status=None, warning=warnings, freshenv=True)
        app.build()
        if app.statuscode != 0:
            raise SiteError(f"Sphinx failed building the site: {warnings.getvalue()[-2000:]}")
        (html_dir / MARKER).write_text(json.dumps({"run": str(run_dir.resolve()), "compare": str(
            Path(compare).resolve()) if compare else None}))
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(html_dir, out)
        shown = [line for line in warnings.getvalue().splitlines() if line.strip()]
        for line in shown:
            print(f"site: {line}", file=sys.stderr)
    print(f"site: built {out} in {time.monotonic() - start:.1f} s", file=say, flush=True)
    return out
