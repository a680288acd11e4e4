"""One page per notebook: the notebook's source as it is now, with the outputs one run recorded.

The source is the Jupytext ``notebooks/NN_name.py`` (the lab's one source): every markdown cell and
every code cell comes from it, so a changed notebook changes its page on the next build. A code cell
gets the outputs of the executed notebook's cell with the same source (papermill's ``NN_name.ipynb``
in the run's folder); a cell changed since the run is shown without outputs and says so, as is every
cell of a notebook the run did not reach. Papermill's injected-parameters cell is kept: it is what the
run was given. Every output is redacted (``servelab.site.redact``); a project file a cell prints
(``common.show_code``/``show_file``) is shown as highlighted code; a figure embedded in an HTML output is
written as a file of its own, so that it links to its full size like every other.

With a second run (``compare``, e.g. a GPU node's), a cell where that run drew figures or tables shows
them beside: its figures next to this run's, each side captioned with where its measurements ran (their
rows' own ``device``), with that run's tables (of the cell, else the nearest before it), its reading and
a link to its report. Each page starts with its links: the notebook to download, where to launch it, its
source in the repository; a ``docs/…`` file named in the prose is a link.
"""

from __future__ import annotations

import base64
import copy
import difflib
import functools
import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from servelab.site.links import Links, link_doc_references
from servelab.site.provenance import Provenance, measured_on, ran_between
from servelab.site.redact import Redactor

IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/svg+xml": "svg"}
INJECTED = "injected-parameters"
FIGURES = "_figures"  # in the built site: the figures this module writes (compared, or taken out of HTML)
COMPARE = "compare"  # in the built site: the compared run's report and data
DOWNLOADS = "notebooks"  # in the built site: each page's notebook, to download
_EMBEDDED = re.compile(r'<img\b[^>]*?\bsrc="data:(image/(?:png|jpeg|svg\+xml));base64,([^"]+)"[^>]*>', re.S)
_CAPTION = re.compile(r"<figcaption>(.*?)</figcaption>", re.S)
_LISTED = re.compile(r"^# (\S+?)(?:,| \()", re.M)  # common.show_code/show_file: "# path, lines …"
LANGUAGES = {".py": "python", ".sh": "bash", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml",
             ".json": "json", ".pbtxt": "protobuf", ".cfg": "ini", ".ini": "ini", ".md": "markdown",
             "Dockerfile": "docker", "Makefile": "make"}
SCALE_NOTE = ("Each run's figure is drawn on its own axes: compare the numbers in the readings and tables, "
              "not the heights.")


@dataclass(frozen=True)
class Run:
    """A run as the pages read it: its folder, its provenance and its notebooks' outcomes (run.json)."""

    folder: Path
    provenance: Provenance
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    report: str = ""  # the site's link to the run's report, "" when it has none

    def executed(self, stem: str) -> Any | None:
        """The run's executed copy of notebook ``stem``, or None when the run has none."""
        path = self.folder / f"{stem}.ipynb"
        return nbformat.read(path, as_version=4) if path.is_file() else None

    def where(self, executed: Any, cell: Any = None) -> str:
        """Where the measurements were taken (their rows' ``device``) that ``cell`` of the executed notebook
        stored, else (a cell that draws what earlier ones stored) that the whole notebook stored."""
        window = ran_between(cell)
        devices = measured_on(self.folder, window) if window is not None else {}
        return self.provenance.where(devices or measured_on(self.folder, ran_between(executed)))


def source_notebook(path: Path) -> Any:
    """The notebook's source (``NN_name.py``, read by Jupytext) as an nbformat notebook."""
    import jupytext

    return jupytext.read(path)


def title(path: Path) -> str:
    """The notebook's title: its first markdown heading (what the site's sidebar shows), else its name."""
    for cell in source_notebook(path).cells:
        found = re.search(r"^#\s+(.+?)\s*$", str(cell.source), re.M) if cell.cell_type == "markdown" else None
        if found:
            return found.group(1)
    return path.stem


def _key(cell: Any) -> str:
    return "\n".join(line.rstrip() for line in str(cell.source).strip().splitlines())


def _matches(source: Sequence[Any], executed: Sequence[Any]) -> dict[int, int]:
    """Source code cell index → executed code cell index, for cells whose source is unchanged, in order."""
    keys_a, keys_b = [_key(c) for c in source], [_key(c) for c in executed]
    matcher = difflib.SequenceMatcher(a=keys_a, b=keys_b, autojunk=False)
    return {block.a + k: block.b + k for block in matcher.get_matching_blocks() for k in range(block.size)}


