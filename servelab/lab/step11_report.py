"""Notebook 11's report and rules, and its views of the run's data: the configurations Model Analyzer
measured (plot, table, its summary linked), your configuration and its pick side by side as the lab measured
them, and the expected effects (``rules``). The measuring: ``step11_model_analyzer``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from servelab.lab.step11_model_analyzer import MODEL, PICK, SEARCH_COLUMNS, YOURS
from servelab.lab.tables import Measured
from servelab.report.effects import Check, Quantity, cannot_show, check, chosen, row, spread, unusable, usable
from servelab.report.figures import Section, as_image, figure, finish, plot_html, table_html
from servelab.results.schema import TRITON_COLUMNS, RunData, num, relative_spread, step_rows
from servelab.results.store import results_dir

# what a verdict's "(spread …)" spans here (servelab.report.terms)
# the verdict the report's first screen gives as this step's one line (servelab.report.html.headline)
HEADLINE = "pick serves more than your configuration"
SPREAD_OVER = ("perf_analyzer's last three windows of each level, and for your configuration, measured "
               "twice, the two readings")


def side_by_side(data: RunData | None = None) -> pd.DataFrame:
    """Your configuration's rows and the pick's (the lab's measurements, this run's data), and what Model
    Analyzer measured for its pick, as one table."""
    data = data if data is not None else RunData.load(results_dir())
    triton = step_rows(data.triton, "your_configuration", "model_analyzer_pick")
    found = _search(data.model_analyzer)
    rows = [{"who": "yours (lab)" if r["step"] == YOURS else "Model Analyzer's pick (lab)",
             "configuration": r.get("configuration", ""), "throughput": r.get("throughput"),
             "p99_ms": r.get("p99_ms"), "queue_ms": r.get("queue_ms"),
             "compute_infer_ms": r.get("compute_infer_ms")} for _, r in triton.iterrows()]
    pick = _picked(found)
    if pick is not None:
        rows.append({"who": "Model Analyzer's pick (its own run)", "configuration": pick["configuration"],
                     "throughput": pick["throughput"], "p99_ms": pick["p99_ms"],
                     "queue_ms": pick.get("queue_ms"), "compute_infer_ms": pick.get("compute_infer_ms")})
    columns = ["who", "configuration", "throughput", "p99_ms", "queue_ms", "compute_infer_ms"]
    return Measured.of(pd.DataFrame(rows, columns=columns), columns)



def _picked(found: pd.DataFrame) -> pd.Series | None:
    if found.empty or "picked" not in found:
        return None
    last = found[found["search"] == found["search"].iloc[-1]] if "search" in found else found
    picked = last[last["picked"] == True]  # noqa: E712
    return picked.iloc[0] if not picked.empty else None


def _search(found: pd.DataFrame) -> pd.DataFrame:
    """The last search's rows (a notebook run twice by hand holds two)."""
    if found.empty or "search" not in found:
        return found
    return found[found["search"] == found["search"].iloc[-1]]


def fig_search(found: pd.DataFrame) -> Any:
    """Each configuration Model Analyzer measured: throughput against p99, the budget as a line."""
    fig, ax = figure()
    ok = found["within_budget"] == True  # noqa: E712
    for mask, marker, name in ((ok, "o", "meets the budget"), (~ok, "x", "over the budget")):
        part = found[mask]
        ax.plot(num(part, "p99_ms"), num(part, "throughput"), marker, linestyle="", label=name)
        for _, r in part.iterrows():
            ax.annotate(str(r["variant"]).replace(f"{MODEL}_", ""), (r["p99_ms"], r["throughput"]),
                        fontsize=7, xytext=(3, 3), textcoords="offset points")
    bound = num(found, "p99_budget_ms").dropna()
    if not bound.empty:
        ax.axvline(float(bound.iloc[-1]), color="grey", linestyle="--", label="p99 budget")
    return finish(fig, ax, "p99 latency (ms)", "throughput (images/s)",
                  "Model Analyzer's search: each configuration it measured")


def read_search(found: pd.DataFrame) -> str:
    if found.empty:
        return "no configuration measured"
    met = int((found["within_budget"] == True).sum())  # noqa: E712
    pick = _picked(found)
    said = f"{met} of {len(found)} configurations met the p99 budget"
    return said + (f"; ranked first: {pick['configuration']} ({pick['throughput']:.1f} images/s, p99 "
                   f"{pick['p99_ms']:.1f} ms)" if pick is not None else "")


def plot_search(found: pd.DataFrame) -> Any:
    """The search's plot and its reading; the reading alone when nothing was measured."""
    print(read_search(_search(found)))
    return as_image(fig_search(_search(found))) if not found.empty else None


def sections(data: RunData) -> list[Section]:
    """The configurations Model Analyzer measured (plot and table, its report linked), then yours and its
    pick as the lab measured them. Drawn without Model Analyzer's or Triton's packages (the controller's
    environment draws the report too)."""
    out = []
    found = _search(data.model_analyzer)
    if not found.empty:
        search = str(found["search"].iloc[-1]) if "search" in found else "search-1"
        href = f"model-analyzer/{search}/export/reports/summaries/{MODEL}/result_summary.html"
        out.append(Section("Model Analyzer: the configurations it measured", [
            plot_html(fig_search(found), read_search(found)), table_html(found, SEARCH_COLUMNS),
            f'<p><a href="{href}">Model Analyzer\'s own summary report</a> (HTML, in the run\'s folder '
            f'under model-analyzer/{search}/).</p>']))
    both = step_rows(data.triton, "your_configuration", "model_analyzer_pick")
    if not both.empty:
        out.append(Section("Model Analyzer: its pick beside your configuration",
                           [table_html(both, TRITON_COLUMNS)]))
    return out


