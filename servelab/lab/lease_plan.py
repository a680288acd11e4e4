"""The lease plan: what a student does before the lease, in it and after it, in minutes computed from run
folders, so that the plan cannot rot.

``python -m servelab.lab.lease_plan RUN [RUN ...]`` prints it as Markdown (``--write FILE`` puts it in the
file's ``lease-plan`` block instead; ``--check`` exits 1 when the core does not fit). Each notebook's run
time is the seconds ``run.json`` records for it, from the first run given that ran it; its reading time is
its source's word count (prose and code) at ``READING_WPM``, and each **Predict.** prompt adds
``PROMPT_MINUTES``. The lease holds the set-up (``SETUP_MINUTES``, the upper bound of the lab's estimate),
the core on the node read and run at the node's preset, and 08; it fits when ``SPARE_MINUTES`` or more
are left. Where each notebook runs: ``servelab.core.paths``. Why each figure:
docs/decisions/2026-12-01-the-lab-as-a-course.md
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from servelab.core.paths import CORE_ON_THE_NODE, ON_THE_NODE, REPO_ROOT, notebook_numbers

NODE_PRESET = "full"  # the seed lab's sizes: quick's wide stability bands leave verdicts that cannot show it
LEASE_MINUTES = 170  # 2 h 50 min, the lab's lease
SPARE_MINUTES = 20  # at least this much left at the core's end, for what goes wrong on the day
READING_WPM = 175  # the slow end of most adults' silent reading of English non-fiction (Brysbaert 2019)
PROMPT_MINUTES = 1.0  # writing down one prediction
SETUP_MINUTES = 75  # lease start → 03 answers: "about 18–60, + up to 15" (2026-11-25-node-ready-for-03.md)
FETCH_MINUTES = 5  # 08's copy of the node's results and notebooks to the hub: at most 5 minutes
WORD = re.compile(r"[A-Za-z0-9][\w'’.-]*")


class PlanError(ValueError):
    """A run folder the plan cannot read; the message says what to give instead."""


@dataclass(frozen=True)
class Notebook:
    """One notebook in the plan: where it runs, its words and prompts, and its measured run."""

    stem: str
    words: int
    prompts: int
    title: str = ""
    seconds: float | None = None  # None: no run given ran it
    run: str = ""  # the run folder its seconds come from
    preset: str = ""

    @property
    def number(self) -> str:
        return self.stem[:2]

    @property
    def where(self) -> str:
        if self.number in notebook_numbers(ON_THE_NODE):
            return "node (core)" if self.number in notebook_numbers(CORE_ON_THE_NODE) else "node (optional)"
        return {"00": "before, anywhere", "01": "before, the hub", "02": "lease start, the hub",
                "08": "lease end, the hub"}.get(self.number, "the hub")

    @property
    def reading(self) -> float:
        return self.words / READING_WPM

    @property
    def running(self) -> float:
        return (self.seconds or 0.0) / 60

    @property
    def in_lease(self) -> float:
        """Minutes on the node: read again while running each cell, one minute per prediction."""
        return self.running + self.reading + self.prompts * PROMPT_MINUTES


def source_counts(path: Path) -> tuple[int, int, str]:
    """(words, **Predict.** prompts, title) of a notebook's Jupytext source, prose and code alike; the title
    is its first heading without its number."""
    import jupytext

    cells = jupytext.read(path).cells
    words = sum(len(WORD.findall(str(cell.source))) for cell in cells)
    prompts = sum(str(cell.source).count("**Predict") for cell in cells if cell.cell_type == "markdown")
    headings = (re.search(r"^#\s+(?:\d+\.\s*)?(.+?)\s*$", str(cell.source), re.M)
                for cell in cells if cell.cell_type == "markdown")
    heading = next((m.group(1) for m in headings if m), path.stem)
    return words, prompts, heading


def run_facts(run_dir: Path) -> dict:
    """A run folder's ``run.json``; a PlanError saying what to give when it has none."""
    path = Path(run_dir) / "run.json"
    if not path.is_file():
        raise PlanError(f"{run_dir} has no run.json: give a run's folder (results/<run>, from ./lab run)")
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise PlanError(f"{path} is not JSON ({exc}): give a run's folder written by ./lab run") from exc