def _note(text: str, kind: str = "note") -> Any:
    return nbformat.v4.new_markdown_cell(f":::{{{kind}}}\n{text}\n:::")


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in ``text``."""
    return "`" * max([3, *(len(run) + 1 for run in re.findall(r"`+", text))])


def raw_html(markup: str) -> Any:
    """A markdown cell holding ``markup`` as it is (MyST's raw directive: blank lines and all)."""
    fence = _fence(markup)
    return nbformat.v4.new_markdown_cell(f"{fence}{{raw}} html\n{markup}\n{fence}")


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _rich(output: Any) -> dict[str, Any]:
    return output.get("data", {}) if output.get("output_type") in ("display_data", "execute_result") else {}


@dataclass(frozen=True)
class Figure:
    """One figure of a cell's outputs: its file's extension, its bytes, the caption it came with."""

    ext: str
    data: bytes
    caption: str = ""


def figures_of(outputs: Sequence[Any]) -> list[Figure]:
    """The figures among a cell's outputs, in order: image outputs and images embedded in HTML outputs."""
    found = []
    for output in outputs:
        data = _rich(output)
        image = next(((mime, ext) for mime, ext in IMAGE_TYPES.items() if mime in data), None)
        if image is not None:
            text = _text(data[image[0]])
            found.append(Figure(image[1], text.encode() if image[1] == "svg" else base64.b64decode(text)))
        elif "text/html" in data:
            markup = _text(data["text/html"])
            caption = " ".join(html.unescape(re.sub(r"<[^>]+>", "", c)) for c in _CAPTION.findall(markup))
            for match in _EMBEDDED.finditer(markup):
                ext = IMAGE_TYPES[match.group(1)]
                found.append(Figure(ext, base64.b64decode(match.group(2)), caption.strip()))
    return found


def _has_figure(output: Any) -> bool:
    data = _rich(output)
    return any(m in data for m in IMAGE_TYPES) or bool(_EMBEDDED.search(_text(data.get("text/html", ""))))


def _without_figures(outputs: Sequence[Any]) -> list[Any]:
    return [o for o in outputs if not _has_figure(o)]


def tables_of(outputs: Sequence[Any]) -> list[str]:
    """The HTML tables among a cell's outputs (a DataFrame's ``_repr_html_``), in order."""
    return [_text(_rich(o)["text/html"]) for o in outputs
            if "<table" in _text(_rich(o).get("text/html", "")) and not _has_figure(o)]


def reading_of(outputs: Sequence[Any]) -> str:
    """What a cell printed (its reading of the numbers), less the lines that name a saved plot's file."""
    printed = "".join(_text(o["text"]) for o in outputs if o.get("output_type") == "stream")
    lines = [line for line in printed.splitlines() if not line.startswith("plot saved: ")]
    return "\n".join(lines).strip()


class FigureFiles:
    """Writes figures under ``folder`` (the site's ``_figures/``) as ``<stem>-cell<N>-<side>-<k>.<ext>``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def write(self, stem: str, index: int, side: str, k: int, figure: Figure) -> str:
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"{stem}-cell{index}-{side}-{k}.{figure.ext}"
        (self.folder / name).write_bytes(figure.data)
        return f"{FIGURES}/{name}"


def _img(href: str, alt: str) -> str:
    """An image that opens at its full size when tapped."""
    return (f'<a class="servelab-full" href="{href}" title="open full size">'
            f'<img src="{href}" alt="{html.escape(alt)}"></a>')


def _externalised(outputs: Sequence[Any], write: Callable[[int, Figure], str]) -> list[Any]:
    """The outputs with each figure embedded in an HTML output written as a file and linked from there."""
    done, count = [], 0
    for output in outputs:
        data = _rich(output)
        markup = _text(data.get("text/html", ""))
        if "text/html" in data and _EMBEDDED.search(markup):
            def to_file(match: re.Match[str]) -> str:
                nonlocal count
                ext = IMAGE_TYPES[match.group(1)]
                href = write(count, Figure(ext, base64.b64decode(match.group(2))))
                count += 1
                alt = re.search(r'\balt="([^"]*)"', match.group(0))
                return _img(href, html.unescape(alt.group(1)) if alt else "figure")

            output = copy.deepcopy(output)
            output["data"]["text/html"] = _EMBEDDED.sub(to_file, markup)
        done.append(output)
    return done


def _listing(source: str, outputs: list[Any]) -> list[Any]:
    """A cell that prints project files (``common.show_code``/``show_file``): its printout as highlighted
    code, one block per file, in the language of the file's name. Other cells' outputs are left as is."""
    if not re.match(r"\s*(common\.)?show_(code|file)\(", source):
        return outputs
    done = []
    for output in outputs:
        if output.get("output_type") != "stream":
            done.append(output)
            continue
        text = _text(output["text"])
        starts = [m.start() for m in _LISTED.finditer(text)] or [0]
        blocks = []
        for begin, end in zip([0, *starts[1:]], [*starts[1:], len(text)], strict=True):
            chunk = text[begin:end].rstrip("\n")
            named = _LISTED.match(chunk)
            path = Path(named.group(1)) if named else Path()
            language = LANGUAGES.get(path.suffix) or LANGUAGES.get(path.name, "text")
            fence = _fence(chunk)
            blocks.append(f"{fence}{language}\n{chunk}\n{fence}")
        done.append(nbformat.v4.new_output("display_data", data={"text/markdown": "\n\n".join(blocks),
                                                                 "text/plain": text}))
    return done


def _linked(outputs: list[Any], docs: Callable[[str], str] | None) -> list[Any]:
    """The outputs with each ``docs/…`` file a markdown output names made a link (copies: the download
    keeps the outputs as they are)."""
    done = []
    for output in outputs:
        markdown = _rich(output).get("text/markdown")
        if markdown is not None and docs:
            output = copy.deepcopy(output)
            output["data"]["text/markdown"] = link_doc_references(_text(markdown), docs)
        done.append(output)
    return done


@dataclass
class Side:
    """One run's column in a compared cell: its caption, figures, reading, tables and report link."""

    caption: str
    figures: list[tuple[str, str]]  # (href, caption)
    reading: str = ""
    tables: list[str] = field(default_factory=list)
    report: str = ""
    css: str = "servelab-run"

    def markup(self) -> str:
        parts = [f'<div class="{self.css}">', f'<p class="servelab-where">{html.escape(self.caption)}</p>']
        for href, caption in self.figures:
            shown = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
            parts.append(f"<figure>{_img(href, caption or self.caption)}{shown}</figure>")
        if self.reading:
            parts.append(f'<pre class="servelab-reading">{html.escape(self.reading)}</pre>')
        parts += [f'<div class="servelab-table">{table}</div>' for table in self.tables]
        if self.report:
            parts.append(f'<p class="servelab-report"><a href="{self.report}">Its report: every measurement, '
                         "its readings and its expected effects</a></p>")
        return "\n".join(parts) + "\n</div>"


class Beside:
    """The second run's side of one page: for each cell, that run's figures, tables and reading beside this
    run's (see above), or nothing."""

    def __init__(self, run: Run, compare: Run, stem: str, files: FigureFiles) -> None:
        self.run, self.compare, self.stem, self.files = run, compare, stem, files
        self.executed = compare.executed(stem)
        self.code = [c for c in self.executed.cells if c.cell_type == "code"] if self.executed else []
        self.redactor = Redactor.for_run(compare.folder, [self.executed])
        self.tables: list[str] = []  # that run's latest tables since its last figure

    def caption(self, run: Run, executed: Any, cell: Any) -> str:
        return f"{run.where(executed, cell)} (run {run.provenance.run}, target {run.provenance.target})"

    def block(self, index: int, their_index: int, cell: Any, executed: Any, ran: Any) -> Any | None:
        """The block after ``cell`` (code cell ``index`` of the page, ``their_index`` of that run's notebook;
        its outputs are this run's, of ``ran``), or None; this run's figures move into the block."""
        their_cell = self.code[their_index]
        outputs = [self.redactor.output(copy.deepcopy(o)) for o in their_cell.get("outputs", [])]
        mine, theirs, tables = figures_of(cell.outputs), figures_of(outputs), tables_of(outputs)
        self.tables = tables or self.tables
        if not theirs and not tables:
            return None
        figures = [(self.files.write(self.stem, index, "other", k, f), f.caption)
                   for k, f in enumerate(theirs)]
        shown = tables if tables or not theirs else self.tables[-1:]  # a figure's: the nearest table before
        sides = [Side(f"Beside: {self.caption(self.compare, self.executed, their_cell)}", figures,
                      reading_of(outputs) if theirs else "", shown, self.compare.report,
                      "servelab-run servelab-other")]
        if theirs and mine:
            cell.outputs = _without_figures(cell.outputs)
            sides.insert(0, Side(f"This run: {self.caption(self.run, executed, ran)}",
                                 [(self.files.write(self.stem, index, "this", k, f), f.caption)
                                  for k, f in enumerate(mine)]))
        if theirs:
            self.tables = []
        return _compared(sides, figures=bool(theirs))


def _compared(sides: Sequence[Side], figures: bool) -> Any:
    note = f'<p class="servelab-note">{SCALE_NOTE}</p>' if figures and len(sides) > 1 else ""
    return raw_html('<div class="servelab-compare">\n' + "\n".join(s.markup() for s in sides) + "\n</div>"
                    + note)


def _links_cell(stem: str, links: Links, download: bool) -> Any:
    parts = []
    if download:
        parts.append(f'<a class="servelab-download" href="{DOWNLOADS}/{stem}.ipynb" download>'
                     "Download this notebook (.ipynb, with this run's outputs)</a>")
    parts.append(f'<a class="servelab-launch" href="{html.escape(links.launch)}">{links.launch_label}</a>')
    source = links.file(f"notebooks/{stem}.py")
    if source:
        parts.append(f'<a class="servelab-source" href="{html.escape(source)}">'
                     "Its source in the repository</a>")
    return raw_html('<p class="servelab-links">' + " · ".join(parts) + "</p>")


def page(source_path: Path, run: Run, compare: Run | None, figures: Path, links: Links | None = None,
         docs: Callable[[str], str] | None = None) -> tuple[Any, Any]:
    """The page's notebook for ``source_path`` and the notebook a reader downloads (the source's cells
    with the run's redacted outputs), see above. ``figures``: the folder the figure files go to (the
    site's ``_figures/``); ``docs``: a ``docs/…`` file named in the prose or a markdown output → its link."""
    stem = source_path.stem
    links = links or Links()
    files = FigureFiles(figures)
    page_nb = source_notebook(source_path)
    download = copy.deepcopy(page_nb)
    executed = run.executed(stem)
    outcome = run.outcomes.get(stem)
    redactor = Redactor.for_run(run.folder, [executed])
    executed_code = [c for c in executed.cells if c.cell_type == "code"] if executed else []
    injected = next((c for c in executed_code if INJECTED in c.metadata.get("tags", [])), None)
    executed_code = [c for c in executed_code if c is not injected]
    beside = Beside(run, compare, stem, files) if compare is not None else None
    code = [c for c in page_nb.cells if c.cell_type == "code"]
    matched = _matches(code, executed_code)
    other_matched = _matches(code, beside.code) if beside is not None else {}
    cells: list[Any] = []
    if executed is None or outcome is None:
        cells.append(_note(f"Run {run.provenance.run} did not run this notebook: its code is shown "
                           "without outputs."))
    elif not outcome.get("ok", True):
        cells.append(_note(f"This notebook stopped in run {run.provenance.run}: "
                           f"`{outcome.get('error', '')}`. Cells after that point have no outputs.",
                           "warning"))
    changed = 0
    bar = _links_cell(stem, links, download=executed is not None)
    if not page_nb.cells or page_nb.cells[0].cell_type != "markdown":
        cells.insert(0, bar)  # under the title when the notebook starts with one, else first
    for position, cell in enumerate(page_nb.cells):
        if cell.cell_type != "code":
            if docs:
                cell.source = link_doc_references(str(cell.source), docs)
            cells.append(cell)
            if position == 0:
                cells.append(bar)
            continue
        index = code.index(cell)
        cell.outputs, cell.execution_count = [], None
        ran = None
        if index in matched:
            ran = executed_code[matched[index]]
            outputs = [redactor.output(copy.deepcopy(o)) for o in ran.get("outputs", [])]
            download.cells[position].outputs = copy.deepcopy(outputs)
            download.cells[position].execution_count = ran.get("execution_count")
            cell.outputs = _listing(str(cell.source), _linked(outputs, docs))
            cell.execution_count = ran.get("execution_count")
        elif executed is not None:
            changed += 1
            cells.append(cell)
            cells.append(_note(f"This cell changed after run {run.provenance.run}: its output is not shown."))
            continue
        cells.append(cell)
        block = beside.block(index, other_matched[index], cell, executed, ran) \
            if beside is not None and index in other_matched else None
        cell.outputs = _externalised(cell.outputs, functools.partial(files.write, stem, index, "this"))
        if block is not None:
            cells.append(block)
        if injected is not None and "parameters" in cell.metadata.get("tags", []):
            cells.append(_note(f"The parameters run {run.provenance.run} was given (papermill):"))
            cells.append(nbformat.v4.new_code_cell(injected.source,
                                                   outputs=list(injected.get("outputs", []))))
    page_nb.cells = cells
    page_nb.metadata["servelab"] = {"changed_cells": changed}
    return page_nb, download