def rules(data: RunData) -> list[Check]:
    """Model Analyzer found a configuration within the budget; the lab measures its pick within the budget
    too; its pick serves more than yours at the constraint's concurrency (both measured by the lab, the
    noise band from their windows and from your two readings), or it picked yours."""
    found = _search(data.model_analyzer)
    triton = step_rows(data.triton, "your_configuration", "model_analyzer_pick")
    pick = _picked(found)
    ran = not found.empty
    why_not = None if ran else "Model Analyzer did not run (not on this target: the notebook said why)"
    met = ("Model Analyzer found a configuration within the p99 budget at the constraint's concurrency")
    found_check = (cannot_show(met, why_not) if why_not else check(
        met, (float((found["within_budget"] == True).sum()),),  # noqa: E712
        lambda n: n > 0, lambda n: f"{int(n)} of {len(found)} configurations ({read_search(found)})",
        figures=lambda n: (Quantity("within the budget", n, f"of {len(found)} configurations"),)))
    budget = row(found, "p99_budget_ms")
    binds = "The p99 budget binds: at least one configuration Model Analyzer measured misses it"
    over = float((found["within_budget"] != True).sum()) if ran else None  # noqa: E712
    binds_check = cannot_show(binds, why_not) if why_not else check(
        binds, (over, budget), lambda n, b: n > 0,
        lambda n, b: f"{int(n)} of {len(found)} configurations over p99 ≤ {b:.0f} ms (their p99s "
                     f"{_p99s(found)})",
        figures=lambda n, b: (Quantity("over the budget", n, f"of {len(found)} configurations"),
                              Quantity("budget", b, "ms")))
    yours, yours_spread = row(triton, "throughput", step=YOURS), spread(triton, "throughput", step=YOURS)
    readings = num(usable_rows(triton, YOURS), "throughput").dropna()
    repeat = relative_spread(readings.tolist()) if len(readings) >= 2 else None
    noise_yours = max(x for x in (yours_spread, repeat, 0.0) if x is not None) or None
    theirs, theirs_spread = row(triton, "throughput", step=PICK), spread(triton, "throughput", step=PICK)
    bound = float(pick["p99_budget_ms"]) if pick is not None else None
    serves = "Model Analyzer's pick serves more than your configuration at the constraint's concurrency"
    within = "Model Analyzer's pick stays within the p99 budget when the lab measures it"
    blocked = why_not or (None if pick is not None else "no configuration met the p99 budget: it picked none")
    same = _same(triton, pick)
    return [
        found_check,
        check(within, (bound, row(triton, "p99_ms", step=PICK)), lambda b, p99: p99 <= b,
              lambda b, p99: f"p99 {p99:.1f} ms, budget {b:.0f} ms", noise=(None, spread(triton, "p99_ms",
                                                                                      step=PICK)),
              unit="ms", blocked=blocked or unusable(triton, step=PICK), names=("budget", "the pick's p99")),
        check(serves, (yours, theirs), lambda a, b: b > a,
              lambda a, b: f"yours {a:.1f} images/s, its pick {b:.1f} ({(b - a) / a:+.0%})",
              noise=(noise_yours, theirs_spread), unit="images/s", names=("yours", "its pick"),
              blocked=blocked or same or unusable(triton, step=YOURS) or unusable(triton, step=PICK)),
        binds_check,
    ]


def _p99s(found: pd.DataFrame) -> str:
    return ", ".join(f"{v:.0f}" for v in num(found, "p99_ms").dropna()) + " ms"


def usable_rows(triton: pd.DataFrame, step: str) -> pd.DataFrame:
    return usable(triton[triton["step"] == step]) if not triton.empty else triton


def _knob(value: object) -> str:
    """A configuration's setting as one text whatever pandas made of it: a whole number stored as a
    float (a column the rows of the other Triton notebooks leave empty: 2.0) reads "2", a flag
    "True"/"False"."""
    if value is None or str(value) in ("True", "False"):  # a bool, numpy's too
        return str(value)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    return str(int(number)) if number == number and number.is_integer() else str(value)


def _same(triton: pd.DataFrame, pick: pd.Series | None) -> str | None:
    """Why there is nothing to compare when Model Analyzer picked the configuration you measured."""
    if pick is None:
        return None
    mine = chosen(triton, "throughput", step=YOURS)
    if mine is None:
        return None
    knobs = (("instance_count", "instances"), ("max_batch_size", "max_batch_size"),
             ("dynamic_batching", "dynamic_batching"))
    if all(_knob(mine.get(a)) == _knob(pick.get(b)) for a, b in knobs):
        return f"Model Analyzer picked your own configuration ({pick['configuration']}): nothing to compare"
    return None
