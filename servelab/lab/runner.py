"""The headless lab: execute every notebook in order with papermill, then write the report.

``python -m servelab.lab run --preset quick|full [--target local|docker|chameleon] [--only 03]``

``local`` and ``docker`` execute the notebooks here (on a Docker host, ``./lab run
--target docker`` runs this inside the student's Jupyter container);
``chameleon`` provisions the node, runs ``./lab run --target docker`` there and
fetches its results (``servelab.targets.chameleon``).

Each run gets ``results/<run-id>/`` (or ``--run-dir``): the executed notebooks, the measurements
(the notebooks' kernels inherit ``SERVELAB_RESULTS`` pointing there), the
services' logs, ``report.html`` and ``run.json`` (when, where, which commit with or without uncommitted
changes: ``servelab.results.code``, each notebook's outcome). A failing cell stops the run with a
non-zero exit that names the notebook and the cell; what earlier notebooks
measured stays on disk, and the report is still drawn from it.

Kernels run the project venv's interpreter through a kernelspec installed into
that venv under a fixed name, so papermill never picks up some other Python
that happens to be first on PATH (``servelab.lab.kernel``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servelab.core import lab_steps, procs
from servelab.core.console import say
from servelab.core.cpu import cpu_cores, cpu_model
from servelab.core.paths import REPO_ROOT
from servelab.core.progress import HEADLESS
from servelab.lab import stopping
from servelab.lab.kernel import KERNEL_NAME, ensure_kernel, kernel_config  # noqa: F401  (named here too)
from servelab.lab.params import ParameterError, check_preset, check_target
from servelab.results.code import code_facts
from servelab.results.store import RESULTS_VARIABLE, host_facts, results_dir

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
DEFAULT_CELL_TIMEOUT = {"quick": 420, "full": 1800}
DEFAULT_NOTEBOOK_TIMEOUT = {"quick": 600, "full": 3600}


class NotebookFailed(RuntimeError):
    """A notebook stopped; the message names it and the failing cell."""


@dataclass
class NotebookOutcome:
    """How one notebook went: its output, time, and where it failed if it did."""

    name: str
    output: Path
    seconds: float
    ok: bool
    error: str = ""


@dataclass
class RunOutcome:
    """The whole run: its folder, each notebook's outcome, total time, the report."""

    run_dir: Path
    notebooks: list[NotebookOutcome] = field(default_factory=list)
    seconds: float = 0.0
    report: Path | None = None
    load_before: float | None = None  # 1-min load average: how busy the machine was (contention)
    started: str = ""  # when the first notebook started (UTC): the site's and the report's provenance
    code: dict[str, Any] = field(default_factory=dict)  # the commit that ran, and its changes (code_facts)

    @property
    def ok(self) -> bool:
        return all(n.ok for n in self.notebooks)

    @property
    def failure(self) -> NotebookOutcome | None:
        return next((n for n in self.notebooks if not n.ok), None)


def notebook_paths(only: Sequence[str] | None = None) -> list[Path]:
    """The lab's notebooks in order (``NN_name.ipynb``, as the registry of the lab's steps names them);
    ``only`` keeps those whose prefix matches."""
    paths = [NOTEBOOK_DIR / f"{step.name}.ipynb" for step in lab_steps.LAB_STEPS]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise ParameterError(f"{', '.join(missing)} missing in {NOTEBOOK_DIR}: generate them with "
                             "`.venv/bin/jupytext --sync notebooks/*.py`")
    if only:
        wanted = {o.zfill(2) if o.isdigit() else o for o in only}
        paths = [p for p in paths if p.name[:2] in wanted or p.stem in wanted]
        if not paths:
            raise ParameterError(f"--only {' '.join(only)} matches no notebook in {NOTEBOOK_DIR}: "
                                 "give notebook numbers such as --only 03 04")
    return paths


def run_order(paths: Sequence[Path]) -> list[Path]:
    """The order a headless run executes ``paths`` in: the lab's, the teardown last (``lab_steps.run_order``),
    so that its summary of the run's measurements includes the optional steps'."""
    by_name = {path.stem: path for path in paths}
    return [by_name[name] for name in lab_steps.run_order(by_name)]


