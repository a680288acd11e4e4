"""Build the handout site for one run: Sphinx with myst-nb, nothing executed, a folder any static host serves.

``build(run_dir)`` writes ``run_dir/site/`` (or ``out``): an index with the run's provenance and the
notebooks in order, one page per notebook (``servelab.site.pages``), each notebook to download
(``notebooks/``), the run's ``report.html`` (with a link back to the handout) and its data files
(``data/``), all redacted (``servelab.site.redact``). Every page carries the run's provenance in its
banner. ``compare`` names a second run (a GPU node's, or a reference run's folder) set beside this run's,
its report and data under ``compare/``. Every figure links to its full size. ``default_compare`` is the
committed reference run the command line puts beside when given none. Why Sphinx + myst-nb, what a build
costs: docs/decisions/2026-11-25-handout-site.md; what the second pass added and measured:
docs/decisions/2026-11-26-handout-site-second-pass.md
"""

from __future__ import annotations

import html
import io
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import nbformat

from servelab.core.lab_steps import numbers, ranges
from servelab.core.paths import ON_THE_NODE
from servelab.lab.runner import notebook_paths
from servelab.results.reference import STUDENT_NODE, STUDENT_NODE_LONG, newest
from servelab.results.store import results_dir
from servelab.site import guides as guide_pages
from servelab.site import pages
from servelab.site.compare import COMPARE
from servelab.site.docs import DocPages
from servelab.site.links import Links
from servelab.site.outputs import FIGURES
from servelab.site.provenance import Provenance, Run, RunFolderError, measured_on, read, run_json
from servelab.site.redact import LAB, Redactor

MARKER = ".servelab-site"  # in a built site: a rebuild may replace that folder, and only that
DATA_SUFFIXES = (".csv", ".jsonl", ".json")
STATIC = Path(__file__).parent / "static"  # servelab.css, servelab.js
CONF = """# written by servelab.site.build: the site's Sphinx configuration
import json
from pathlib import Path

settings = json.loads((Path(__file__).parent / "settings.json").read_text())
project = settings["title"]
html_title = settings["title"]
extensions = ["myst_nb"]
nb_execution_mode = "off"  # the run's outputs, never re-executed
nb_merge_streams = True
nb_render_markdown_format = "myst"  # a markdown output's tables and code render (commonmark has neither)
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3  # a guide's links to its own sections (#two-commands) work as on GitHub
html_theme = "furo"
html_theme_options = {"announcement": settings["announcement"]}
html_static_path = ["_static"]
html_css_files = ["servelab.css"]
html_js_files = ["servelab.js"]
html_extra_path = ["_extra"]
html_copy_source = False
html_show_copyright = False
html_show_sourcelink = False
exclude_patterns = ["_extra", "_build", "settings.json"]
# a decision note's headings may skip a level, and its links may name files that are not pages
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header", "myst.xref_missing"]


def page_banner(app, pagename, templatename, context, doctree):  # each page's own banner (what sits beside)
    banner = settings["announcements"].get(pagename, settings["announcement"])
    context["theme_announcement"] = banner.replace("{root}", "../" * pagename.count("/"))


def setup(app):
    app.connect("html-page-context", page_banner)
"""


class SiteError(RuntimeError):
    """The site could not be built; the message says what to fix."""


def newest_run(base: Path | None = None) -> Path:
    """The run folder under ``results/`` (``$SERVELAB_RESULTS``) that began last (``reference.newest``)."""
    base = Path(base or results_dir())
    run = newest(base)
    if run is None:
        raise RunFolderError(f"no run in {base}: run the lab first (./lab run) or name a run's folder")
    return run


def run_folder(folder: Path) -> Path:
    """``folder`` when it is a run's folder, else the newest run in it (a downloaded artifact, a
    ``results/reference/`` folder)."""
    folder = Path(folder)
    return folder if (folder / "run.json").is_file() else newest_run(folder)


def default_compare(base: Path | None = None) -> Path | None:
    """The committed reference run the command line puts beside, as the lab's reports choose it
    (``servelab.results.reference.reference_run``: ``$SERVELAB_REFERENCE``, else the newest under
    ``results/reference/``); None when there is none."""
    from servelab.results.reference import REFERENCE_DIR, reference_run

    return reference_run(Path(base) if base else REFERENCE_DIR)


