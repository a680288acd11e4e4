"""What every notebook uses: the target's stack, project files shown as they are, results as data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from servelab.core.lab_steps import LAB_STEPS, written_by
from servelab.core.paths import ON_THE_NODE, REPO_ROOT
from servelab.lab.params import LabParams
from servelab.results.store import append_rows, read_rows, results_dir, run_folder
from servelab.targets import get_stack
from servelab.targets.base import Stack


def show_file(relpath: str, lines: int = 40, start: str | None = None) -> None:
    """Print the first ``lines`` of a project file (from the line containing ``start`` if given)."""
    text = (REPO_ROOT / relpath).read_text().splitlines()
    first = next((i for i, line in enumerate(text) if start and start in line), None if start else 0)
    if first is None:
        raise LookupError(f"{relpath} has no line with {start!r}: the file changed; update the notebook cell")
    print(f"# {relpath} (lines {first + 1}-{min(len(text), first + lines)} of {len(text)})")
    print("\n".join(text[first:first + lines]))


def show_code(relpath: str, *names: str) -> None:
    """Print a project file as it is on disk, comments included: whole, or only the named top-level
    functions/classes or methods (``"Class.method"``), each with its line numbers."""
    import ast

    text = (REPO_ROOT / relpath).read_text()
    lines = text.splitlines()
    if not names:
        print(f"# {relpath} ({len(lines)} lines)\n{text.rstrip()}")
        return
    tree = ast.parse(text)
    for name in names:
        scope: list[ast.stmt] = tree.body
        node: ast.stmt | None = None
        for part in name.split("."):
            kinds = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
            node = next((n for n in scope if isinstance(n, kinds) and n.name == part), None)
            if node is None:
                raise LookupError(f"{relpath} has no {name!r}: the file changed; update the notebook cell")
            scope = node.body if isinstance(node, ast.ClassDef) else []
        assert node is not None and node.end_lineno is not None
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        # one write: a kernel may send separate prints as separate outputs
        print("\n".join([f"# {relpath}, lines {start}-{node.end_lineno}: {name}",
                         *lines[start - 1:node.end_lineno], ""]))


def record(experiment: str, rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Append ``rows`` to the run's results and return them as a DataFrame."""
    append_rows(experiment, rows)
    return pd.DataFrame(list(rows))


def concat(*frames: pd.DataFrame) -> pd.DataFrame:
    """Several measurement tables as one (for a combined plot), shown short if they were."""
    joined = pd.concat(frames, ignore_index=True)
    kind = next((f.shown_as for f in frames if isinstance(f, Measured) and f.shown_as), None)
    return joined if kind is None else Measured.of(joined, kind)


# which notebooks store rows under each experiment's name (the registry of the lab's steps)
WRITTEN_BY = {table: ", ".join(written_by(table))
              for table in dict.fromkeys(t for s in LAB_STEPS for t in s.tables)}


def settings(config: Any) -> pd.DataFrame:
    """A settings dataclass (``provisioning``'s ``ChameleonConfig``) as a table of what the next cells
    will use, one row per field, instead of its one-line repr; empty values show as "(none)"."""
    from dataclasses import fields

    values = {f.name: getattr(config, f.name) for f in fields(config)}
    shown = [str(v) if v not in ("", None, {}, []) else "(none)" for v in values.values()]
    return pd.DataFrame({"setting": list(values), "value": shown})


def plan_mode(p: LabParams) -> None:
    """Say whether the provisioning cells create anything (``p.plan``), in a sentence."""
    print("plan mode: the next cells print what they would create on Chameleon and call nothing "
          f"(target {p.target!r})" if p.plan else
          f"live: the next cells create and delete resources on Chameleon (target {p.target!r})")


def results_overview(directory: Path | None = None) -> pd.DataFrame:
    """How many rows each experiment stored in this run's results, and which notebooks wrote them
    (``directory``: another results folder, e.g. what 08 copied from the node)."""
    directory = directory if directory is not None else results_dir()
    rows = [{"experiment": path.stem, "notebooks": WRITTEN_BY.get(path.stem, ""),
             "rows": len(read_rows(path.stem, directory)), "file": path.name}
            for path in sorted(directory.glob("*.jsonl"))]
    return pd.DataFrame(rows, columns=["experiment", "notebooks", "rows", "file"])


