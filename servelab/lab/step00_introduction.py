"""Notebook 00: the machine the lab runs on, what each lesson needs and what to expect where, and the
model files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pandas as pd

from servelab.core.lab_steps import LAB_STEPS, LabStep
from servelab.core.paths import ARTIFACTS_DIR, REPO_ROOT, STAGING_DIR
from servelab.results.store import host_facts

ORIGINAL_LAB = "https://github.com/teaching-on-testbeds/serve-system-chi"
NOTE = "docs/decisions/2026-11-24-gpu-expectations.md"
SOURCES = {
    "lab": f"the original lab's recorded runs on its two-P100 node, {ORIGINAL_LAB} (snippets/fastapi.md, "
           f"snippets/triton.md); each figure and where it is: {NOTE}",
    "batcher": "how Triton forms batches: https://github.com/triton-inference-server/server/blob/main/docs/"
               f"user_guide/batcher.md; the original lab's batching run: {NOTE}",
    "llm": "Yu et al., Orca (OSDI 2022) and Kwon et al., PagedAttention (SOSP 2023); "
           "docs/decisions/2026-11-23-llm-serving.md",
    "ray": "Ray Serve's documentation, https://docs.ray.io/en/latest/serve/autoscaling-guide.html and "
           "https://docs.ray.io/en/latest/serve/resource-allocation.html; "
           "docs/decisions/2026-11-23-ray-serve.md (not measured on the node by this team yet)",
}


@dataclass(frozen=True)
class Lesson:
    """One row of notebook 00's table: the lesson, what it needs, what to expect on the GPU node
    (with its source's key in ``SOURCES``) and what a CPU-only run does with it."""

    lesson: str
    needs: str
    expected: str
    source: str
    cpu_run: str


MEASURED = "measured the same way; each notebook prints what this run shows"
LESSONS = [
    Lesson("Queuing: where a request's time goes as clients are added (03, 04)", "any machine",
           "latency grows with the clients while compute stays flat: 8 clients waited 132 ms in the "
           "queue for 19 ms of compute (Python backend), GPUs mostly idle in nvtop", "lab", MEASURED),
    Lesson("An inference runtime: ONNX Runtime against eager PyTorch (03, 06)", "any machine",
           "ONNX Runtime answers one client faster: FastAPI median 17 ms → 9 ms; Triton compute "
           "19 ms (Python backend) → 4.6 ms (ONNX backend)", "lab", MEASURED),
    Lesson("Model instances, over two GPUs (05, 06)", "two GPUs for the 2+2 and 4+4 steps",
           "2 instances on each GPU: 52 → 193 infer/s at 8 clients; 4 on each: 119 infer/s, the "
           "Python backend's overhead being the limit; the ONNX backend on both GPUs: 1182 infer/s",
           "lab", "the counts are scaled to the cores (1, the cores, twice the cores): the instances "
           "share the CPU's cores; a threads-per-instance step runs too"),
    Lesson("Client-side batching: 16 images per request (04)", "any machine",
           "a batch of 16 costs little more than one image: 52 → 657 images/s from one client",
           "lab", MEASURED),
    Lesson("Dynamic batching under bursty arrivals (07)", "any machine",
           "executions carry several requests although each client sends one image; at 8 clients "
           "52 → 79 infer/s", "batcher",
           MEASURED + "; the arrival rates are fractions of this machine's measured capacity"),
    Lesson("GPU utilisation while the load runs: nvtop (04, 05, 06 and 07)", "a GPU",
           "low while requests queue for the Python backend; full with the ONNX backend on both GPUs",
           "lab", "not available: CPU utilisation per core instead"),
    Lesson("Triton's onnxruntime backend (06)", "the GPU image (its Triton has the backend)",
           "the ONNX model served with no Python code per request", "lab",
           "approximated: the local Triton serves model.onnx through a Python-backend runner"),
    Lesson("A language model: prefill vs decode, static vs continuous batching, the KV cache (09)",
           "any machine; vLLM beside it needs a GPU of compute capability 7.0 or higher",
           "a decode step for many sequences costs about what one costs, so batching multiplies output "
           "tokens/s; continuous batching keeps the batch full while a static batch waits for its longest "
           "request; the KV cache in GPU memory bounds the sequences at once", "llm",
           MEASURED + "; the lab's own 4-layer model, the rates fractions of what it serves one request "
           "at a time"),
    Lesson("Scaling out: replicas behind a router, autoscaling on queue depth, load shedding (10)",
           "any machine; two nodes for the multi-node plan",
           "with num_gpus 0.5 two replicas share each GPU, so an added replica adds a GPU's share of "
           "capacity and the autoscaler's replica drains the queue", "ray",
           "the replicas, Serve's proxy and the load generator share the CPU's cores; the rates are "
           "fractions of one replica's measured capacity, and a verdict whose load never outran one "
           "replica says so"),
]


@dataclass
class LessonTable:
    """The lessons as a table: Markdown in Jupyter, the same text as plain output (no cell cut short)."""

    rows: list[Lesson]
    sources: dict[str, str]
    expected_header: str = "Expected on the GPU node (source below)"

    def _cells(self) -> list[list[str]]:
        return [[r.lesson, r.needs, f"{r.expected} [{r.source}]", r.cpu_run] for r in self.rows]

    def _repr_markdown_(self) -> str:
        header = ["lesson (notebooks)", "needs", self.expected_header, "on a CPU-only run (target local)"]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cells) + " |" for cells in self._cells()]
        lines += ["", *(f"[{key}] {text}  " for key, text in self.sources.items())]
        return "\n".join(lines)

    def __repr__(self) -> str:
        blocks = [f"{r.lesson}\n  needs: {r.needs}\n  {self.expected_header.split(' (')[0]}: {r.expected} "
                  f"[{r.source}]\n  on a CPU-only run: {r.cpu_run}" for r in self.rows]
        return "\n".join([*blocks, "", *(f"[{key}] {text}" for key, text in self.sources.items())])