def notebooks(runs: Sequence[Path], sources: Sequence[Path] | None = None) -> list[Notebook]:
    """Every notebook of the lab with the seconds of the first run in ``runs`` that ran it to its end."""
    if sources is None:
        sources = sorted((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    measured: dict[str, tuple[float, str, str]] = {}
    for run_dir in runs:
        facts = run_facts(run_dir)
        for entry in facts.get("notebooks", []):
            if isinstance(entry, dict) and entry.get("ok") and entry.get("name") not in measured:
                measured[entry["name"]] = (float(entry.get("seconds", 0.0)), Path(run_dir).name,
                                           str(facts.get("preset", "")))
    found = []
    for path in sources:
        words, prompts, heading = source_counts(path)
        seconds, run, preset = measured.get(path.stem, (None, "", ""))
        found.append(Notebook(path.stem, words, prompts, heading, seconds, run, preset))
    return found


@dataclass(frozen=True)
class Session:
    """One lease: its set-up, the notebooks run in it, and 08."""

    name: str
    steps: tuple[Notebook, ...]
    teardown: Notebook | None

    @property
    def minutes(self) -> float:
        end = (self.teardown.running + FETCH_MINUTES) if self.teardown else FETCH_MINUTES
        return SETUP_MINUTES + sum(step.in_lease for step in self.steps) + end

    @property
    def spare(self) -> float:
        return LEASE_MINUTES - self.minutes

    @property
    def measured(self) -> bool:
        """Every notebook of it run to its end at the node's preset."""
        return all(step.seconds is not None and step.preset == NODE_PRESET for step in self.steps)

    @property
    def fits(self) -> bool:
        return self.measured and self.spare >= SPARE_MINUTES

    def room_for(self, optional: Sequence[Notebook]) -> list[Notebook]:
        """The optional notebooks that also fit, in order, each added while the spare stays."""
        taken: list[Notebook] = []
        for step in optional:
            if step.seconds is not None and Session(self.name, (*self.steps, *taken, step),
                                                    self.teardown).spare >= SPARE_MINUTES:
                taken.append(step)
        return taken


def sessions(found: Sequence[Notebook]) -> tuple[Session, tuple[Session, Session]]:
    """(one lease holding the core, two leases splitting it at its middle)."""
    core = tuple(n for n in found if n.where == "node (core)")
    teardown = next((n for n in found if n.number == "08"), None)
    half = (len(core) + 1) // 2
    return (Session("one lease", core, teardown),
            (Session("first lease", core[:half], teardown), Session("second lease", core[half:], teardown)))


def _m(minutes: float) -> str:
    return f"{minutes:.0f}"


def plan_markdown(runs: Sequence[Path], sources: Sequence[Path] | None = None) -> str:
    """The lease plan as Markdown, for the instructor's guide."""
    found = notebooks(runs, sources)
    one, two = sessions(found)
    facts = {Path(r).name: run_facts(r) for r in runs}
    given = "; ".join(f"`{name}` (preset {f.get('preset', '?')}, target {f.get('target', '?')}, "
                      f"{(f.get('machine') or {}).get('gpu') or 'no GPU'}, {f.get('cpu_count', '?')} cores)"
                      for name, f in facts.items())
    lines = [f"Computed by `python -m servelab.lab.lease_plan` from {given}; reading at {READING_WPM} words "
             f"a minute, {PROMPT_MINUTES:.0f} minute per prediction. The node's preset is **{NODE_PRESET}**: "
             f"set `preset = \"{NODE_PRESET}\"` in the parameters cell of each notebook you run on the node.",
             "",
             "| notebook | where | run (min) | measured in | reading (min) | predictions "
             "| in the lease (min) |",
             "|---|---|---|---|---|---|---|"]
    for n in found:
        on_node = n.where.startswith("node")
        run = _m(n.running) if n.seconds is not None else "not run"
        lease = _m(n.in_lease) if on_node and n.seconds is not None else ""
        source = f"{n.run} ({n.preset})" if n.run else ""
        lines.append(f"| {n.stem} | {n.where} | {run} | {source} | {_m(n.reading)} | {n.prompts} | {lease} |")
    lines += ["", _session_line(one), ""]
    missing = [n.stem for n in one.steps if n.preset and n.preset != NODE_PRESET]
    if missing:
        lines += [f"**Not at the node's preset**: {', '.join(missing)} were measured at another preset than "
                  f"{NODE_PRESET}; give the plan a {NODE_PRESET} run of them.", ""]
    optional = [n for n in found if n.where == "node (optional)"]
    lines += [f"**Before the lease**, anywhere: read the whole lab on the handout site "
              f"(about {_m(sum(n.reading for n in found))} min), reserve (01) and run 00. "
              f"**After the lease**, on any machine (a Docker host, or `./lab run --only` on a CPU): the "
              f"optional notebooks ({', '.join(n.number for n in optional)}) and the Questions, with the "
              "results 08 copies back. " + _room(one, optional), "",
              "**Two sessions** (two leases, each with its own set-up and 08):", ""]
    lines += [f"- {_session_line(session)}" for session in two]
    lines += ["", _room(two[1], optional)]
    return "\n".join(lines) + "\n"


def _room(session: Session, optional: Sequence[Notebook]) -> str:
    """Which optional notebooks also fit in ``session`` above its spare, each with its run's preset."""
    taken = session.room_for(optional)
    named = ", ".join(f"{n.number} ({_m(n.in_lease)} min, measured at {n.preset})" for n in taken)
    return (f"On the node, in the {session.name} above its {SPARE_MINUTES} spare minutes: "
            f"{named if taken else 'no optional notebook fits'}.")


def _session_line(session: Session) -> str:
    names = ", ".join(n.number for n in session.steps)
    spare = f"{_m(session.spare)} min to spare (at least {SPARE_MINUTES} wanted)"
    if session.fits:
        verdict = f"**fits**, {spare}"
    elif session.measured:
        verdict = f"**does NOT fit**: {spare}"
    else:
        verdict = (f"cannot be told at the node's preset ({NODE_PRESET}): not every notebook of it was run "
                   f"at it; at the presets measured, {spare}")
    return (f"**{session.name.capitalize()}** ({LEASE_MINUTES} min): set-up {SETUP_MINUTES} min, notebooks "
            f"{names} {_m(sum(n.in_lease for n in session.steps))} min, 08 and its copy "
            f"{_m(session.minutes - SETUP_MINUTES - sum(n.in_lease for n in session.steps))} min: "
            f"{_m(session.minutes)} min, {verdict}.")


def notebooks_markdown(runs: Sequence[Path], sources: Sequence[Path] | None = None) -> str:
    """The README's table of the notebooks: each one's title, where it runs and its minutes (read, run and
    predictions), from the same runs as the plan."""
    lines = ["| | notebook | where | minutes |", "|---|---|---|---|"]
    for n in notebooks(runs, sources):
        minutes = n.reading + n.running + n.prompts * PROMPT_MINUTES
        lines.append(f"| {n.number} | {n.title} | {n.where} | {_m(minutes)} |")
    return "\n".join(lines) + "\n"


BLOCKS = {"lease-plan": plan_markdown, "notebooks": notebooks_markdown}  # what --write fills


def fill_file(path: Path, runs: Sequence[Path]) -> list[str]:
    """Fill each of ``BLOCKS`` that file ``path`` holds from ``runs``; the names of those filled."""
    text = Path(path).read_text(encoding="utf-8")
    filled = [name for name in BLOCKS if f"<!-- begin {name}" in text]
    if not filled:
        raise PlanError(f"{path} has no block to fill: <!-- begin lease-plan --> or <!-- begin notebooks -->")
    for name in filled:
        write_block(path, BLOCKS[name](runs), name)
    return filled


def write_block(path: Path, text: str, name: str = "lease-plan") -> None:
    """Put ``text`` in file ``path``'s generated block ``name`` (``<!-- begin name -->``)."""
    pattern = re.compile(rf"(<!-- begin {name}[^>]*-->\n).*?(<!-- end {name} -->)", re.S)
    original = Path(path).read_text(encoding="utf-8")
    if not pattern.search(original):
        raise PlanError(f"{path} has no <!-- begin {name} --> … <!-- end {name} --> block to fill")
    Path(path).write_text(pattern.sub(lambda m: m.group(1) + text.strip() + "\n" + m.group(2), original),
                          encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servelab.lab.lease_plan",
                                     description="the lease plan, computed from run folders")
    parser.add_argument("runs", nargs="+", type=Path,
                        help="run folders (results/<run>): each notebook's seconds come from the first that "
                             f"ran it; give a {NODE_PRESET} run of the node's notebooks first")
    parser.add_argument("--write", type=Path, nargs="+",
                        help="fill these files' generated blocks instead (lease-plan: the plan; notebooks: "
                             "the README's table)")
    parser.add_argument("--check", action="store_true", help="exit 1 when the core does not fit one lease")
    args = parser.parse_args(argv)
    try:
        for path in args.write or []:
            print(f"{path}: filled {', '.join(fill_file(path, args.runs))}")
        if not args.write:
            print(plan_markdown(args.runs), end="")
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    one, _ = sessions(notebooks(args.runs))
    return 1 if args.check and not one.fits else 0


if __name__ == "__main__":
    raise SystemExit(main())
