"""What a Model Analyzer search wrote, as the lab's rows: each configuration it measured, in its own order;
what it could not do here, from its log, one line each.

``model-analyzer profile`` exports ``results/metrics-model-inference.csv`` (one row per configuration and
concurrency, the columns its YAML's ``inference_output_fields`` names) sorted as it ranks them: the ones
that meet the constraints first, by its objective. Each variant's config.pbtxt is in its output model
repository; its summary report (HTML) in ``reports/summaries/<model>/``. ``prune`` keeps the configs and
drops the model copies, so a search leaves a few hundred KB in the run's folder.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from servelab.triton.config import ModelConfig, mc, read_config
from servelab.triton.model_analyzer import Search, Workspace

# the inference CSV's headings (Model Analyzer 1.44's record headers) → the lab's names
COLUMNS = {
    "Model": "model", "Batch": "batch", "Concurrency": "concurrency", "Model Config Path": "variant",
    "Instance Group": "instance_group", "Max Batch Size": "max_batch_size",
    "Satisfies Constraints": "within_budget", "Throughput (infer/sec)": "throughput",
    "p99 Latency (ms)": "p99_ms",
    "Avg Latency (ms)": "avg_ms", "Server Queue time (ms)": "queue_ms",
    "Server Compute Infer time (ms)": "compute_infer_ms",
}
# MA's own lines that say it could not do something on this machine (``cannot`` says each in one line)
NO_GPU_LINE = re.compile(r'(GPU|Server) output field "gpu_\w+", has no data')


def inference_csv(work: Workspace) -> Path:
    return work.export / "results" / "metrics-model-inference.csv"


def summary_report(work: Workspace, model: str) -> Path:
    """Model Analyzer's summary (HTML, its plots embedded) for ``model``."""
    return work.export / "reports" / "summaries" / model / "result_summary.html"


def read_inference(work: Workspace) -> pd.DataFrame:
    """The inference CSV with the lab's column names and ``rank`` (1 = what Model Analyzer ranks first);
    an empty frame when it wrote none."""
    path = inference_csv(work)
    if not path.is_file():
        return pd.DataFrame()
    table = pd.read_csv(path).dropna(how="all")
    unknown = [c for c in table.columns if c not in COLUMNS]
    if unknown:
        raise ValueError(f"{path.name} has columns this lab does not read: {unknown} (a Model Analyzer "
                         "other than constraints-model-analyzer.txt's?)")
    table = table.rename(columns=COLUMNS)
    table["within_budget"] = [str(v).strip().lower() == "yes" for v in table["within_budget"]]
    table.insert(0, "rank", range(1, len(table) + 1))
    return table.reset_index(drop=True)


def variant_config(work: Workspace, variant: str) -> ModelConfig:
    """The config.pbtxt Model Analyzer wrote for ``variant`` (a ModelConfig)."""
    return read_config(work.variants / variant)


def describe(cfg: ModelConfig) -> str:
    """A configuration in the knobs 05, 06 and 07 turn: '2 CPU instances, max batch 2, dynamic batching
    on'."""
    groups = ", ".join(f"{g.count} {'GPU' if g.kind == mc.ModelInstanceGroup.KIND_GPU else 'CPU'} "
                       f"instance{'s' * (g.count != 1)}" for g in cfg.instance_group) or "1 instance"
    batching = "on" if cfg.HasField("dynamic_batching") else "off"
    return f"{groups}, max batch {cfg.max_batch_size}, dynamic batching {batching}"


def knobs(cfg: ModelConfig) -> dict[str, Any]:
    """The searched fields of a config, as the rows record them."""
    on = cfg.HasField("dynamic_batching")
    return {"instances": sum(g.count for g in cfg.instance_group) or 1,
            "kind": mc.ModelInstanceGroup.Kind.Name(cfg.instance_group[0].kind) if cfg.instance_group else "",
            "max_batch_size": int(cfg.max_batch_size), "dynamic_batching": on,
            "preferred_batch_sizes": list(cfg.dynamic_batching.preferred_batch_size) if on else [],
            "max_queue_delay_us": int(cfg.dynamic_batching.max_queue_delay_microseconds) if on else None}


