"""The registry of the lab's steps: one entry per notebook, and every list, range and count of notebooks
derives from it.

A **lab step** is one notebook, ``notebooks/<name>.py`` (Jupytext, the source) and its ``.ipynb``, with
its module(s) under ``servelab/lab/`` (``step<NN>_<topic>.py``; the shape: ``servelab/lab/__init__.py``).
``LAB_STEPS`` lists them in number order; each ``LabStep`` records:

- ``number`` ("03"), ``name`` ("03_fastapi": the notebook's file stem), ``title`` (its first heading,
  without the number), ``short`` (a few words, where the lab names steps in a sentence);
- ``where`` it runs on Chameleon: ``"node"`` (the Jupyter server 02 starts on the node, target docker),
  ``"hub"`` (Chameleon's JupyterHub, target chameleon) or ``"any"`` (any machine, nothing to run);
- ``lease``: when in a lease it runs: ``"before"`` it (read or reserve), at its ``"start"`` (launch),
  ``"core"`` (on the node: the original lab's arc, which every lease must hold), ``"optional"`` (on the
  node, if there is time), at its ``"end"`` (gives the node back, after every other step); the
  properties ``core`` and ``last`` read it;
- ``measures``: what it measures, in a line; ``tables``: the results tables it writes rows to
  (``results/<run>/<table>.jsonl``, ``servelab.results.schema``); ``rows``: per table, the names its rows
  carry (their ``step`` column), which its report reads and the verdict counts;
- ``report``: its modules under ``servelab.lab`` that draw its report sections and check its expected
  effects (``sections``, ``rules``: ``servelab.lab.run_report``).

Derived here: ``numbers`` (by where, core, measuring), ``ranges`` ("03–07 and 09–11"), ``on_the_node``,
``core_on_the_node``, ``optional_on_the_node``, ``in_the_hub``, ``measuring``, ``written_by`` (table →
numbers), ``run_order``.
Derived elsewhere: the report's notebooks (``servelab.lab.run_report``), the reference's coverage
(``servelab.results.reference``), where the node's notebooks run (``servelab.targets.compose``), the
site's links (``servelab.site.links``), the results overview (``servelab.lab.common``), the headless
run's order (``servelab.lab.runner``), the lease plan (``servelab.lab.lease_plan``) and the tests' lists.
Adding a step: ``docs/guides/contributing.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

WHERE = ("node", "hub", "any")
LEASE = ("before", "start", "core", "optional", "end")


@dataclass(frozen=True)
class LabStep:
    """One lab step (a notebook): see the module's docstring for each field."""

    number: str
    name: str
    title: str
    where: str
    short: str
    lease: str
    measures: str = ""
    tables: tuple[str, ...] = ()
    rows: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    report: tuple[str, ...] = ()

    @property
    def core(self) -> bool:
        """Part of the lease's core on the node (else optional there, or not on the node)."""
        return self.lease == "core"

    @property
    def last(self) -> bool:
        """Gives the node back: a headless run runs it after every other step."""
        return self.lease == "end"

    @property
    def notebook(self) -> str:
        """Its notebook's path in the checkout, as students open it."""
        return f"notebooks/{self.name}.ipynb"

    @property
    def triton_rows(self) -> tuple[str, ...]:
        """The names of its rows in the ``triton`` table (what the verdict counts warnings over)."""
        return tuple(self.rows.get("triton", ()))


