"""What each figure the lab prints means: its unit and what it is taken over, said once per notebook.

A notebook's first table with a "CPU %" column, its first verdict with a "(spread …)", its first TPOT
or goodput, each carries the definition; later ones do not repeat it (``define`` remembers, per
kernel). The report prints them all once (``glossary``).
Why: docs/decisions/2026-11-26-verdicts-with-preconditions.md.
"""

from __future__ import annotations

from pathlib import Path

from servelab.core.cpu import cpu_cores
from servelab.core.lab_steps import ranges, written_by

TERMS = {
    "p99": "p50, p95, p99 (ms): the latency that half, 95 % and 99 % of the requests answered within (the "
           "median and the tail)",
    "CPU %": "CPU %: the whole machine's mean busy share during the measurement, 100 % = all {cores} cores "
             "busy; everything on the machine counts, the load generator (perf_analyzer, the benchmark's "
             "clients) included",
    "server CPU %": "server CPU %: the server's own processes alone (Triton and its model instances), on the "
                    "same scale (100 % = all {cores} cores); blank where they run out of this notebook's "
                    "sight (another container)",
    "queue": "queue (ms), compute (ms): the server's own mean time per request waiting in its queue and "
             "running the model (compute infer), from Triton's statistics over the measured windows; p50 and "
             "p99 are the client's latency percentiles over the same windows",
    "results": "$SERVELAB_RESULTS: this run's results folder ({where}), in the commands and paths the "
               "notebook prints: every measurement (CSV and JSON lines), plot and server log of the run "
               "is kept there",
    "spread": "noise band: how far a comparison's figures could move by their own noise, in their unit. "
              "Each level's relative spread is (max − min) / mean over {over}; the band is each compared "
              "figure times its own level's relative spread (a latency percentile takes its windows' mean "
              "latency's), the larger of the two. A verdict whose figure sits closer to its threshold than "
              "the band reads 'too noisy to call' and says what rerun would settle it; a band from windows "
              "accepted at any spread bounds nothing, and settles nothing either",
    "goodput": "goodput (goodput_rps): the requests answered with a 200 per second of the run, from its "
               "first request to its last answer; a request refused (503) or timed out does not count",
    "TPOT": "TPOT (tpot_ms): time per output token, the mean gap between two streamed tokens of one request "
            "after its first, (last token's time − first token's time) / (tokens − 1), in ms; TTFT is the "
            "time to the first token (prefill and waiting)",
    "ITL": "ITL (itl_p50_ms, itl_p99_ms): inter-token latency, the same gaps between streamed tokens as "
           "TPOT, each gap on its own and pooled over every request of a load run (its p50, p99), in ms; "
           "TPOT averages one request's gaps, which the lab reports for requests sent one at a time",
}
DEFAULT_OVER = "the parts each level was measured in"
_defined: set[str] = set()


def _cores() -> int:
    return cpu_cores()


def _results() -> str:
    """Where $SERVELAB_RESULTS points, as the notebooks say paths: relative to the checkout, or ~/…."""
    from servelab.core.paths import REPO_ROOT
    from servelab.results.store import results_dir

    folder = results_dir()
    return str(folder.relative_to(REPO_ROOT)) if folder.is_relative_to(REPO_ROOT) else "a folder of its own"


def define(*names: str, over: str = DEFAULT_OVER) -> str:
    """The definitions of ``names`` this process has not given yet, one line each ("" when all were);
    from now on they count as given. ``over``: what a spread spans in this notebook."""
    lines = [TERMS[n].format(cores=_cores(), over=over, where=_results()) for n in names
             if n in TERMS and n not in _defined]
    _defined.update(names)
    return "\n".join(lines)


def forget() -> None:
    """Every term undefined again (a test, or a notebook's kernel restarted by hand)."""
    _defined.clear()


def _over() -> str:
    """What a spread spans, in every notebook at once (the report's and the glossary's words)."""
    def by(table: str) -> str:
        return ranges(written_by(table))

    return (f"perf_analyzer's last three windows of a level ({by('triton')}), a FastAPI run's three "
            f"thirds ({by('fastapi')}), an LLM measurement's repeats ({by('llm')}), one sampling interval or "
            f"the last three samples ({by('scaling')})")


def glossary(cores: int | None = None) -> list[str]:
    """Every definition, for the report (``cores``: the run's machine's)."""
    return [text.format(cores=cores or _cores(), over=_over(), where="results/<run> of the checkout")
            for text in TERMS.values()]


GLOSSARY_BLOCK = "terms"  # the block of docs/guides/glossary.md that ``glossary_markdown`` fills


def glossary_markdown() -> str:
    """The glossary page's generated block: how to read a verdict and every definition the notebooks print
    once each (``TERMS``), as the lab's library says them, in alphabetical order; ``write_glossary`` puts
    it in the page."""
    from servelab.report.verdicts import LEGEND

    entries = {"verdict": LEGEND.removeprefix("How to read a verdict: ")}
    for text in TERMS.values():
        said = text.format(cores="the machine's", over=_over(), where="results/<run> of the checkout")
        name, _, meaning = said.partition(": ")
        entries[name] = meaning
    ordered = sorted(entries, key=lambda name: name.lstrip("$(").lower())
    return "".join(f"- **{name}**: {entries[name]}\n" for name in ordered)


def write_glossary(path: Path) -> None:
    """Fill ``path``'s ``<!-- begin terms -->`` block with ``glossary_markdown`` (``python -m
    servelab.report.terms docs/guides/glossary.md``); a test holds the committed page to it."""
    import re

    text = Path(path).read_text(encoding="utf-8")
    name = GLOSSARY_BLOCK
    block = re.compile(rf"(<!-- begin {name} -->\n)(.*?)(<!-- end {name} -->)", re.S)
    if not block.search(text):
        raise ValueError(f"{path} has no <!-- begin {name} --> … <!-- end {name} --> block")
    Path(path).write_text(block.sub(lambda m: m.group(1) + glossary_markdown() + m.group(3), text),
                          encoding="utf-8")


def used_in(headings: list[str]) -> list[str]:
    """The terms a table with these column headings shows."""
    found = ["p99"] if any(h in headings for h in ("p50 (ms)", "p95 (ms)", "p99 (ms)")) else []
    for name, heading in (("CPU %", "CPU %"), ("server CPU %", "server CPU %"), ("queue", "queue (ms)")):
        if heading in headings:
            found.append(name)
    if "compute (ms)" in headings and "queue" not in found:
        found.append("queue")
    return found


if __name__ == "__main__":  # python -m servelab.report.terms docs/guides/glossary.md
    import sys

    write_glossary(Path(sys.argv[1]))
