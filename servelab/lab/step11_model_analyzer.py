"""Notebook 11: Triton Model Analyzer searches the knobs 05, 06 and 07 turned by hand; its pick beside yours.

The student's configuration (instances, dynamic batching) is measured at the constraint's concurrency;
the constraint (a p99 budget there) is stated from it; Model Analyzer searches instance counts, max batch
sizes and dynamic batching under that budget (``servelab.triton.model_analyzer``); its pick is applied to
the lab's own Triton and measured the same way as yours, right after it, then yours once more. The report,
the rules and the views of the run's data: ``step11_report``. Model Analyzer runs where the lab's Triton
runs: on ``local`` from ``.venv-ma`` with the wheel's tritonserver; on ``docker`` in a container of its own
(the Jupyter image on a CPU host, NVIDIA's SDK image on one GPU of a GPU host), starting the lab's Triton
image, with the model as the lab's Triton serves it there (KIND_CPU, or KIND_GPU with the onnxruntime
backend). Why and what it costs: docs/decisions/2026-11-28-model-analyzer.md
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import pandas as pd

from servelab.core.cpu import cpu_cores
from servelab.core.paths import shown
from servelab.lab.params import LabParams
from servelab.lab.tables import Measured, record
from servelab.lab.triton_steps import Triton, apply_config, live_config, measure
from servelab.report.effects import row
from servelab.results.schema import TRITON_COLUMNS, num
from servelab.results.store import results_dir
from servelab.triton import model_analyzer as ma
from servelab.triton import model_analyzer_docker as mad
from servelab.triton.model_analyzer_env import ensure_installed

if TYPE_CHECKING:  # protobuf: not in the controller's environment, which imports this module
    from servelab.triton.config import ModelConfig

MODEL = "food_classifier_onnx"
EXPERIMENT = "model_analyzer"  # the run's model_analyzer.csv/.jsonl: one row per configuration it measured
YOURS, PICK = "your_configuration", "model_analyzer_pick"  # the Triton rows' steps
# what the notebook and the report show of a search's rows (servelab.triton.model_analyzer_results'
# names), in this order
SEARCH_COLUMNS = ["rank", "variant", "configuration", "throughput", "p99_ms", "queue_ms", "compute_infer_ms",
                  "within_budget"]
BUDGET_FACTOR = 1.5  # the default p99 budget: this many times your configuration's p99
NOT_HERE = ("Model Analyzer runs where the servers run (target local, or docker on a Docker host or the "
            "node), not on the {target} target: the cells below skip the search.")


class Nothing(pd.DataFrame):
    """An empty table where a step had nothing to measure: a notebook shows it as its one line."""

    _metadata: ClassVar[list[str]] = ["said"]
    said = ""

    @classmethod
    def says(cls, line: str) -> Nothing:
        empty = cls()
        object.__setattr__(empty, "said", line)
        return empty

    def _repr_html_(self) -> str:
        import html

        return f"<p>{html.escape(self.said)}</p>"

    def __repr__(self) -> str:
        return self.said


def ready(p: LabParams) -> bool:
    """Whether Model Analyzer runs on this target (local, docker); its environment is made when missing
    (one line while it installs; the Jupyter image's is used as built). Elsewhere one line says why not."""
    if p.target not in ("local", "docker"):
        print(NOT_HERE.format(target=p.target))
        return False
    ensure_installed()
    return True


def measure_configuration(triton: Triton, p: LabParams, step: str, label: str) -> pd.DataFrame:
    """The live configuration at ``constraint_concurrency`` clients, as 05, 06 and 07 measure (the lab's
    perf_analyzer windows), labelled with its knobs. The windows settle as the preset's rate levels do
    (``band``: quick takes any spread between them, and the verdicts weigh it as noise): at this load on a
    shared CPU they disagree too far for the concurrency band, and an unsettled level is never counted."""
    from servelab.triton.model_analyzer_results import describe, knobs

    cfg = live_config(triton, MODEL)
    said = describe(cfg)
    rows = measure(triton, MODEL, p, step, f"{label}: {said}", concurrency=p.constraint_concurrency,
                   stability_pct=band(p),
                   extra={"configuration": said, "instance_count": knobs(cfg)["instances"],
                          "max_batch_size": knobs(cfg)["max_batch_size"]})
    return Measured.of(rows, TRITON_COLUMNS)


def band(p: LabParams) -> int:
    """How closely (percent) perf_analyzer's windows must agree, for the lab's measurements here and for
    Model Analyzer's: the preset's band for noisy levels (``rate_stability_pct``, as 05's threads
    lesson). With the concurrency levels' band, Model Analyzer dropped configurations whose windows kept
    disagreeing on this shared CPU, and with the first of a row of batch sizes it drops the whole row."""
    from servelab.lab.params import SPECS

    return int(getattr(SPECS["rate_stability_pct"], p.preset))


def budget(yours: pd.DataFrame, p: LabParams) -> int:
    """The search's first p99 budget (whole ms, as Model Analyzer takes it): ``p99_budget_ms`` if set, else
    ``BUDGET_FACTOR`` × your configuration's p99, a loose one. Printed as the constraint it states; the
    budget the ranking applies is ``binding_budget``'s."""
    if p.p99_budget_ms is not None:
        bound, why = int(p.p99_budget_ms), "p99_budget_ms, as set in the parameters cell"
    else:
        p99 = row(yours, "p99_ms")
        if p99 is None:
            raise RuntimeError("your configuration has no usable p99 to state the constraint from: set "
                               "p99_budget_ms in the parameters cell")
        bound = math.ceil(BUDGET_FACTOR * p99)
        why = f"{BUDGET_FACTOR:g} × your configuration's p99 ({p99:.1f} ms)"
    print(f"The constraint: p99 ≤ {bound} ms at concurrency {p.constraint_concurrency} ({why}). The "
          "objective: inferences/s, Model Analyzer's default.")
    return bound


@dataclass
class Planned:
    """A search ready to run: what it asks, where its files go, how its Triton is launched, the command,
    and the model's own config as deployed for it."""

    search: ma.Search
    work: ma.Workspace
    launch: ma.Launch
    argv: list[str]
    onnx_backend: bool
    deployed: ModelConfig


def plan_search(p: LabParams, bound: int, on: bool, triton: Triton) -> Planned | None:
    """The search's folder, the model deployed there as the lab's Triton (``triton``) serves it (on a CPU:
    KIND_CPU, the ONNX model through the Python-backend runner where the server has no onnxruntime
    backend; on a GPU Docker host: KIND_GPU on GPU 0), its YAML and its command, both printed; on docker
    the ``docker run`` of Model Analyzer's container too (``model_analyzer_docker``; on a GPU host after
    ``./lab images``' pull of its image). None (one line) where Model Analyzer is not run (``on`` False)."""
    if not on:
        print(f"no search on the {p.target} target")
        return None
    from servelab.triton.config import read_config
    from servelab.triton.repository import deploy_model

    stack = triton.stack
    gpu = p.target == "docker" and bool(stack.has_gpu)
    onnx_backend = stack.triton_has_backend("onnxruntime")  # as the lab's Triton serves it (never on local)
    work = ma.Workspace.new(results_dir())
    deployed = read_config(deploy_model(MODEL, work.repository, gpu=gpu, onnx_backend=onnx_backend,
                                        quiet=True))
    search = ma.Search(MODEL, p.constraint_concurrency, bound, p.ma_max_instances, p.ma_max_batch_size,
                       p.ma_search_mode, p.window_requests, band(p), p.max_trials,
                       perf_timeout_s=int(min(600, p.ma_budget_s / 3)), budget_s=p.ma_budget_s,
                       cpu_only=not gpu)
    if p.target != "docker":
        launch = ma.Launch.local()
    elif gpu:
        stack.wait_for_images("model_analyzer")  # ./lab jupyter pulls NVIDIA's SDK image in the background
        launch = ma.Launch.docker(mad.Container.sdk())
    else:
        launch = ma.Launch.docker(mad.Container.jupyter())
    config = ma.write_config(ma.launch_config(search, launch, work), work)
    print(f"# {shown(str(config))}: how Model Analyzer launches Triton and perf_analyzer on this machine")
    print(shown(config.read_text()).rstrip())
    argv = ma.profile_argv(search, work)  # on docker its container's own executable runs it (run_argv)
    if launch.container is None:
        print("\n# with the environment the lab's local Triton gets (servelab.triton.server.server_env: the "
              "wheel's libraries, the lab venv's python for the stubs)")
        print(f"$ {ma.command_line(argv)}")
    else:
        given = (f"NVIDIA's SDK image, given GPU {launch.container.gpu}: its DCGM is how Model Analyzer sees "
                 "the GPU" if gpu else "this Jupyter server's own image")
        print(f"\n# Model Analyzer runs in a container of {launch.container.image} beside this one "
              f"({given}); it starts each Triton as a container of {launch.image} (the lab's Triton image) "
              "through the Docker socket, and measures it with its own perf_analyzer")
        print(f"$ {mad.command_line(ma.docker_argv(argv, launch, work))}")
    return Planned(search, work, launch, argv, onnx_backend=onnx_backend, deployed=deployed)


def run_search(planned: Planned | None) -> pd.DataFrame:
    """Run it (a progress bar per configuration), say what it could not do here in one line each; the
    table of every configuration it measured, in Model Analyzer's order under the first budget (``rank``
    ranks them again under the budget that binds, and records them)."""
    from servelab.triton import model_analyzer_results as mar

    if planned is None:
        return Nothing.says("no search ran: no configuration to show")
    import os

    seconds = ma.run_profile(planned.argv, planned.search, planned.work, planned.launch)
    load = round(os.getloadavg()[0], 2)
    rows = [{**r, "search_seconds": round(seconds, 1), "load_average": load}
            for r in mar.rows(planned.work, planned.search)]
    if not rows:
        raise ma.ModelAnalyzerError(f"Model Analyzer finished but measured no configuration (log: "
                                    f"{shown(str(planned.work.log))})")
    threads = planned.deployed.parameters["intra_op_thread_count"].string_value \
        if "intra_op_thread_count" in planned.deployed.parameters else ""  # a CPU's onnxruntime backend
    for line in mar.cannot(planned.work.log, planned.onnx_backend, threads):
        print(line)
    print(f"Model Analyzer measured {len(rows)} configuration(s) in {seconds:.0f} s (load average {load:g} "
          f"on {cpu_cores()} cores).")
    return Measured.of(pd.DataFrame(rows), SEARCH_COLUMNS)


def binding_budget(found: pd.DataFrame, p: LabParams) -> int | None:
    """The budget the ranking applies: ``p99_budget_ms`` if set, else a whole ms between the p99s the
    search measured here, below the slower half of them (``between``), so that it binds on the machine
    that ran it (docs/decisions/2026-12-01-verdicts-at-a-glance.md). Printed with how many miss it; None
    where no search ran."""
    p99 = num(found, "p99_ms").dropna() if "p99_ms" in found else pd.Series(dtype=float)
    if p99.empty:
        print("no search ran: no budget to apply")
        return None
    if p.p99_budget_ms is not None:
        bound, why = int(p.p99_budget_ms), "p99_budget_ms, as set in the parameters cell"
    else:
        bound = between(p99.tolist())
        why = (f"between the {len(p99)} p99s the search measured here ({float(p99.min()):.1f}–"
               f"{float(p99.max()):.1f} ms), below the slower half: a budget that binds on this machine")
    over = int((p99 > bound).sum())
    print(f"The budget that binds: p99 ≤ {bound} ms at concurrency {p.constraint_concurrency} ({why}); "
          f"{over} of {len(p99)} configurations miss it. On the node, state your users' own in "
          "p99_budget_ms.")
    return bound


def between(p99s: list[float]) -> int:
    """A whole ms that the faster half of ``p99s`` (at least half of them) meet and the rest miss: halfway
    between the two p99s either side of the middle, or of the next pair at least 2 ms apart (a budget
    within a ms of a measured p99 would turn on its rounding); with no such pair, the middle p99 rounded up,
    which the faster half meet."""
    ordered = sorted(p99s)
    middle = (len(ordered) + 1) // 2
    for k in [*range(middle, len(ordered)), *range(middle - 1, 0, -1)]:
        if ordered[k] - ordered[k - 1] >= 2:
            return math.floor((ordered[k - 1] + ordered[k]) / 2)
    return math.ceil(ordered[middle - 1])


def rank(planned: Planned | None, bound: int | None, first: pd.DataFrame) -> pd.DataFrame:
    """The configurations Model Analyzer measured, ranked under ``bound`` as Model Analyzer ranks under a
    budget (those that meet it first, by inferences/s; ``rank``, ``picked``; its own rank kept as
    ``searched_rank``) and recorded under ``model_analyzer``; the two picks said in one line (``first``:
    Model Analyzer's table under the first budget). Not Model Analyzer itself: profiled again from its
    checkpoint it keeps the pass/fail of the first budget for its ranking (1.44, the note). The variants'
    model copies dropped after."""
    from servelab.triton import model_analyzer_results as mar

    if planned is None or bound is None or first.empty:
        return Nothing.says("no search ran: nothing to rank")
    table = pd.DataFrame(first).rename(columns={"rank": "searched_rank"})
    table["within_budget"] = num(table, "p99_ms") <= bound
    table = table.sort_values(["within_budget", "throughput"], ascending=[False, False], kind="stable")
    table.insert(0, "rank", range(1, len(table) + 1))
    table["picked"] = [bool(r == 1 and w) for r, w in zip(table["rank"], table["within_budget"], strict=True)]
    table["p99_budget_ms"] = bound
    table["first_budget_ms"] = planned.search.p99_budget_ms
    mar.prune(planned.work)
    rows = [{str(k): v for k, v in r.items()} for r in table.to_dict("records")]
    first_said = _pick_said(first, f"the first budget ({planned.search.p99_budget_ms} ms)", "Model Analyzer")
    print(f"{first_said[0].upper()}{first_said[1:]}; "
          f"{_pick_said(table, f'the budget that binds ({bound} ms)', 'the search')}.")
    return Measured.of(record(EXPERIMENT, rows), SEARCH_COLUMNS)


def _pick_said(found: pd.DataFrame, under: str, who: str) -> str:
    """"under the first budget (198 ms) Model Analyzer ranks 2 CPU instances, … first (58.1 images/s, p99
    212 ms)", or that no configuration met ``under``."""
    if found.empty or not bool(found["within_budget"].iloc[0]):
        return f"under {under} no configuration met it"
    top = found.iloc[0]
    return (f"under {under} {who} ranks {top['configuration']} first ({float(top['throughput']):.1f} "
            f"images/s, p99 {float(top['p99_ms']):.0f} ms)")


class Link:
    """A link to a file of the run, relative to where the notebook sits (the run's folder in a headless
    run, notebooks/ otherwise), shown as HTML in Jupyter and as its text elsewhere."""

    def __init__(self, text: str, href: str) -> None:
        self.text, self.href = text, href

    def _repr_html_(self) -> str:
        import html

        return f'<a href="{html.escape(self.href)}" target="_blank">{html.escape(self.text)}</a>'

    def __repr__(self) -> str:
        return f"{self.text}: {self.href}"


def summary(planned: Planned | None) -> Link | None:
    """Model Analyzer's own verdict sentence, and a link to its summary report (HTML)."""
    from servelab.triton import model_analyzer_results as mar

    if planned is None:
        print("no search ran: no summary")
        return None
    said = mar.sentence(planned.work, MODEL)
    print(f"Model Analyzer's summary says: {said}" if said else "Model Analyzer's summary has no verdict "
          "line")
    report = mar.summary_report(planned.work, MODEL)
    if not report.is_file():
        print("it wrote no summary report")
        return None
    return Link("Model Analyzer's summary report", _relative(report))


def _relative(path: Any) -> str:
    import os

    from servelab.core.paths import REPO_ROOT
    from servelab.results.store import run_folder

    base = run_folder() or REPO_ROOT / "notebooks"
    return os.path.relpath(path, base)


def apply_pick(triton: Triton, planned: Planned | None, found: pd.DataFrame) -> bool:
    """Set the lab's Triton to the configuration Model Analyzer ranks first (its instance count, max batch
    size and dynamic batching; the rest of the live config kept): the diff, then the reload. False, with
    one line, when there is none that met the constraint."""
    from servelab.triton import model_analyzer_results as mar
    from servelab.triton.config import ModelConfig, mc

    picked = found[found["picked"] == True] if "picked" in found else found.iloc[0:0]  # noqa: E712
    if planned is None or picked.empty:
        print("no configuration met the constraint: nothing to apply" if planned is not None
              else "no search ran: nothing to apply")
        return False
    variant = mar.variant_config(planned.work, str(picked["variant"].iloc[0]))
    cfg = ModelConfig()
    cfg.CopyFrom(live_config(triton, MODEL))
    gpus = sorted({g for group in cfg.instance_group for g in group.gpus}) or [int(mad.GPU)]  # yours
    del cfg.instance_group[:]
    for group in variant.instance_group or planned.deployed.instance_group:  # none: the model's own
        added = cfg.instance_group.add()
        added.CopyFrom(group)
        if added.kind == mc.ModelInstanceGroup.KIND_GPU and not added.gpus:  # MA's variants name no GPU:
            added.gpus.extend(gpus)  # Triton would put `count` instances on each GPU it sees
    cfg.max_batch_size = variant.max_batch_size
    cfg.ClearField("dynamic_batching")
    if variant.HasField("dynamic_batching"):
        cfg.dynamic_batching.CopyFrom(variant.dynamic_batching)
    print(f"Model Analyzer's pick, {picked['variant'].iloc[0]}: {mar.describe(variant)}")
    apply_config(triton, MODEL, cfg)
    return True


def measure_pick(triton: Triton, p: LabParams, applied: bool) -> pd.DataFrame:
    """The pick, now live, measured as yours was; one line and nothing when none was applied."""
    if not applied:
        return Nothing.says("no pick on the lab's Triton: nothing to measure")
    return measure_configuration(triton, p, PICK, "Model Analyzer's pick")


def measure_yours_again(triton: Triton, p: LabParams, yours: Any, applied: bool) -> pd.DataFrame:
    """Back to your configuration (``yours``: the config kept when you set it; the diff, the reload) and
    measured once more, right after the pick; nothing when no pick was measured."""
    if not applied:
        return Nothing.says("no pick was measured: your configuration's first reading stands alone")
    apply_config(triton, MODEL, yours)
    return measure_configuration(triton, p, YOURS, "yours, again")
