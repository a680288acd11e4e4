"""What this run shows: a lab step's expected effects checked on this run's rows, as verdicts a notebook
cell shows one line each (``servelab.report.verdicts``)."""

from __future__ import annotations

from typing import Any

from servelab.lab.show import show
from servelab.results.store import results_dir


class Verdicts(list[Any]):
    """The verdicts a cell showed (``servelab.report.verdict.Check``: ``status``, ``mark``, ``claim``,
    ``figures`` with their units, ``details``), in order; a cell ending in a call that returns them shows
    nothing more (they were shown already)."""

    def _ipython_display_(self) -> None:
        """IPython calls this instead of showing the value's repr (an empty execute_result is not sent)."""

    def lines(self) -> list[str]:
        """Each verdict's one line, as the cell showed it."""
        return [c.line() for c in self]

def what_this_run_shows(step: Any, *effects: str) -> Verdicts:
    """The step's expected effects whose text contains one of ``effects`` (all when none), checked on
    this run's data (``step.rules``): one line each (observed, NOT observed, too noisy to call, cannot
    show here; the claim; the figures compared) with the numbers, the band and the preconditions folded
    under it, and the legends this notebook has not shown yet (``servelab.report.verdicts.block``). A GPU
    effect not seen here says so: it is what to expect on the GPU node, not a failure. Shown; the
    verdicts returned (``Verdicts``)."""
    from servelab.report.terms import DEFAULT_OVER, define
    from servelab.report.verdicts import block
    from servelab.results.schema import RunData

    checks = [c for c in step.rules(RunData.load(results_dir()))
              if not effects or any(words in c.effect for words in effects)]
    if not checks:
        print(f"no expected effect matches {effects}")
        return Verdicts()
    spread = define("spread", over=getattr(step, "SPREAD_OVER", DEFAULT_OVER)) \
        if any(c.band is not None for c in checks) else ""
    show(block(checks, [spread] if spread else []))
    return Verdicts(checks)