def new_run_dir(preset: str, base: Path | None = None, path: Path | None = None) -> Path:
    """``results/<YYYYmmdd-HHMMSS>-<preset>``, unique even for two runs in one second; or ``path``
    when given (a new or empty folder: the chameleon run names the node's run folder this way), made
    absolute: the kernels and the programs they start (Model Analyzer) run in other folders."""
    if path is not None:
        path = Path(path).resolve()
        if path.exists() and any(path.iterdir()):
            raise ParameterError(f"--run-dir {path} is not empty: name a new folder")
        path.mkdir(parents=True, exist_ok=True)
        return path
    base = Path(base or results_dir())  # $SERVELAB_RESULTS when given: ./lab run honours it
    stem = time.strftime("%Y%m%d-%H%M%S") + f"-{preset}"
    run_dir, n = base / stem, 1
    while run_dir.exists():
        n += 1
        run_dir = base / f"{stem}.{n}"
    run_dir.mkdir(parents=True)
    return run_dir


def _timeout_func(cell_timeout: float, notebook_deadline: float,
                  on_cell: Callable[[Any], None] | None = None) -> Callable[[Any], int]:
    """Per-cell timeout for nbclient: the cell limit, or less when the notebook's time runs out.

    nbclient asks for it as each cell starts, which is also the moment to show
    which step is running (``on_cell``).
    """
    def timeout(cell: Any) -> int:
        if on_cell is not None:
            on_cell(cell)
        remaining = notebook_deadline - time.monotonic()
        return max(1, int(min(cell_timeout, remaining)))
    return timeout


