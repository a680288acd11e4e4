"""The lab's GPU reference run beside a notebook's expectation: its rows for the step, where they computed,
and what today's rules read from them (``servelab.results.reference`` finds the run)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from servelab.lab.show import show
from servelab.lab.tables import Measured, show_columns

_NO_ROWS_SAID: set[str] = set()  # the reference calls of this kernel (one notebook) that said "no rows"

def reference(table: str, columns: Sequence[str], rules: Any = None, effects: Sequence[str] = (),
              **where: Any) -> pd.DataFrame | None:
    """The lab's GPU reference run's rows for this step (``servelab.results.reference``): its ``table``
    ("fastapi", "triton", "llm", "scaling") rows matching ``where`` (column == value, or in a list), shown
    as this notebook's tables are, under lines naming its host, where these rows computed (their own
    ``device``: a GPU host's row on its CPU says CPU) and the notebooks it ran. Evidence beside the
    expectation for the student's node, never captioned as that expectation. ``rules``: the step whose
    expected effects (those containing one of ``effects``, as ``what_this_run_shows``) today's code then
    reads from those rows. A notebook whose steps the reference lacks
    says so once (the first such call of the kernel, and that call again); later ones print nothing."""
    from servelab.results.reference import STUDENT_NODE, computed_on, describe, reference_rows, reference_run
    from servelab.results.schema import gpu_polled

    run = reference_run()
    rows = reference_rows(table, run)
    for key, value in where.items():  # a list of values picks any of them
        wanted = list(value) if isinstance(value, list | tuple) else [value]
        rows = rows[rows[key].isin(wanted)] if key in rows else rows.iloc[0:0]
    if run is None or rows.empty:
        call = f"{table} {sorted(where.items())!r}"
        if _NO_ROWS_SAID and call not in _NO_ROWS_SAID:
            return None  # said once in this notebook already
        _NO_ROWS_SAID.add(call)
        print(f"No GPU reference rows here: {describe(run)}." if run is not None else
              "No GPU reference rows: no reference run is set beside this lab (results/reference/ holds "
              "none, or SERVELAB_REFERENCE=none).")
        return None
    print(f"Evidence from a GPU beside the expectation above (which is for your {STUDENT_NODE} node), the "
          f"lab's reference rows (results/reference/README.md): measured by {describe(run)}.\nWhere these "
          f"rows computed: {computed_on(rows, run)}.")
    if gpu_polled(rows).any():  # RunData.load left their GPU % blank, not 0
        print("GPU % left blank: that run's monitor polled NVML, which reads 0 for runs this short "
              "(docs/decisions/2026-11-26-gpu-utilisation.md).")
    shown = show_columns(rows.reset_index(drop=True), columns)
    cores = rows["cpu_count"].dropna().iloc[0] if rows.get("cpu_count", pd.Series()).notna().any() else None
    if isinstance(shown, Measured):  # its CPU % is of that machine's cores, not of this one's: said here
        object.__setattr__(shown, "defines", f"CPU % there: 100 % = all {int(cores)} of its cores busy"
                           if cores and "cpu_util_pct" in columns else "")
    if rules is not None:
        _reference_readings(rules, run, effects)
    return shown

def _reference_readings(step: Any, run: Path, effects: Sequence[str] = ()) -> None:
    """``step``'s expected effects read by today's code from the reference run's rows (its own printed
    words came from the code that ran it), one line each, before the table."""
    from servelab.report.verdict import CANNOT_SHOW
    from servelab.results.schema import RunData

    checks = [replace(c, evidence=c.evidence.replace("this run", "that run"),
                      reason=c.reason.replace("this run", "that run"))
              for c in step.rules(RunData.load(run))
              if (not effects or any(words in c.effect for words in effects))
              and (c.status != CANNOT_SHOW or c.measured or c.evidence.startswith("this run cannot show it"))]
    if checks:  # a step the reference did not run has no numbers: left out
        from servelab.report.terms import DEFAULT_OVER, define
        from servelab.report.verdicts import block

        said = define("spread", over=getattr(step, "SPREAD_OVER", DEFAULT_OVER)) \
            if any(c.band is not None for c in checks) else ""
        print("Today's code reads that run's rows so:")
        show(block(checks, [said] if said else []))
