"""A second run beside this one (``--compare``, e.g. a GPU node's): for a cell where that run drew figures or
tables, a block with that run's figures next to this run's, each side captioned with where its measurements
ran (their rows' own ``device``: ``servelab.site.provenance``), with that run's tables (the cell's own, else
the nearest before its figure), its reading and a link to its report. Why and what it cannot do (each
figure keeps its own axes): docs/decisions/2026-11-26-handout-site-second-pass.md
"""

from __future__ import annotations

import copy
import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from servelab.site.outputs import (
    FigureFiles,
    figures_of,
    img,
    raw_html,
    reading_of,
    tables_of,
    without_figures,
)
from servelab.site.provenance import Run
from servelab.site.redact import Redactor

COMPARE = "compare"  # in the built site: the compared run's report and data
SCALE_NOTE = ("Each run's figure is drawn on its own axes: compare the numbers in the readings and tables, "
              "not the heights.")
OTHER_CODE = ("Only its figure: its tables and printed words came from other code than this run's (that "
              "run's code: {code}), so they are left out. Its rows as this run's code reads them: {where}.")


@dataclass
class Side:
    """One run's column in a compared cell: its caption, figures, reading, tables and report link."""

    caption: str
    figures: list[tuple[str, str]]  # (href, caption)
    reading: str = ""
    tables: list[str] = field(default_factory=list)
    report: str = ""
    css: str = "servelab-run"
    note: str = ""

    def markup(self) -> str:
        parts = [f'<div class="{self.css}">', f'<p class="servelab-where">{html.escape(self.caption)}</p>']
        for href, caption in self.figures:
            shown = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
            parts.append(f"<figure>{img(href, caption or self.caption)}{shown}</figure>")
        if self.note:
            parts.append(f'<p class="servelab-note">{html.escape(self.note)}</p>')
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

    def __init__(self, run: Run, compare: Run, stem: str, files: FigureFiles,
                 referenced: bool = False) -> None:
        """``referenced``: the notebook has a reference cell (``common.reference``), which shows that run's
        rows as the code of this run reads them."""
        self.run, self.compare, self.stem, self.files = run, compare, stem, files
        self.referenced = referenced
        self.blocks = 0  # the blocks this page got
        self.executed = compare.executed(stem)
        self.code = [c for c in self.executed.cells if c.cell_type == "code"] if self.executed else []
        self.redactor = Redactor.for_run(compare.folder, [self.executed])
        self.tables: list[str] = []  # that run's latest tables since its last figure
        # its printed words and tables are today's only when it ran this run's code (one known, clean commit)
        mine, theirs = run.provenance.commit, compare.provenance.commit
        self.same_code = bool(mine) and mine == theirs

    def caption(self, run: Run, executed: Any, cell: Any) -> str:
        return f"{run.where(executed, cell)} (run {run.provenance.run}, target {run.provenance.target})"

    def block(self, index: int, their_index: int, cell: Any, executed: Any, ran: Any) -> Any | None:
        """The block after ``cell`` (code cell ``index`` of the page, ``their_index`` of that run's notebook;
        its outputs are this run's, of ``ran``), or None; this run's figures move into the block."""
        their_cell = self.code[their_index]
        outputs = [self.redactor.output(copy.deepcopy(o)) for o in their_cell.get("outputs", [])]
        mine, theirs, tables = figures_of(cell.outputs), figures_of(outputs), tables_of(outputs)
        if not self.same_code:  # its words and tables are not today's: only what it drew
            tables = []
        self.tables = tables or self.tables
        if not theirs and not tables:
            return None
        figures = [(self.files.write(self.stem, index, "other", k, f), f.caption if self.same_code else "")
                   for k, f in enumerate(theirs)]  # its caption is printed words too
        shown = tables if tables or not theirs else self.tables[-1:]  # a figure's: the nearest table before
        note = "" if self.same_code else OTHER_CODE.format(
            code=self.compare.provenance.code,
            where="this notebook's reference cell, and its report" if self.referenced else "its report")
        sides = [Side(f"Beside: {self.caption(self.compare, self.executed, their_cell)}", figures,
                      reading_of(outputs) if theirs and self.same_code else "", shown, self.compare.report,
                      "servelab-run servelab-other", note)]
        if theirs and mine:
            cell.outputs = without_figures(cell.outputs)
            sides.insert(0, Side(f"This run: {self.caption(self.run, executed, ran)}",
                                 [(self.files.write(self.stem, index, "this", k, f), f.caption)
                                  for k, f in enumerate(mine)]))
        if theirs:
            self.tables = []
        self.blocks += 1
        return compared(sides, figures=bool(theirs))


def compared(sides: Sequence[Side], figures: bool) -> Any:
    note = f'<p class="servelab-note">{SCALE_NOTE}</p>' if figures and len(sides) > 1 else ""
    return raw_html('<div class="servelab-compare">\n' + "\n".join(s.markup() for s in sides) + "\n</div>"
                    + note)
