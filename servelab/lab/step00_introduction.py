"""Notebook 00: the machine the lab runs on, what a CPU-only run can show, and the model files.
"""

from __future__ import annotations

import os

import pandas as pd

from servelab.core.paths import ARTIFACTS_DIR, REPO_ROOT, STAGING_DIR
from servelab.results.store import host_facts

CPU_VS_GPU = [
    ("Queuing: latency grows with concurrency, compute stays flat (steps 3-4)", "yes, fully"),
    ("ONNX Runtime faster than eager PyTorch per image (steps 3, 6)", "yes, about 2.5-3x"),
    ("More instances than cores never helps; threads per instance matter (step 5)", "yes, sharply"),
    ("Instances spread over two GPUs raise GPU utilisation (steps 5, 6)",
     "no: no GPU; instances share cores"),
    ("Client batch 16 costs little more than one image (step 4)", "no: a CPU batch costs ~its size"),
    ("Dynamic batching keeps latency flat as the rate rises (step 7)",
     "partly: batches form (see the stats) but add no throughput"),
    ("GPU utilisation (nvtop) during a run", "no: CPU utilisation per core instead"),
    ("Triton's ONNX Runtime backend (step 6)",
     "approximated: the local Triton serves model.onnx through a Python-backend runner"),
]


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


def cpu_vs_gpu() -> pd.DataFrame:
    """Which of the lab's lessons a CPU-only run reproduces."""
    return pd.DataFrame(CPU_VS_GPU, columns=["effect on the GPU node", "on a CPU-only run"])


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