LAB_STEPS: tuple[LabStep, ...] = (
    LabStep("00", "00_introduction", "Serving a food classifier: where does the time go?", "any",
            "introduction", "before"),
    LabStep("01", "01_reserve_node", "Reserve the node", "hub", "reserve", "before"),
    LabStep("02", "02_launch_server", "Launch and set up the server", "hub", "launch", "start"),
    LabStep("03", "03_fastapi", "A FastAPI inference service", "node", "FastAPI", "core",
            measures="FastAPI with PyTorch, then ONNX Runtime: sequential and concurrent requests, the "
                     "stages of one request, worker processes; GourmetGram's uploads",
            tables=("fastapi", "flask"), report=("step03_fastapi",)),
    LabStep("04", "04_triton_python", "Triton Inference Server with the Python backend", "node",
            "Triton's Python backend", "core",
            measures="perf_analyzer at rising concurrency: queue vs compute; one client batch",
            tables=("triton", "flask"), rows={"triton": ("python_concurrency", "python_client_batch")},
            report=("step04_triton_python",)),
    LabStep("05", "05_instance_scaling", "Model instances: how many, and where", "node", "instances",
            "core", measures="throughput and latency as model instances are added; threads per instance",
            tables=("triton",), rows={"triton": ("instance_scaling", "threads_lesson")},
            report=("step05_instance_scaling",)),
    LabStep("06", "06_onnx_backend", "An optimised backend: ONNX Runtime", "node", "ONNX Runtime backend",
            "core", measures="the ONNX Runtime backend against the Python backend, and its scaling",
            tables=("triton", "flask"), rows={"triton": ("onnx_backend", "python_vs_onnx", "onnx_scaling")},
            report=("step06_onnx_backend",)),
    LabStep("07", "07_dynamic_batching", "Bursty traffic and dynamic batching", "node", "dynamic batching",
            "core", measures="one instance's capacity; constant vs Poisson arrivals; dynamic batching",
            tables=("triton",), rows={"triton": ("capacity", "arrivals", "dynamic_batching")},
            report=("step07_dynamic_batching",)),
    LabStep("08", "08_teardown", "Tear down", "hub", "tear down", "end"),
    LabStep("09", "09_llm_serving",
            "Serving a language model: prefill, decode, static and continuous batching", "node",
            "LLM serving", "optional",
            measures="an LLM engine's TTFT and decode; static vs continuous batching; the KV cache",
            tables=("llm",), rows={"llm": ("single", "mixed", "equal", "kv_cache", "vllm")},
            report=("step09_llm_serving", "step09_vllm")),
    LabStep("10", "10_scaling_out", "Scaling out: replicas, autoscaling on queue depth, load shedding",
            "node", "scaling out", "optional",
            measures="Ray Serve replicas under a step load: fixed vs autoscaled, shedding; Triton's queue "
                     "policy",
            tables=("scaling", "scaling_series"), report=("step10_report",)),
    LabStep("11", "11_model_analyzer", "Let Triton's Model Analyzer search the configuration", "node",
            "Model Analyzer", "optional",
            measures="Model Analyzer's search under a p99 constraint; its pick beside your configuration",
            tables=("triton", "model_analyzer"),
            rows={"triton": ("your_configuration", "model_analyzer_pick")},
            report=("step11_report",)),
)


def lab_step(number: str) -> LabStep:
    """The step numbered ``number`` ("03", or a notebook's name "03_fastapi")."""
    for step in LAB_STEPS:
        if step.number == str(number)[:2]:
            return step
    raise KeyError(f"no lab step {number!r}: the lab's are {', '.join(s.number for s in LAB_STEPS)}")


def numbers(where: str | None = None, core: bool | None = None, measuring: bool | None = None,
            steps: Iterable[LabStep] | None = None) -> list[str]:
    """The numbers of the steps that run ``where``, are (not) in the core, (do not) write results."""
    return [s.number for s in (LAB_STEPS if steps is None else steps)
            if (where is None or s.where == where) and (core is None or s.core == core)
            and (measuring is None or bool(s.tables) == measuring)]


def and_list(items: Iterable[str], last: str = "and") -> str:
    """"03", "03 and 09", "03, 04 and 09" (``last``: "or")."""
    items = list(items)
    return f" {last} ".join(items) if len(items) < 3 else ", ".join(items[:-1]) + f" {last} {items[-1]}"


def ranges(nums: Iterable[str], last: str = "and") -> str:
    """Numbers as the lab says them, in the order given: three or more in a row joined ("03–07"), then
    listed: ["03", …, "07", "09", "10", "11"] → "03–07 and 09–11"; ["09", "10"] → "09 and 10"."""
    groups: list[list[str]] = []
    for n in nums:
        if groups and n.isdigit() and groups[-1][-1].isdigit() and int(n) == int(groups[-1][-1]) + 1:
            groups[-1].append(n)
        else:
            groups.append([n])
    return and_list([x for g in groups for x in (g if len(g) < 3 else [f"{g[0]}–{g[-1]}"])], last)


def on_the_node() -> str:
    """The steps that run in the node's Jupyter server, as a range text ("03–07 and 09–11")."""
    return ranges(numbers("node"))


def core_on_the_node() -> str:
    """The lease's core on the node ("03–07"); the other node steps are optional."""
    return ranges(numbers("node", core=True))


def optional_on_the_node() -> str:
    """The node's steps a lease runs if there is time ("09–11")."""
    return ranges(numbers("node", core=False))


def in_the_hub() -> list[str]:
    """The steps a student opens in Chameleon's JupyterHub (and 00, read anywhere)."""
    return [s.number for s in LAB_STEPS if s.where != "node"]


def measuring() -> list[str]:
    """The steps that measure (write results) on the node: what a reference run can cover."""
    return numbers("node", measuring=True)


def written_by(table: str) -> list[str]:
    """The steps that write rows to ``table``."""
    return [s.number for s in LAB_STEPS if table in s.tables]


def run_order(names: Iterable[str]) -> list[str]:
    """Notebook names in the order a headless run executes them: the lab's, the teardown last."""
    last = {s.name for s in LAB_STEPS if s.last}
    return sorted(names, key=lambda name: (name in last, name))
