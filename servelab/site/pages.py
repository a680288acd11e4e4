"""One page per notebook: the notebook's source as it is now, with the outputs one run recorded.

The source is the Jupytext ``notebooks/NN_name.py`` (the lab's one source): every markdown cell and
every code cell comes from it, so a changed notebook changes its page on the next build. A code cell
gets the outputs of the executed notebook's cell with the same source (papermill's ``NN_name.ipynb``
in the run's folder); a cell changed since the run is shown without outputs and says so, as is every
cell of a notebook the run did not reach. Papermill's injected-parameters cell is kept: it is what the
run was given. With a second run (``compare``, e.g. a GPU node's), a cell whose figures both runs drew
shows them side by side, each captioned with where it ran.
"""

from __future__ import annotations

import base64
import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from servelab.site.provenance import Provenance

IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/svg+xml": "svg"}
INJECTED = "injected-parameters"
FIGURES = "_figures"  # under the Sphinx source folder: the side-by-side figures' files


@dataclass(frozen=True)
class Run:
    """A run as the pages read it: its folder, its provenance and its notebooks' outcomes (run.json)."""

    folder: Path
    provenance: Provenance
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)

    def executed(self, stem: str) -> Any | None:
        """The run's executed copy of notebook ``stem``, or None when the run has none."""
        path = self.folder / f"{stem}.ipynb"
        return nbformat.read(path, as_version=4) if path.is_file() else None


def source_notebook(path: Path) -> Any:
    """The notebook's source (``NN_name.py``, read by Jupytext) as an nbformat notebook."""
    import jupytext

    return jupytext.read(path)


def _key(cell: Any) -> str:
    return "\n".join(line.rstrip() for line in str(cell.source).strip().splitlines())


def _matches(source: Sequence[Any], executed: Sequence[Any]) -> dict[int, int]:
    """Source code cell index → executed code cell index, for cells whose source is unchanged, in order."""
    keys_a, keys_b = [_key(c) for c in source], [_key(c) for c in executed]
    matcher = difflib.SequenceMatcher(a=keys_a, b=keys_b, autojunk=False)
    return {block.a + k: block.b + k for block in matcher.get_matching_blocks() for k in range(block.size)}


def _note(text: str, kind: str = "note") -> Any:
    return nbformat.v4.new_markdown_cell(f":::{{{kind}}}\n{text}\n:::")


def _images(outputs: Sequence[Any]) -> list[tuple[str, bytes]]:
    """The figures among a cell's outputs, as (extension, bytes), in order."""
    found = []
    for output in outputs:
        data = output.get("data", {}) if output.get("output_type") in ("display_data", "execute_result") \
            else {}
        for mime, ext in IMAGE_TYPES.items():
            if mime in data:
                raw = data[mime]
                raw = "".join(raw) if isinstance(raw, list) else raw
                found.append((ext, raw.encode() if ext == "svg" else base64.b64decode(raw)))
                break
    return found


def _without_images(outputs: Sequence[Any]) -> list[Any]:
    return [o for o in outputs if not (o.get("output_type") in ("display_data", "execute_result")
                                       and any(m in o.get("data", {}) for m in IMAGE_TYPES))]


def _side_by_side(stem: str, index: int, runs: Sequence[tuple[Provenance, list[tuple[str, bytes]]]],
                  figures: Path) -> Any:
    """A markdown cell with each run's figures of one cell in a column of their own."""
    figures.mkdir(parents=True, exist_ok=True)
    columns = []
    for column, (provenance, images) in enumerate(runs):
        where = f"GPU {provenance.gpu}" if provenance.on_gpu else "CPU only"
        parts = []
        for k, (ext, data) in enumerate(images):
            name = f"{stem}-cell{index}-run{column}-{k}.{ext}"
            (figures / name).write_bytes(data)
            caption = f"{where}: run {provenance.run}, target {provenance.target}" if k == 0 else where
            parts.append(f":::{{figure}} {FIGURES}/{name}\n:alt: figure {k + 1} of this cell on "
                         f"{where}\n\n{caption}\n:::")
        columns.append("::::{container} servelab-run\n" + "\n\n".join(parts) + "\n::::")
    return nbformat.v4.new_markdown_cell("::::::{container} servelab-compare\n" + "\n\n".join(columns)
                                         + "\n::::::")


def page(source_path: Path, run: Run, compare: Run | None, figures: Path) -> Any:
    """The page's notebook for ``source_path``: its source's cells with ``run``'s outputs (see above)."""
    stem = source_path.stem
    page_nb = source_notebook(source_path)
    executed = run.executed(stem)
    outcome = run.outcomes.get(stem)
    executed_code = [c for c in executed.cells if c.cell_type == "code"] if executed else []
    injected = next((c for c in executed_code if INJECTED in c.metadata.get("tags", [])), None)
    executed_code = [c for c in executed_code if c is not injected]
    other = compare.executed(stem) if compare else None
    other_code = [c for c in other.cells if c.cell_type == "code"] if other else []
    code = [c for c in page_nb.cells if c.cell_type == "code"]
    matched = _matches(code, executed_code)
    other_matched = _matches(code, other_code)
    cells: list[Any] = []
    if executed is None or outcome is None:
        cells.append(_note(f"Run {run.provenance.run} did not run this notebook: its code is shown "
                           "without outputs."))
    elif not outcome.get("ok", True):
        cells.append(_note(f"This notebook stopped in run {run.provenance.run}: "
                           f"`{outcome.get('error', '')}`. Cells after that point have no outputs.",
                           "warning"))
    changed = 0
    for cell in page_nb.cells:
        if cell.cell_type != "code":
            cells.append(cell)
            continue
        index = code.index(cell)
        cell.outputs, cell.execution_count = [], None
        if index in matched:
            ran = executed_code[matched[index]]
            cell.outputs, cell.execution_count = list(ran.get("outputs", [])), ran.get("execution_count")
        elif executed is not None:
            changed += 1
            cells.append(cell)
            cells.append(_note(f"This cell changed after run {run.provenance.run}: its output is not shown."))
            continue
        cells.append(cell)
        if compare is not None and index in other_matched:
            mine, theirs = _images(cell.outputs), _images(other_code[other_matched[index]].get("outputs", []))
            if mine and theirs:
                cell.outputs = _without_images(cell.outputs)
                cells.append(_side_by_side(stem, index, [(run.provenance, mine),
                                                         (compare.provenance, theirs)], figures))
        if injected is not None and "parameters" in cell.metadata.get("tags", []):
            cells.append(_note(f"The parameters run {run.provenance.run} was given (papermill):"))
            cells.append(nbformat.v4.new_code_cell(injected.source,
                                                   outputs=list(injected.get("outputs", []))))
    page_nb.cells = cells
    page_nb.metadata["servelab"] = {"changed_cells": changed}
    return page_nb
