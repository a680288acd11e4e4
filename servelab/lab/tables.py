"""A notebook's results as tables: rows recorded under the run, joined, shown in the report's short
view (``Measured``), their utilisation columns, and which notebooks wrote each table (the registry of the
lab's steps)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from servelab.core.lab_steps import LAB_STEPS, written_by
from servelab.results.store import append_rows, read_rows, results_dir


def record(experiment: str, rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Append ``rows`` to the run's results and return them as a DataFrame."""
    append_rows(experiment, rows)
    return pd.DataFrame(list(rows))

def concat(*frames: pd.DataFrame) -> pd.DataFrame:
    """Several measurement tables as one (for a combined plot), shown short if they were."""
    joined = pd.concat(frames, ignore_index=True)
    kind = next((f.shown_as for f in frames if isinstance(f, Measured) and f.shown_as), None)
    return joined if kind is None else Measured.of(joined, kind)

def show_columns(df: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """``df``'s ``columns`` (those present), shown in a notebook as the report's short view
    (``servelab.report.figures.short_view``: its columns, headings and rounding); every column stays in the
    frame, unrounded, and in the CSVs."""
    present = [c for c in columns if c in df]
    if not present:
        return df
    return Measured.of(df[present], list(columns))

class Measured(pd.DataFrame):
    """A measurement table whose notebook display is the short view; its data is all there
    (``frame.columns``, plots, the run's CSV). Frames derived from it (a selection, a concat) keep it."""

    _metadata: ClassVar[list[str]] = ["shown_as", "made_with"]
    shown_as: list[str] | None = None  # the table's kind: TRITON_COLUMNS or FASTAPI_COLUMNS
    made_with: tuple[str, ...] = ()  # its columns when made: a frame with others is shown whole
    defines: str | None = None  # definitions of its columns new to this notebook, fixed at its first display

    @classmethod
    def of(cls, frame: pd.DataFrame, kind: list[str]) -> Measured:
        shown = cls(frame)
        shown.shown_as, shown.made_with = kind, tuple(frame.columns)
        return shown

    @property
    def _constructor(self) -> Any:
        return Measured

    def _short(self) -> pd.DataFrame | None:
        """The short view while the frame still has the columns it was made with (rows may be
        selected); a column selection, ``set_index``, ``groupby`` or ``.T`` shows the plain frame."""
        from servelab.report.figures import short_view, whole_numbers

        if not self.shown_as or self.empty or tuple(self.columns) != self.made_with:
            return None
        short = short_view(pd.DataFrame(self), self.shown_as)
        return None if short is None else whole_numbers(short)

    def _defines(self, short: pd.DataFrame) -> str:
        """What this table's columns mean, for the ones this notebook has not defined yet (the first
        table with a CPU % column says what 100 % is): decided once, at the first display."""
        if self.defines is None:
            from servelab.report.terms import define, used_in

            object.__setattr__(self, "defines", define(*used_in([str(c) for c in short.columns])))
        return self.defines or ""

    def _repr_html_(self) -> str | None:
        import html

        short = self._short()
        if short is None:
            return pd.DataFrame(self).to_html()
        hidden = len(self.columns) - len(short.columns)
        note = f"<p><small>{hidden} more columns in this frame and the run's CSV</small></p>" * bool(hidden)
        said = self._defines(short)
        terms = f"<p><small>{html.escape(said).replace(chr(10), '<br>')}</small></p>" if said else ""
        return short.to_html(index=False, border=0, na_rep="") + note + terms

    def __repr__(self) -> str:
        short = self._short()
        if short is None:
            return repr(pd.DataFrame(self))
        said = self._defines(short)
        return short.to_string(index=False, na_rep="") + (f"\n{said}" if said else "")

# which notebooks store rows under each experiment's name (the registry of the lab's steps)
WRITTEN_BY = {table: ", ".join(written_by(table))
              for table in dict.fromkeys(t for s in LAB_STEPS for t in s.tables)}

def results_overview(directory: Path | None = None) -> pd.DataFrame:
    """How many rows each experiment stored in this run's results, and which notebooks wrote them
    (``directory``: another results folder, e.g. what 08 copied from the node)."""
    directory = directory if directory is not None else results_dir()
    rows = [{"experiment": path.stem, "notebooks": WRITTEN_BY.get(path.stem, ""),
             "rows": len(read_rows(path.stem, directory)), "file": path.name}
            for path in sorted(directory.glob("*.jsonl"))]
    return pd.DataFrame(rows, columns=["experiment", "notebooks", "rows", "file"])

def measure_with_utilisation(call, *args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    """Run ``call`` while sampling CPU (and GPU) utilisation."""
    from servelab.core.monitor import Utilisation

    with Utilisation() as util:
        result = call(*args, **kwargs)
    return result, util.summary()

def util_columns(util: dict[str, Any]) -> dict[str, Any]:
    """The report's two utilisation columns, plus the monitor's detail."""
    gpus = [v for k, v in util.items()
            if k.startswith("gpu") and k.endswith("_util_mean_pct") and v is not None]
    return {"cpu_util_pct": util.get("cpu_mean_pct"),
            "gpu_util_pct": round(sum(gpus) / len(gpus), 1) if gpus else None,
            "utilisation": util}