def same_knobs(a: ModelConfig, b: ModelConfig) -> bool:
    """Whether two configs agree on what the search varies: instances, max batch size, batching on/off."""
    keys = ("instances", "max_batch_size", "dynamic_batching")
    return all(knobs(a)[k] == knobs(b)[k] for k in keys)


def rows(work: Workspace, search: Search) -> list[dict[str, Any]]:
    """One row per configuration measured, in Model Analyzer's order, with the variant's knobs, the
    constraint, and ``picked`` on the one it ranks first when that one meets the constraint."""
    table = read_inference(work)
    out: list[dict[str, Any]] = []
    for record in table.to_dict("records"):
        cfg = variant_config(work, str(record["variant"]))
        out.append({"search": work.root.name, "mode": search.mode, "p99_budget_ms": search.p99_budget_ms,
                    **{str(k): v for k, v in record.items() if k != "instance_group"}, **knobs(cfg),
                    "configuration": describe(cfg),
                    "picked": bool(record["rank"] == 1 and record["within_budget"])})
    return out


def sentence(work: Workspace, model: str) -> str:
    """Model Analyzer's own one-sentence verdict from its summary ("In 5 measurements across 5
    configurations, …"), or "" when the summary has none."""
    try:
        text = summary_report(work, model).read_text(errors="replace")
    except OSError:
        return ""
    plain = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())
    found = re.search(r"In \d+ measurements? across \d+ configurations?,.*?\.(?=\s|$)", plain)
    return found.group(0) if found else ""


def prune(work: Workspace) -> None:
    """Keep each variant's config.pbtxt; drop the model files Model Analyzer copied or linked beside them
    and the repository it read (a copy of the deployed model)."""
    if work.variants.is_dir():
        for variant in work.variants.iterdir():
            for entry in variant.iterdir() if variant.is_dir() else ():
                if entry.name == "config.pbtxt":
                    continue
                if entry.is_symlink() or entry.is_file():
                    entry.unlink()
                else:
                    shutil.rmtree(entry)
    shutil.rmtree(work.repository, ignore_errors=True)


def cannot(log: Path, onnx_backend: bool, cpu_threads: str = "") -> list[str]:
    """What Model Analyzer could not do on this machine, one line each (never its warnings as they are):
    configurations it could not measure, GPU metrics without a GPU, the ONNX Runtime backend where this
    Triton has none, the backend's thread count per instance on a CPU (``cpu_threads``: the deployed
    model's ``intra_op_thread_count``, which every variant keeps)."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        text = ""
    lines = []
    dropped = [name for name, after in re.findall(r"Profiling (\S+): concurrency=\d+\n(.*?)(?=Profiling |\Z)",
                                                  text, re.S)
               if "no valid requests recorded" in after or "failed with exit status" in after]
    if dropped:
        lines.append(f"Not measured: {', '.join(dropped)} (perf_analyzer found no stable measurement "
                     "within its tries, or failed; export/perf_analyzer_error.log says which): Model "
                     "Analyzer left it out of its ranking, and a brute search stops that instance count's "
                     "batch sizes there.")
    if NO_GPU_LINE.search(text):
        lines.append("No GPU metrics: this machine has no GPU, so Model Analyzer ran CPU-only (KIND_CPU "
                     "variants) and its GPU columns (memory, utilisation, power) are empty.")
    if not onnx_backend:
        lines.append("No ONNX Runtime backend in this Triton (the nvidia-pytriton wheel's on local; an image "
                     "without one on docker): Model Analyzer searched the Python-backend runner that serves "
                     "model.onnx here, not the onnxruntime backend a GPU node's Triton runs.")
    if cpu_threads:
        lines.append(f"Each variant kept the deployed model's intra_op_thread_count ({cpu_threads}, set for "
                     "one instance): Model Analyzer does not resize it per instance count as the lab does, "
                     "so its variants of n instances shared the cores n ways over.")
    return lines
