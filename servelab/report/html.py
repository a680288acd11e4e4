"""The run's report: one self-contained HTML page drawn from the results data only.

``write_report(run_dir, notebooks)`` reads the measurements the notebooks stored under ``run_dir``,
leads with the verdict (one row per notebook: whether it ran, its time, its expected effects by status,
its warnings and recoveries), lets each lab step draw its sections (``servelab.lab.stepNN_*.sections``:
plots embedded as PNG with a one-line reading computed from the numbers) and states which expected
effects this run observed (each step's ``rules``); ``servelab.lab.run_report`` passes the lab's.
Nothing is copied from the notebooks' outputs, so the report can be redrawn for any
results folder (``python -m servelab.lab report results/<run> [--compare results/<other>]``).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from servelab.report.effects import CANNOT_SHOW, NOT_OBSERVED, OBSERVED, STATUSES, Check, noise_note
from servelab.report.figures import Section, fig_utilisation, plot_html, table_html
from servelab.report.readings import read_util
from servelab.report.terms import glossary
from servelab.report.verdicts import LEGEND, report_html
from servelab.results.code import describe_code
from servelab.results.schema import RunData, device_of


class ReportModule(Protocol):
    """A lab step's module as the report sees it (``servelab.lab.stepNN_*``): its sections and its rules."""

    def sections(self, data: RunData) -> list[Section]: ...
    def rules(self, data: RunData) -> list[Check]: ...


@dataclass(frozen=True)
class Notebook:
    """A notebook as the report sees it: the modules of its lab step that draw its sections and check its
    effects, and the names of the Triton rows it measured (its warnings and recoveries are counted)."""

    name: str
    modules: tuple[ReportModule, ...] = ()
    rows: tuple[str, ...] = ()


def expected_effects(modules: Sequence[ReportModule], data: RunData) -> list[Check]:
    """Every module's expected effects, checked on ``data``, in the modules' order."""
    return [c for module in modules for c in module.rules(data)]


def sections(run_dir: Path, notebooks: Sequence[Notebook], compare: Path | None = None) -> list[Section]:
    """Every section of the report: the verdict, the machine, the lab steps' in order, the details."""
    data = RunData.load(run_dir)
    modules = [module for notebook in notebooks for module in notebook.modules]
    out: list[Section] = [verdict_section(run_dir, notebooks, data),
                          _machine_section(run_dir, data.fastapi, data.triton)]
    for module in modules:
        out += module.sections(data)
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
            table_html(recovered, ["step", "label", "retried", "warmup", "throughput", "p99_ms"])],
            "recovered"))
    warned = _warned(data.triton)
    if not warned.empty:
        out.append(Section("perf_analyzer's warnings", [
            f"<p>{len(warned)} measurement(s) came with a warning from perf_analyzer (an unsettled "
            "window, say); their numbers are kept.</p>",
            table_html(warned, ["step", "label", "warnings", "throughput", "p99_ms"])], "warnings"))
    out.append(_effects_section(notebooks, data, compare))
    out.append(_glossary_section(data))
    return out


def _text(df: pd.DataFrame, column: str) -> pd.Series:
    """A column as text, '' where missing (and everywhere when ``df`` lacks it)."""
    return df[column].fillna("").astype(str) if column in df else pd.Series("", df.index)


def _recoveries(triton: pd.DataFrame) -> pd.DataFrame:
    """The Triton rows whose perf_analyzer run was retried or whose warm-up was skipped."""
    if triton.empty:
        return triton
    retried, warmup = _text(triton, "retried"), _text(triton, "warmup")
    return triton[(retried.str.len() > 0) | warmup.str.startswith("skipped")]


def _warned(triton: pd.DataFrame) -> pd.DataFrame:
    """The Triton rows that carry a warning from perf_analyzer."""
    return triton if triton.empty else triton[_text(triton, "warnings").str.strip().str.len() > 0]