def covers(compare: Run, short: bool = False) -> str:
    """What a second run is and covers, for the index: "the lab's GPU reference run h100 (one NVIDIA H100 80GB
    HBM3 host; notebooks 03 and 09 only, not 04, 05, 06, 07, 10 or 11)"; ``short``, for the banner: "the lab's
    GPU reference run h100 (NVIDIA H100 80GB HBM3; notebooks 03 and 09 only)"."""
    from servelab.results.reference import REFERENCE_DIR, coverage

    folder = compare.folder.resolve()
    kind = "the lab's GPU reference run" if folder.is_relative_to(REFERENCE_DIR.resolve()) else "run"
    gpu = compare.provenance.gpu if compare.provenance.on_gpu else ""
    host = (gpu or "no GPU") if short else f"one {gpu} host" if gpu else "a machine without a GPU"
    covered = coverage(compare.folder)
    return f"{kind} {compare.provenance.run} ({host}; {covered.split(', not ')[0] if short else covered})"


def _announcement(run: Provenance, compare: Run | None, has_report: bool, beside: bool | None) -> str:
    """A page's banner: where its outputs come from (``run``), the student's node, and the second run:
    "beside them" only on a notebook's page where something of it sits beside (``beside``), else that
    nothing does; on other pages (``beside`` None), what it covers. ``{root}``: the way to the site's top."""
    text = f"Outputs from {html.escape(run.line())}. Your node: {STUDENT_NODE}."
    if compare is not None:
        other = html.escape(covers(compare, short=True))
        if beside is None:
            text += f" Beside the notebooks' outputs: {other}."
        elif beside:
            text += f" Beside them on this page: {other}."
        else:
            text += f" Nothing of {other} beside this page."
    if has_report:
        text += ' <a href="{root}report.html">The run\'s report</a>.'
    return text


def _index(run: Run, compare: Run | None, sources: Sequence[Path], links: Links,
           data: Sequence[str], guides: tuple[list[str], list[str]] = ([], [])) -> str:
    rows = "\n".join(f"| {k} | {v} |" for k, v in run.provenance.facts().items())

    def row(path: Path) -> str:
        stem = path.stem
        link = f"[{pages.title(path)}]({stem}.ipynb)"
        if stem not in run.outcomes:
            return f"| {link} | not run | |"
        outcome = run.outcomes[stem]
        status = "ok" if outcome.get("ok") else "stopped"
        return f"| {link} | {status} | {outcome.get('seconds', '')} |"

    ran = "\n".join(row(path) for path in sources)
    address = html.escape(links.repo)
    repo = (f'The lab\'s repository: <a href="{address}">{address}</a> (clone it into Chameleon\'s Jupyter: '
            f"<code>git clone {address}</code>); each page links its notebook's source there."
            if links.repo else
            "This site was built without the lab repository's address (`--repo`, `SERVELAB_REPO_URL`, the "
            "CI's, pyproject.toml's or the checkout's origin): its pages link no sources; each page's "
            "notebook is there to download.")
    parts = [
        "# serve-system lab: the handout",
        "Read the lab before your lease: every notebook in order, with its code, configs and commands, "
        "and the outputs of one real run of the whole lab. Outputs come from the run named below and "
        "from nowhere else; your own run, on your own node, measures its own numbers.",
        f"**Your node**: {STUDENT_NODE_LONG} ({STUDENT_NODE}), reserved in 01. Notebooks "
        f"{ranges(numbers('hub'))} run in Chameleon's Jupyter; {ON_THE_NODE} in the Jupyter server that 02 "
        "starts on your node. Each "
        "page links where to open its notebook. The notebooks' **Expected on the GPU node** paragraphs are "
        "for your node, from the original lab's recorded runs on it.",
        repo,
        *guides[0],
        "## Where these outputs come from", "| fact | value |\n|---|---|\n" + rows,
        f"In the outputs, `{LAB}` stands for the lab's folder on the machine that ran it, `results/<run>` "
        "for the run's folder, and `serve_system_<netID>` for a lease named after whoever ran it.",
    ]
    if compare is not None:
        other = "\n".join(f"| {k} | {v} |" for k, v in compare.provenance.facts().items())
        where = compare.provenance.where(measured_on(compare.folder, keep_unrecorded=True))
        parts += [f"## Beside them: {covers(compare).split(' (')[0]}",
                  f"It is {covers(compare)}: evidence from another machine, not your node. Where this "
                  "run and that one both drew figures (in the same cell), its figures sit beside, each "
                  "captioned with where its measurements ran (their own records: a GPU machine's measurement "
                  "on its CPU says CPU). Its tables and printed words sit beside only where it ran the same "
                  "code as this run; otherwise the notebooks' reference cells show its rows as this run's "
                  f"code reads them. Where its rows computed: {where}.",
                  "| fact | value |\n|---|---|\n" + other]
        if compare.report:
            parts.append(f'Its report: <a href="{compare.report}">{compare.report}</a>.')
    parts += ["## The notebooks", "| notebook | in this run | seconds |\n|---|---|---|\n" + ran]
    if run.report:
        parts.append("The run's report, its verdict and every expected effect checked on its data: "
                     f'<a href="{run.report}">report.html</a>.')
    if data:
        joined = ", ".join(f'<a href="data/{name}">{name}</a>' for name in data)
        parts.append(f"The run's measurements: {joined}.")
    parts.append("```{toctree}\n:hidden:\n:maxdepth: 1\n:caption: Notebooks\n\n"
                 + "\n".join(p.stem for p in sources) + "\n```")
    return "\n\n".join([*parts, *guides[1]]) + "\n"


