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

import copy
import difflib
import functools
import html
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import nbformat

from servelab.site.compare import Beside
from servelab.site.links import Links, link_doc_references
from servelab.site.outputs import FigureFiles, externalised, linked, listing, raw_html
from servelab.site.provenance import Run
from servelab.site.redact import Redactor

INJECTED = "injected-parameters"
DOWNLOADS = "notebooks"  # in the built site: each page's notebook, to download


def source_notebook(path: Path) -> Any:
    """The notebook's source (``NN_name.py``, read by Jupytext) as an nbformat notebook, without its model
    answers (cells tagged ``answer-key``: the instructor's answer key, never a handout's)."""
    import jupytext

    from servelab.lab.exercise import KEY_TAG

    nb = jupytext.read(path)
    nb.cells = [c for c in nb.cells if KEY_TAG not in c.metadata.get("tags", [])]
    return nb


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


def _links_cell(stem: str, links: Links, ran: bool) -> Any:
    outputs = "with this run's outputs" if ran else "without outputs: the run did not reach it"
    parts = [f'<a class="servelab-download" href="{DOWNLOADS}/{stem}.ipynb" download>'
             f"Download this notebook (.ipynb, {outputs})</a>"]
    note = links.launch_note(stem)
    parts.append(f'<a class="servelab-launch" href="{html.escape(links.launch_for(stem))}">'
                 f"{html.escape(links.launch_label(stem), quote=False)}</a>"
                 + (f" ({html.escape(note, quote=False)})" if note else ""))
    source = links.file(f"notebooks/{stem}.py")
    if source:
        parts.append(f'<a class="servelab-source" href="{html.escape(source)}">'
                     f"Its source in the repository (notebooks/{stem}.py)</a>")
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
    code = [c for c in page_nb.cells if c.cell_type == "code"]
    referenced = any("common.reference(" in str(c.source) for c in code)
    beside = Beside(run, compare, stem, files, referenced) if compare is not None else None
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
    bar = _links_cell(stem, links, ran=executed is not None)
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
            listed = listing(str(cell.source), outputs)  # a show_code listing stays code, never linked
            cell.outputs = listed if listed is not outputs else linked(outputs, docs)
            cell.execution_count = ran.get("execution_count")
        elif executed is not None:
            changed += 1
            cells.append(cell)
            cells.append(_note(f"This cell changed after run {run.provenance.run}: its output is not shown."))
            continue
        cells.append(cell)
        block = beside.block(index, other_matched[index], cell, executed, ran) \
            if beside is not None and index in other_matched else None
        cell.outputs = externalised(cell.outputs, functools.partial(files.write, stem, index, "this"))
        if block is not None:
            cells.append(block)
        if injected is not None and "parameters" in cell.metadata.get("tags", []):
            cells.append(_note(f"The parameters run {run.provenance.run} was given (papermill):"))
            cells.append(nbformat.v4.new_code_cell(injected.source,
                                                   outputs=list(injected.get("outputs", []))))
    page_nb.cells = cells
    page_nb.metadata["servelab"] = {"changed_cells": changed, "beside": beside.blocks if beside else 0}
    return page_nb, download