def _run_json(run_dir: Path) -> dict[str, Any]:
    run_file = Path(run_dir) / "run.json"
    return dict(json.loads(run_file.read_text())) if run_file.exists() else {}


def _machine_section(run_dir: Path, *frames: pd.DataFrame) -> Section:
    facts: dict[str, Any] = {}
    for df in frames:
        if not df.empty:
            facts = {k: df.iloc[0][k] for k in ("host", "cpu_count", "gpu", "platform", "python") if k in df}
            break
    run = _run_json(run_dir)
    if run:
        facts.update({"preset": run.get("preset"), "target": run.get("target"),
                      "code that ran": describe_code(run.get("code")),
                      "total time (s)": run.get("seconds"), "all notebooks passed": run.get("ok"),
                      "1-min load average before / after the run (contention)":
                          f"{run.get('load_average_before')} / {run.get('load_average_after')} "
                          f"on {run.get('cpu_count')} cores"})
        # a chameleon run's phases: provisioning, the node's run, teardown (``steps`` before 2026-12-01)
        phases = pd.DataFrame(run.get("phases", run.get("steps", []))).rename(columns={"step": "phase"})
        # a chameleon run: what it created or adopted on the testbed, and whether teardown deleted it
        resources = pd.DataFrame(run.get("chameleon", {}).get("resources", []))
    else:
        phases = resources = pd.DataFrame()
    parts = [pd.DataFrame({"fact": list(facts), "value": [str(v) for v in facts.values()]})
             .to_html(index=False, border=0, classes="data"),
             '<p><small>What the figures mean: <a href="#glossary">at the end</a>.</small></p>']
    if not phases.empty:
        parts.append(table_html(phases, ["phase", "seconds", "ok", "detail"]))
    if not resources.empty:
        parts.append(table_html(resources, ["kind", "name", "origin", "fate", "detail"]))
    return Section("Machine and run", parts)


def _glossary_section(data: RunData) -> Section:
    """What the marks and the figures mean, once, at the end of the page."""
    cores = next((int(c) for df in (data.fastapi, data.triton) if "cpu_count" in df
                  for c in pd.to_numeric(df["cpu_count"], errors="coerce").dropna()), None)
    return Section("What the marks and the figures mean", [
        f"<p>{html.escape(LEGEND)}</p><ul>"
        + "".join(f"<li>{html.escape(line)}</li>" for line in glossary(cores)) + "</ul>"], "glossary")


def headline(notebook: Notebook, data: RunData) -> str:
    """One sentence for the notebook, computed from its data: the line of the verdict its first step names
    as its lesson (``HEADLINE``: words of that effect), else of its first verdict that the run settled one
    way, else its first; "" when it has none."""
    checks = expected_effects(notebook.modules, data)
    words = next((getattr(m, "HEADLINE", "") for m in notebook.modules if getattr(m, "HEADLINE", "")),
                 "")
    named = [c for c in checks if words and words in c.effect and c.measured]
    settled = [c for c in checks if c.status in (OBSERVED, NOT_OBSERVED)]
    found = named or settled or [c for c in checks if c.status != CANNOT_SHOW or c.measured] or checks
    return found[0].line() if found else ""


def _count(checks: Sequence[Check]) -> dict[str, int]:
    return {status: sum(c.status == status for c in checks) for status in STATUSES}


def effects_summary(checks: Sequence[Check]) -> str:
    """One sentence: how many expected effects were observed, and how many fell in each other status."""
    counts = _count(checks)
    rest = ", ".join(f"{counts[s]} {s}" for s in STATUSES[1:])
    return f"{counts['observed']} of {len(checks)} expected effects observed in this run ({rest})"


