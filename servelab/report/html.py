"""The run's report: one self-contained HTML page drawn from the results data only.

``write_report(run_dir, steps)`` reads the measurements the notebooks stored under ``run_dir``,
lets each lab step it is given draw its sections (``servelab.lab.stepNN_*.sections``: plots
embedded as PNG with a one-line reading computed from the numbers) and states which expected
effects this run observed (each step's ``rules``); ``servelab.lab.run_report`` passes the lab's.
Nothing is copied from the notebooks' outputs, so the report can be redrawn for any
results folder (``python -m servelab.lab report results/<run> [--compare results/<other>]``).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from servelab.report.effects import NOISE_NOTE, Check
from servelab.report.figures import Section, fig_utilisation, plot_html, read_util, table_html
from servelab.results.schema import FASTAPI, RunData, load


class ReportStep(Protocol):
    """A lab step as the report sees it (``servelab.lab.stepNN_*``): its sections and its rules."""

    def sections(self, data: RunData) -> list[Section]: ...
    def rules(self, data: RunData) -> list[Check]: ...


def expected_effects(steps: Sequence[ReportStep], data: RunData) -> list[Check]:
    """Every step's expected effects, checked on ``data``, in the steps' order."""
    return [c for step in steps for c in step.rules(data)]


def sections(run_dir: Path, steps: Sequence[ReportStep], compare: Path | None = None) -> list[Section]:
    """Every section of the report, in the steps' order."""
    data = RunData.load(run_dir)
    out: list[Section] = [_machine_section(run_dir, data.fastapi, data.triton)]
    for step in steps:
        out += step.sections(data)
    fastapi = data.fastapi
    util = pd.concat([fastapi.assign(step=fastapi.get("step", "fastapi")) if not fastapi.empty else fastapi,
                      data.triton], ignore_index=True)
    if not util.empty and "cpu_util_pct" in util:
        out.append(Section("CPU / GPU utilisation during each run", [
            plot_html(fig_utilisation(util), read_util(util))]))
    recovered = _recoveries(data.triton)
    if not recovered.empty:
        out.append(Section("What the runner recovered from", [
            f"<p>{len(recovered)} measurement(s) needed a second perf_analyzer run or went without their "
            "warm-up; their numbers are kept, and this says which.</p>",
            table_html(recovered, ["step", "label", "retried", "warmup", "throughput", "p99_ms"])]))
    out.append(_effects_section(steps, data, compare))
    return out


def _recoveries(triton: pd.DataFrame) -> pd.DataFrame:
    """The Triton rows whose perf_analyzer run was retried or whose warm-up was skipped."""
    if triton.empty:
        return triton
    def text(column: str) -> pd.Series:
        return triton[column].fillna("").astype(str) if column in triton else pd.Series("", triton.index)

    return triton[(text("retried").str.len() > 0) | text("warmup").str.startswith("skipped")]


def _machine_section(run_dir: Path, *frames: pd.DataFrame) -> Section:
    facts: dict[str, Any] = {}
    for df in frames:
        if not df.empty:
            facts = {k: df.iloc[0][k] for k in ("host", "cpu_count", "gpu", "platform", "python") if k in df}
            break
    run_file = Path(run_dir) / "run.json"
    if run_file.exists():
        run = json.loads(run_file.read_text())
        facts.update({"preset": run.get("preset"), "target": run.get("target"),
                      "total time (s)": run.get("seconds"), "all notebooks passed": run.get("ok"),
                      "1-min load average before / after the run (contention)":
                          f"{run.get('load_average_before')} / {run.get('load_average_after')} "
                          f"on {run.get('cpu_count')} cores"})
        timings = pd.DataFrame(run.get("notebooks", []))
        steps = pd.DataFrame(run.get("steps", []))  # a chameleon run: provisioning, the node's run, teardown
        # a chameleon run: what it created or adopted on the testbed, and whether teardown deleted it
        resources = pd.DataFrame(run.get("chameleon", {}).get("resources", []))
    else:
        timings = steps = resources = pd.DataFrame()
    parts = [pd.DataFrame({"fact": list(facts), "value": [str(v) for v in facts.values()]})
             .to_html(index=False, border=0, classes="data")]
    if not steps.empty:
        parts.append(table_html(steps, ["step", "seconds", "ok", "detail"]))
    if not resources.empty:
        parts.append(table_html(resources, ["kind", "name", "origin", "fate", "detail"]))
    if not timings.empty:
        parts.append(table_html(timings, ["name", "seconds", "ok", "error"]))
    return Section("Machine and run", parts)


def _effects_section(steps: Sequence[ReportStep], data: RunData, compare: Path | None = None) -> Section:
    checks = expected_effects(steps, data)
    other: list[Check] = []
    other_name = ""
    if compare is not None:
        other = expected_effects(steps, RunData.load(compare))
        facts = load(compare, FASTAPI)
        other_name = f"{Path(compare).name} ({facts.iloc[0].get('gpu', '?')})" if not facts.empty else ""
    others: list[Check | None] = list(other) if other else [None] * len(checks)
    rows = "".join(
        f'<tr class="{c.status.replace(" ", "-")}"><td>{html.escape(c.effect)}'
        f'{" <small>(a GPU effect)</small>" if c.gpu_only else ""}</td>'
        f"<td>{c.status}</td><td>{html.escape(c.evidence)}</td>"
        + (f"<td>{o.status}: {html.escape(o.evidence)}</td>" if o is not None else "")
        + "</tr>" for c, o in zip(checks, others, strict=True))
    seen = sum(c.status == "observed" for c in checks)
    summary = (f"<p>{seen} of {len(checks)} expected effects observed in this run. "
               f"{html.escape(NOISE_NOTE)}</p>")
    head = ("<tr><th>expected effect</th><th>this run</th><th>numbers</th>"
            + (f"<th>compared run {html.escape(other_name)}</th>" if other else "") + "</tr>")
    table = f'<table class="data effects">{head}{rows}</table>'
    return Section("The lab's expected effects: observed in this run?", [summary, table])


STYLE = """
body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;border-bottom:1px solid #ccc;margin-top:2em}
table.data{border-collapse:collapse;font-size:.8em;margin:.5em 0}
table.data td,table.data th{border:1px solid #ddd;padding:2px 6px;text-align:right}
figure{margin:1em 0}img{max-width:100%}figcaption{font-style:italic;font-size:.9em}
tr.observed td:nth-child(2){color:#070}tr.not-observed td:nth-child(2){color:#a00}
tr.not-measured td:nth-child(2){color:#777}.effects td{text-align:left}
"""


def render(run_dir: Path, steps: Sequence[ReportStep], compare: Path | None = None) -> str:
    """The whole report as one HTML string (plots embedded); ``compare``: another run (e.g. on a GPU)."""
    body = "".join(f"<section><h2>{html.escape(s.title)}</h2>{''.join(s.parts)}</section>"
                   for s in sections(run_dir, steps, compare))
    title = f"serve-system lab — results of {Path(run_dir).name}"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>")


def write_report(run_dir: Path, steps: Sequence[ReportStep], compare: Path | None = None) -> Path:
    """Write ``run_dir/report.html`` from the results in ``run_dir``; returns its path.

    ``compare`` names another run's folder (a GPU run, say) whose expected-effect
    checks are shown next to this run's.
    """
    path = Path(run_dir) / "report.html"
    path.write_text(render(Path(run_dir), steps, Path(compare) if compare else None))
    return path