WHERE_WORDS = {"hub": "Chameleon's Jupyter (target chameleon)", "node": "the node's Jupyter (target docker)",
               "any": "anywhere: read it"}
LEASE_WORDS = {"before": "before the lease", "start": "at the lease's start", "core": "in the lease: core",
               "optional": "in the lease, if there is time", "end": "at the lease's end, after the rest"}


@dataclass
class StepTable:
    """The lab's steps as a table: Markdown in Jupyter, the same text as plain output (no cell cut short)."""

    steps: tuple[LabStep, ...]

    def _repr_markdown_(self) -> str:
        header = ["step", "notebook", "runs in", "when", "what it measures"]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += [f"| {s.number} | `{s.name}`: {s.title} | {WHERE_WORDS[s.where]} | {LEASE_WORDS[s.lease]} | "
                  f"{s.measures} |" for s in self.steps]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return "\n".join(f"{s.number} {s.name}: {s.title}\n  runs in {WHERE_WORDS[s.where]}, "
                         f"{LEASE_WORDS[s.lease]}" + f"\n  measures {s.measures}" * bool(s.measures)
                         for s in self.steps)


def lab_steps() -> StepTable:
    """The lab's steps as its registry lists them (``servelab.core.lab_steps``): the notebook, where it runs
    on Chameleon, when in the lease, and what it measures."""
    return StepTable(LAB_STEPS)


def lessons() -> LessonTable:
    """What each lesson needs, what to expect on the GPU node (labelled, with its source) and what a
    CPU-only run does with it; never what this machine's run will show (the notebooks compute that)."""
    return LessonTable(LESSONS, SOURCES)


def machine_facts() -> pd.DataFrame:
    """The facts every measurement is stored with: host, cores, GPU, Python."""
    facts = dict(host_facts())
    try:
        import psutil

        facts["memory_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
        facts["load_average_1m"] = round(os.getloadavg()[0], 2)
    except (ImportError, OSError):
        pass
    return pd.DataFrame({"fact": list(facts), "value": [str(v) for v in facts.values()]})


def check_artifacts() -> pd.DataFrame:
    """The model files every service loads; a missing one names the command that builds it."""
    from servelab.core.model import require_file

    files = [ARTIFACTS_DIR / "food11.pth", ARTIFACTS_DIR / "food11.onnx",
             STAGING_DIR / "food_classifier" / "1" / "food11.pth",
             STAGING_DIR / "food_classifier_onnx" / "1" / "model.onnx"]
    for path in files:
        require_file(path)
    return pd.DataFrame({"file": [str(p.relative_to(REPO_ROOT)) if p.is_relative_to(REPO_ROOT) else str(p)
                                  for p in files],
                         "MB": [round(p.stat().st_size / 1e6, 1) for p in files]})