def _check_out(out: Path) -> None:
    """A rebuild replaces a site built here, or fills an empty folder; anything else is left alone."""
    if out.exists() and not (out / MARKER).exists() and any(out.iterdir()):
        raise SiteError(f"{out} exists and is not a site built here: name an empty or new folder (--out)")


def _run(folder: Path, report: str = "") -> Run:
    outcomes = {n["name"]: n for n in run_json(folder).get("notebooks", []) if isinstance(n, dict)}
    return Run(Path(folder), read(folder), outcomes, report)


def lab_sources() -> list[Path]:
    """The lab's notebooks in order, each as its Jupytext source (``NN_name.py``) where it has one."""
    return [p.with_suffix(".py") if p.with_suffix(".py").is_file() else p for p in notebook_paths()]


def _redactor(run_dir: Path) -> Redactor:
    """The run's redactions, from the folders its executed notebooks recorded (papermill)."""
    notebooks = [nbformat.read(p, as_version=4) for p in sorted(Path(run_dir).glob("*.ipynb"))[:1]]
    return Redactor.for_run(run_dir, notebooks)


def copy_report(source: Path, target: Path, redactor: Redactor, handout: str) -> None:
    """A run's ``report.html`` for the site: redacted, laid out for a phone's width (a report written before
    it carried the viewport tag gets one), with the site's style and script and a link back to ``handout``."""
    text = redactor.text(source.read_text(errors="replace"), escape=True)
    static = "../" * handout.count("../") + "_static"
    head = f'<link rel="stylesheet" href="{static}/servelab.css"><script src="{static}/servelab.js"></script>'
    if 'name="viewport"' not in text and "name='viewport'" not in text:
        head = '<meta name="viewport" content="width=device-width, initial-scale=1">' + head
    text = re.sub(r"</head>", lambda _: head + "</head>", text, count=1, flags=re.I)
    back = f'<p class="servelab-back"><a href="{handout}">← back to the handout</a></p>'
    text = re.sub(r"<body[^>]*>", lambda m: m.group(0) + back, text, count=1, flags=re.I)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def _copy_run_files(run_dir: Path, extra: Path, prefix: str, handout: str) -> tuple[str, list[str]]:
    """The run's report and data files into ``extra/prefix``; (the report's link or "", the data's names)."""
    redactor = _redactor(run_dir)
    report = ""
    if (run_dir / "report.html").is_file():
        copy_report(run_dir / "report.html", extra / prefix / "report.html", redactor, handout)
        report = f"{prefix}report.html"
    data = sorted(p.name for p in run_dir.iterdir() if p.is_file() and p.suffix in DATA_SUFFIXES)
    (extra / prefix / "data").mkdir(parents=True, exist_ok=True)
    for name in data:
        redactor.file(run_dir / name, extra / prefix / "data" / name)
    # Model Analyzer's summaries (notebook 11), where its page links them: the same path as in the run
    for summary in sorted(run_dir.glob("model-analyzer/*/export/reports/summaries/*/result_summary.html")):
        (extra / prefix / summary.relative_to(run_dir)).parent.mkdir(parents=True, exist_ok=True)
        redactor.file(summary, extra / prefix / summary.relative_to(run_dir))
    return report, data