def verdict_section(run_dir: Path, notebooks: Sequence[Notebook], data: RunData) -> Section:
    """The report's first screen: one row per notebook (whether it ran, its time, its expected effects by
    status, its warnings and recoveries), then the whole run's row."""
    run = _run_json(run_dir)
    ran = {str(n.get("name")): n for n in run.get("notebooks", [])}
    lab = {n.name: n for n in notebooks}
    names = [*ran, *(name for name in lab if name not in ran)]
    recovered, warned = _recoveries(data.triton), _warned(data.triton)
    head = "".join(f"<th>{h}</th>" for h in ("notebook", "ran", "seconds", *STATUSES,
                                             "warnings and recoveries"))
    rows, every = [], []
    for name in names:
        notebook, timing = lab.get(name, Notebook(name)), ran.get(name, {})
        checks = expected_effects(notebook.modules, data)
        every += checks
        status = ("ok" if timing.get("ok") else "FAILED") if timing else ("not run" if run else "")
        notes = [html.escape(str(timing["error"]))] if timing.get("error") else []
        for rows_of, what, anchor in ((warned, "with a perf_analyzer warning", "warnings"),
                                      (recovered, "recovered", "recovered")):
            n = int(rows_of["step"].isin(notebook.rows).sum()) if notebook.rows and "step" in rows_of else 0
            if n:
                notes.append(f'<a href="#{anchor}">{n} measurement(s) {what}</a>')
        rows.append(_verdict_row(name, status, timing.get("seconds"), checks if notebook.modules else None,
                                 "; ".join(notes) or ("none" if status == "ok" else "")))
    total = "ok" if run.get("ok") else ("FAILED" if run else "")
    rows.append(_verdict_row("the whole run", total, run.get("seconds"), every, "", "total"))
    failed = [n for n in names if ran.get(n, {}).get("ok") is False]
    passed = (f"Notebook {', '.join(failed)} FAILED." if failed else "Every notebook ran." if run.get("ok")
              else "The run FAILED." if run else "")
    if run.get("error"):  # a chameleon run's own failure (provisioning, the node, teardown)
        passed += f" {run['error']}"
    lines = [(name, headline(lab[name], data)) for name in names if name in lab and lab[name].modules]
    said = "".join(f"<li><b>{html.escape(name)}</b>: {html.escape(line)}</li>"
                   for name, line in lines if line)
    heads = f'<ul class="headlines">{said}</ul>' if said else ""
    summary = (f"<p><strong>{html.escape(passed)}</strong> What each notebook showed, in one line:</p>{heads}"
               f"<p><strong>{html.escape(effects_summary(every))}.</strong> "
               f'<a href="#effects">Each verdict, its numbers folded under it</a>, at the end. '
               f"{html.escape(noise_note(_devices(data)))}</p>")
    table = f'<table class="data verdict"><tr>{head}</tr>{"".join(rows)}</table>'
    return Section("Verdict", [summary, table], "verdict")


def _verdict_row(name: str, status: str, seconds: Any, checks: Sequence[Check] | None, notes: str,
                 css: str = "") -> str:
    counts = _count(checks) if checks is not None else {}
    cells = "".join(f'<td class="{s.replace(" ", "-") if counts.get(s) else ""}">{counts.get(s, "")}</td>'
                    for s in STATUSES)
    return (f'<tr class="{css}"><td>{html.escape(name)}</td>'
            f'<td class="{status.replace(" ", "-")}">{status}</td>'
            f"<td>{'' if seconds is None else seconds}</td>{cells}<td>{notes}</td></tr>")


def run_devices(data: RunData) -> str:
    """Where a run's engines computed, from its rows' own ``device``: "FastAPI pt on the GPU (NVIDIA H100
    80GB HBM3), FastAPI onnx on the CPU, Triton food_classifier on the GPU (...)"."""
    parts = []
    for kind, df, key in (("FastAPI", data.fastapi, "backend"), ("Triton", data.triton, "model")):
        if df.empty or key not in df:
            continue
        for name in dict.fromkeys(df[key].dropna()):
            where = device_of(df, **{key: name})
            parts.append(f"{kind} {name} on the {where}" if where else f"{kind} {name}")
    return ", ".join(parts) or "no measurements"


def run_on_gpu(data: RunData) -> bool:
    """Did any of the run's rows (FastAPI, Triton, the LLM engine) compute on a GPU?"""
    return any(str(d).startswith("cuda") for d in _devices(data))