def open_stack(p: LabParams, **options: Any) -> Stack:
    """The target's stack: local processes, or compose on this host (the node's Jupyter on Chameleon);
    ``options`` go to it as to ``get_stack`` (``triton_flags=[...]``: server flags after the lab's).

    ``target="chameleon"`` raises a TargetError that says where notebooks ``ON_THE_NODE`` run instead.
    """
    return get_stack(p.target, **_local_options(p.target), **options)


def stop_stacks(p: LabParams) -> None:
    """Stop every stack this lab started (08). On chameleon they run on the node, and deleting the
    server stops them: nothing to do from here."""
    if p.target == "chameleon":
        print("The stacks run on the node: deleting its server (next cell) stops them.")
        return
    open_stack(p).down()


def node_jupyter(node: Any, config: Any = None) -> None:
    """Where to go after 02: the node's Jupyter server, where notebooks ``ON_THE_NODE`` run (target docker),
    and the line that copies the student's work here, with 02's settings (``config``)."""
    from provisioning import fetch_line

    keep = ("Your measurements and saved notebooks stay on the node, and go with it: 08 copies them here "
            "before it deletes anything; to copy them here at any time while the lease runs, run this in "
            f"one of the lab's notebooks here (after its first cell):\n  {fetch_line(config)}")
    if node is None:
        print("plan mode: on Chameleon this prints the node's Jupyter URL (with its token); "
              f"notebooks {ON_THE_NODE} run there with target='docker'.\n{keep}")
        return
    print(f"Open the node's Jupyter server and run notebooks {ON_THE_NODE} there with target='docker':\n"
          f"  {node.jupyter_url}\nSSH for nvtop: ssh {node.user}@{node.address}\n"
          "  (from a terminal in Chameleon's Jupyter, File → New → Terminal: the server got the hub's key "
          "pair; from another machine add -i with the private key of the key pair you gave as key_name)\n"
          f"{keep}")


def _local_options(target: str) -> dict[str, Any]:
    """The local stack starts Triton with no model loaded: each notebook's ``triton_up`` deploys and
    loads its own (04 never loads 06's ONNX model).

    A headless run (``SERVELAB_RESULTS`` set) also keeps the local host's files inside its results
    folder. The live model repository and the servers' logs then belong to that run:
    two runs on one machine (CI jobs, a test next to a student) never rewrite
    each other's ``models/``, and the logs sit beside the measurements.
    """
    if target != "local":
        return {}
    run = run_folder()
    return {"models": ()} if run is None else {"models": (), "root": run / "host", "log_dir": run / "logs"}


def hostport(url: str) -> str:
    """tritonclient and perf_analyzer take ``host:port`` without a scheme."""
    return url.split("://", 1)[-1].rstrip("/")


def _http(url: str) -> str:
    return url if "://" in url else f"http://{url}"


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


@dataclass
class Endpoint:
    """A running HTTP service the notebook talks to: its kind and base URL."""

    kind: str
    url: str

    def _repr_html_(self) -> str:
        return f"<b>{self.kind}</b> at <code>{self.url}</code>"


class Verdicts(list[Any]):
    """The verdicts a cell showed (``servelab.report.verdict.Check``: ``status``, ``mark``, ``claim``,
    ``figures`` with their units, ``details``), in order; a cell ending in a call that returns them shows
    nothing more (they were shown already)."""

    def _ipython_display_(self) -> None:
        """IPython calls this instead of showing the value's repr (an empty execute_result is not sent)."""

    def lines(self) -> list[str]:
        """Each verdict's one line, as the cell showed it."""
        return [c.line() for c in self]


def show(shown: Any) -> None:
    """Display ``shown`` (HTML and its text) in a notebook, or print its text elsewhere."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is in every environment the notebooks run in
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        from IPython.display import display

        display(shown)
    else:
        print(repr(shown))


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