def _key_line(source: str) -> str:
    """The line that says what a cell does: its first that is not blank, a comment or an import."""
    lines = [ln.strip() for ln in str(source).splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return next((ln for ln in lines if not ln.startswith(("import ", "from "))), lines[0] if lines else "")


def _first_line(cell: Any) -> str:
    return _key_line(cell.get("source", ""))


def _failing_cell(output: Path) -> str:
    """Find the cell that was running or raised in a (partly) executed notebook."""
    import nbformat

    try:
        nb = nbformat.read(output, as_version=4)
    except (OSError, ValueError):
        return "unknown cell"
    code_index = 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        code_index += 1
        status = cell.get("metadata", {}).get("papermill", {}).get("status")
        errored = any(o.get("output_type") == "error" for o in cell.get("outputs", []))
        if status == "running" or errored:
            return f"cell {index} (code cell {code_index}: {_key_line(cell.source)[:80]!r})"
    return "unknown cell"


def run_notebook(path: Path, run_dir: Path, parameters: dict[str, Any], kernel: str,
                 cell_timeout: float, notebook_timeout: float,
                 on_cell: Callable[[Any], None] | None = None) -> NotebookOutcome:
    """Execute one notebook into ``run_dir``; never raises for a failing cell — it reports it."""
    import papermill as pm

    output = run_dir / path.name
    start = time.monotonic()
    try:
        pm.execute_notebook(
            str(path), str(output), parameters=parameters, kernel_name=kernel,
            cwd=str(REPO_ROOT), progress_bar=False, request_save_on_cell_execute=True, start_timeout=120,
            timeout_func=_timeout_func(cell_timeout, start + notebook_timeout, on_cell),
            interrupt_on_timeout=True, config=kernel_config(),
        )
    except pm.PapermillExecutionError as exc:
        where = f"cell {exc.cell_index} (execution count {exc.exec_count})"
        error = f"{path.name}: {where} {_key_line(exc.source)[:80]!r} raised {exc.ename}: {exc.evalue}"
        # nbclient's interrupt_on_timeout raises KeyboardInterrupt in a running cell; a cell that had
        # no time left at all may end as a bare CellExecutionError instead: the deadline tells
        if exc.ename == "KeyboardInterrupt" or time.monotonic() >= start + notebook_timeout:
            error += (f" — stopped by the runner's timeout (cell limit {cell_timeout:.0f} s, "
                      f"notebook limit {notebook_timeout:.0f} s)")
        return NotebookOutcome(path.stem, output, time.monotonic() - start, False, error)
    except Exception as exc:  # kernel died, timeout while starting, ...
        error = f"{path.name}: {_failing_cell(output)} — {type(exc).__name__}: {exc}"
        return NotebookOutcome(path.stem, output, time.monotonic() - start, False, error)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (`python -m servelab.lab stop`, the chameleon deadline)
        error = f"{path.name}: {_failing_cell(output)} — stopped from outside (SIGTERM or Ctrl-C)"
        return NotebookOutcome(path.stem, output, time.monotonic() - start, False, error)
    return NotebookOutcome(path.stem, output, time.monotonic() - start, True)


def run(preset: str = "quick", target: str = "local", only: Sequence[str] | None = None,
        results_base: Path | None = None, cell_timeout: float | None = None,
        notebook_timeout: float | None = None, extra: dict[str, Any] | None = None,
        report: bool = True, run_dir: Path | None = None) -> RunOutcome:
    """Execute the notebooks in order, stop at the first failure, write the report; returns the outcome."""
    check_preset(preset)
    check_target(target)
    paths = run_order(notebook_paths(only))
    kernel = ensure_kernel()
    run_dir = new_run_dir(preset, results_base, run_dir)
    previous = os.environ.get(RESULTS_VARIABLE)
    os.environ[RESULTS_VARIABLE] = str(run_dir)  # kernels inherit it: measurements land in the run
    os.environ[HEADLESS] = "1"  # and this: their progress bars stay off (the runner shows its own)
    try:
        return _run_all(paths, run_dir, preset, target, kernel, cell_timeout, notebook_timeout, extra, report)
    finally:
        os.environ.pop(HEADLESS, None)
        if previous is None:
            os.environ.pop(RESULTS_VARIABLE, None)
        else:
            os.environ[RESULTS_VARIABLE] = previous


def _run_all(paths: list[Path], run_dir: Path, preset: str, target: str, kernel: str,
             cell_timeout: float | None, notebook_timeout: float | None, extra: dict[str, Any] | None,
             report: bool) -> RunOutcome:
    from tqdm import tqdm

    cell_timeout = cell_timeout or DEFAULT_CELL_TIMEOUT[preset]
    notebook_timeout = notebook_timeout or DEFAULT_NOTEBOOK_TIMEOUT[preset]
    outcome = RunOutcome(run_dir)
    outcome.load_before = _load_average()
    outcome.started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    outcome.code = code_facts()  # as the run starts: an edit during the run is not what ran
    start = time.monotonic()
    bar = tqdm(paths, desc="lab", unit="notebook", position=0)
    with procs.orphans_adopted():  # a notebook's orphans become ours, stopped before the next one
        before = procs.children()
        try:
            for path in bar:
                bar.set_postfix_str(path.stem)

                def show(cell: Any, stem: str = path.stem) -> None:
                    bar.set_postfix_str(f"{stem}: {_first_line(cell)[:60]}")

                parameters = {"target": target, "preset": preset, **(extra or {})}
                result = run_notebook(path, run_dir, parameters, kernel, cell_timeout, notebook_timeout,
                                      show)
                if left := procs.stop_new_children(before):  # what a killed kernel's servers left behind
                    tqdm.write(f"     {path.stem}: stopped {len(left)} processes it left running "
                               f"({', '.join(sorted(set(left)))})")
                outcome.notebooks.append(result)
                tqdm.write(f"{'ok  ' if result.ok else 'FAIL'} {path.stem:<28} {result.seconds:6.1f} s")
                if not result.ok:
                    break
        except KeyboardInterrupt:  # stopped between notebooks: what ran is still recorded and reported
            outcome.notebooks.append(NotebookOutcome("(between notebooks)", run_dir, 0.0, False,
                                                     "stopped from outside (SIGTERM or Ctrl-C)"))
            procs.stop_new_children(before)
    bar.close()
    outcome.seconds = time.monotonic() - start
    (run_dir / "run.json").write_text(json.dumps(_summary(outcome, preset, target), indent=1))
    if report:
        from servelab.lab.run_report import write_report

        outcome.report = write_report(run_dir)
    return outcome


def run_chameleon(preset: str = "quick", only: Sequence[str] | None = None,
                  results_base: Path | None = None, keep_node: bool = False, report: bool = True,
                  **node_options: Any) -> tuple[Path, Any, Path | None]:
    """The node's whole life from here (``targets.chameleon.run_on_node``); run folder, outcome, report."""
    from servelab.targets import chameleon as node_run

    check_preset(preset)
    if only:
        notebook_paths(only)  # an unknown --only fails here, before anything is reserved
    run_dir = new_run_dir(preset, results_base)
    code = code_facts()  # the checkout the node gets (uploaded, or cloned: then node-run.json has its own)
    outcome = node_run.run_on_node(run_dir, preset, only, keep_node=keep_node, **node_options)
    summary = {**node_run.summary(outcome, preset), "code": code}
    (run_dir / "run.json").write_text(json.dumps(summary, indent=1))
    report_path = None
    if report:
        from servelab.lab.run_report import write_report

        report_path = write_report(run_dir)
    return run_dir, outcome, report_path


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _summary(outcome: RunOutcome, preset: str, target: str) -> dict[str, Any]:
    return {"preset": preset, "target": target, "started": outcome.started, "code": outcome.code,
            "machine": {**host_facts(), "cpu_model": cpu_model()},  # where it ran (the site's provenance)
            "seconds": round(outcome.seconds, 1), "ok": outcome.ok,
            "cpu_count": cpu_cores(), "load_average_before": outcome.load_before,
            "load_average_after": _load_average(),
            "notebooks": [{"name": n.name, "seconds": round(n.seconds, 1), "ok": n.ok, "error": n.error}
                          for n in outcome.notebooks]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servelab.lab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="execute every notebook headlessly and write the report")
    run_p.add_argument("--preset", default="quick", help="quick (CI, minutes) or full (the seed's sizes)")
    run_p.add_argument("--target", default="local", help="local | docker | chameleon")
    run_p.add_argument("--only", nargs="+", help="notebook numbers to run, e.g. --only 03 04")
    run_p.add_argument("--cell-timeout", type=float, help="seconds per cell")
    run_p.add_argument("--notebook-timeout", type=float, help="seconds per notebook")
    run_p.add_argument("--run-dir", type=Path, help="the run's folder (new or empty; default results/<id>)")
    run_p.add_argument("--keep-node", action="store_true",
                       help="chameleon: leave the server and lease running after the run")
    run_p.add_argument("--delete-adopted", action="store_true",
                       help="chameleon: also delete the lease/server/floating IP the run found and reused, "
                            "not only what it created")
    run_p.add_argument("--lease-start", help="chameleon: reserve ahead from this time (ISO 8601, no offset: "
                                             "the site's time zone; or +2h); default $CHI_LEASE_START or now")
    run_p.add_argument("--lease-id",
                       help="chameleon: use (adopt) this lease; default $CHI_LEASE_ID, else by name")
    sub.add_parser("stop", help="stop the lab runs here and wait (2 min at most) while each writes run.json "
                                "and its report")
    rep_p = sub.add_parser("report", help="(re)write report.html for an existing run folder")
    rep_p.add_argument("run_dir", type=Path)
    rep_p.add_argument("--compare", type=Path, help="another run's folder (e.g. a GPU run) to set beside it")
    args = parser.parse_args(argv)
    if args.command == "stop":
        pids = stopping.stop_runs(wait=120)
        print(f"stopped: {', '.join(map(str, pids))}" if pids else "no lab run to stop")
        return 0
    signal.signal(signal.SIGTERM, stopping.interrupt)  # a stopped run still writes run.json and its report
    if args.command == "report":
        from servelab.lab.run_report import write_report

        print(write_report(args.run_dir, args.compare))
        return 0
    try:
        if args.target == "chameleon":
            return _main_chameleon(args)
        chameleon_only = [flag for flag, value in (("--delete-adopted", args.delete_adopted),
                                                   ("--lease-start", args.lease_start),
                                                   ("--lease-id", args.lease_id)) if value]
        if chameleon_only:
            raise ParameterError(f"{', '.join(chameleon_only)} only apply to --target chameleon")
        outcome = run(args.preset, args.target, args.only, cell_timeout=args.cell_timeout,
                      notebook_timeout=args.notebook_timeout, run_dir=args.run_dir)
    except ParameterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the first notebook (the kernel's set-up) or after the last
        print("error: stopped from outside (SIGTERM or Ctrl-C)", file=sys.stderr)
        return 130
    minutes, seconds = divmod(outcome.seconds, 60)
    print(f"results: {outcome.run_dir}")
    if outcome.report:
        print(f"report:  {outcome.report}")
    print(f"total time: {int(minutes)} min {seconds:.0f} s")
    if outcome.failure:
        print(f"FAILED: {outcome.failure.error}", file=sys.stderr)
        return 1
    return 0


def _main_chameleon(args: argparse.Namespace) -> int:
    if args.run_dir is not None:
        raise ParameterError("--run-dir is for a run on this machine; a chameleon run names its own folder")
    settings = {"lease_start": args.lease_start, "lease_id": args.lease_id}
    run_dir, outcome, report_path = run_chameleon(args.preset, args.only, keep_node=args.keep_node,
                                                  delete_adopted=args.delete_adopted, settings=settings)
    minutes, seconds = divmod(outcome.seconds, 60)
    # the terminal may be gone (closed during the run): then say() drops these lines (run.json has them)
    say(f"results: {run_dir}")
    if report_path:
        say(f"report:  {report_path}")
    say(f"total time: {int(minutes)} min {seconds:.0f} s")
    if not outcome.ok:
        say(f"FAILED: {outcome.error}", error=True)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