def _devices(data: RunData) -> list[Any]:
    """Every row's ``device`` (FastAPI, Triton, the LLM engine), for ``noise_note``."""
    return [d for df in (data.fastapi, data.triton, data.llm) if "device" in df for d in df["device"]]


def _effects_section(notebooks: Sequence[Notebook], data: RunData, compare: Path | None = None) -> Section:
    """Every verdict, one line each under its notebook's name, what backs it folded; with ``compare``,
    the compared run's outcome and figures at the end of each line."""
    modules = [module for notebook in notebooks for module in notebook.modules]
    checks = expected_effects(modules, data)
    parts = [f"<p>{html.escape(effects_summary(checks))}. {html.escape(noise_note(_devices(data)))}</p>"]
    compared = RunData.load(compare) if compare is not None else None
    if compared is not None:
        parts.append(f"<p>Beside each line: the compared run {html.escape(Path(str(compare)).name)} "
                     f"({html.escape(run_devices(compared))}).</p>")
    for notebook in notebooks:
        mine = expected_effects(notebook.modules, data)
        if not mine:
            continue
        theirs: list[Check | None] = list(expected_effects(notebook.modules, compared)) if compared else []
        parts.append(f"<h3>{html.escape(notebook.name)}</h3>{report_html(mine, theirs)}")
    return Section("The lab's expected effects: observed in this run?", parts, "effects")


STYLE = """
body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;border-bottom:1px solid #ccc;margin-top:2em}
table.data{border-collapse:collapse;font-size:.8em;margin:.5em 0}
table.data td,table.data th{border:1px solid #ddd;padding:2px 6px;text-align:right}
table.data td:first-child,table.data th:first-child{text-align:left}
figure{margin:1em 0}img{max-width:100%}figcaption{font-style:italic;font-size:.9em}
div.table{max-width:100%;overflow-x:auto}
h3{font-size:1em;margin:1.2em 0 .3em}div.verdicts{font-size:.9em}
details.verdict ul,ul.headlines{margin:.2em 0}
details.verdict summary{cursor:pointer}details.verdict li{color:#444}
table.verdict{font-size:.9em}table.verdict td:last-child,table.verdict th:last-child{text-align:left}
table.verdict td.observed,table.verdict td.ok{color:#070;font-weight:bold}
table.verdict td.not-observed,table.verdict td.FAILED{color:#a00;font-weight:bold}
table.verdict td.too-noisy-to-call{color:#a60;font-weight:bold}table.verdict td.cannot-show-here{color:#777}
table.verdict tr.total td{border-top:2px solid #999;font-weight:bold}
@media (max-width:40em){table.data{display:block;overflow-x:auto;max-width:100%}}
"""


def render(run_dir: Path, notebooks: Sequence[Notebook], compare: Path | None = None) -> str:
    """The whole report as one HTML string (plots embedded); ``compare``: another run (e.g. on a GPU)."""
    body = "".join(_section_html(s) for s in sections(run_dir, notebooks, compare))
    title = f"serve-system lab — results of {Path(run_dir).name}"
    # a phone lays the page out at its own width (without the tag: 980 px, shrunk)
    return (f"<!doctype html><html><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>")


def _section_html(section: Section) -> str:
    anchor = f' id="{html.escape(section.anchor)}"' if section.anchor else ""
    return f"<section{anchor}><h2>{html.escape(section.title)}</h2>{''.join(section.parts)}</section>"


def write_report(run_dir: Path, notebooks: Sequence[Notebook], compare: Path | None = None) -> Path:
    """Write ``run_dir/report.html`` from the results in ``run_dir``; returns its path.

    ``compare`` names another run's folder (a GPU run, say) whose expected-effect
    checks are shown next to this run's.
    """
    path = Path(run_dir) / "report.html"
    path.write_text(render(Path(run_dir), notebooks, Path(compare) if compare else None))
    return path