_IMG = re.compile(r"<img\b[^>]*>")


def link_full_size(markup: str) -> str:
    """Every image of a page that is not already a link made one to its own file (its full size)."""
    def wrap(match: re.Match[str]) -> str:
        start = match.start()
        if markup.rfind("<a ", 0, start) > markup.rfind("</a>", 0, start):
            return match.group(0)  # already inside a link
        src = re.search(r'\bsrc="([^"]+)"', match.group(0))
        if src is None or src.group(1).startswith("data:"):
            return match.group(0)
        return (f'<a class="servelab-full" href="{src.group(1)}" title="open full size">'
                f"{match.group(0)}</a>")

    return _IMG.sub(wrap, markup)


def build(run_dir: Path, out: Path | None = None, compare: Path | None = None,
          sources: Sequence[Path] | None = None, log: io.TextIOBase | None = None,
          links: Links | None = None, guides: Sequence[Path] | None = None) -> Path:
    """Build the site for the run in ``run_dir`` into ``out`` (default ``run_dir/site``); returns ``out``.

    ``compare``: a second run's folder, or a folder of runs (its newest). ``sources``: the notebooks to
    render, in order (default: the lab's, ``lab_sources()``). ``links``: where pages link out (default:
    found, ``Links.find``). ``guides``: the guides to add as pages (default: the lab's,
    ``servelab.site.guides.guide_paths()``).
    """
    from sphinx.application import Sphinx
    from sphinx.util.console import nocolor

    say = log if log is not None else sys.stdout
    run_dir = Path(run_dir)
    compare = run_folder(compare) if compare is not None else None
    links = links if links is not None else Links.find()
    out = Path(out) if out is not None else run_dir / "site"
    _check_out(out)
    sources = list(sources) if sources is not None else lab_sources()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="servelab-site-") as tmp:
        src = Path(tmp) / "src"
        extra = src / "_extra"
        (src / "_static").mkdir(parents=True)
        extra.mkdir()
        print(f"site: {len(sources)} notebooks with the outputs of {run_dir}"
              + (f", {compare} beside" if compare else ""), file=say, flush=True)
        if not links.repo:
            print("site: no repository address (--repo, $SERVELAB_REPO_URL, the CI's, pyproject.toml's "
                  "[project.urls] or origin): the pages link no sources, and the index says so", file=say,
                  flush=True)
        report, data = _copy_run_files(run_dir, extra, "", "index.html")
        run = _run(run_dir, report)
        other = None
        if compare is not None:
            other_report, _ = _copy_run_files(compare, extra, f"{COMPARE}/", "../index.html")
            other = _run(compare, other_report)
        docs = DocPages(links, src)
        guides = list(guides) if guides is not None else guide_pages.guide_paths()
        names = [docs.add_guide(path, guide_pages.fills(run_dir)) for path in guides]
        (extra / pages.DOWNLOADS).mkdir()
        banners = {}
        for path in sources:
            page, download = pages.page(path, run, other, extra / FIGURES, links, docs.href)
            nbformat.write(page, src / f"{path.stem}.ipynb")
            nbformat.write(download, extra / pages.DOWNLOADS / f"{path.stem}.ipynb")
            banners[path.stem] = _announcement(run.provenance, other, bool(report),
                                               page.metadata["servelab"]["beside"] > 0)
        docs.write()
        guide_pages.copy_diagram(guides, src)
        (src / "index.md").write_text(_index(run, other, sources, links, data,
                                             guide_pages.index_section(guides, names)))
        for asset in STATIC.iterdir():
            shutil.copy2(asset, src / "_static" / asset.name)
        settings = {"title": "serve-system lab", "announcements": banners,
                    "announcement": _announcement(run.provenance, other, bool(report), None)}
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
        for built in html_dir.glob("*.html"):
            built.write_text(link_full_size(built.read_text()))
        # names only: the site is published, the building machine's folders are not
        (html_dir / MARKER).write_text(json.dumps({"run": run_dir.resolve().name,
                                                   "compare": compare.resolve().name if compare else None}))
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(html_dir, out)
        shown = [line for line in warnings.getvalue().splitlines() if line.strip()]
        for line in shown:
            print(f"site: {line}", file=sys.stderr)
    print(f"site: built {out} in {time.monotonic() - start:.1f} s", file=say, flush=True)
    return out

