"""Generated Triton Python-backend runner for an ONNX model (local target only).

The Triton build in the nvidia-pytriton wheel has no ONNX Runtime backend, so on
the ``local`` target ``servelab.triton.repository.deploy_model`` copies this file
as ``model.py`` next to ``model.onnx`` and switches the staged config's backend
to ``python`` — same name, same inputs and outputs, same batching, taken from
the one staged config.pbtxt. On GPU targets the real ``onnxruntime`` backend
runs the staged config unchanged. Self-contained: needs only numpy and
onnxruntime in the server's Python.

Threads per instance: cores divided among the CPU instances (env
``SERVELAB_TRITON_THREADS`` = a number or ``default`` overrides), so two
instances do not fight over the same cores.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils


def _threads(model_config: dict[str, Any]) -> int:
    setting = os.environ.get("SERVELAB_TRITON_THREADS", "auto").strip().lower()
    if setting == "default":
        return 0  # onnxruntime's own choice
    if setting != "auto":
        return max(1, int(setting))
    groups = model_config.get("instance_group", [])
    instances = sum(int(g.get("count", 1)) for g in groups if g.get("kind", "KIND_CPU") == "KIND_CPU") or 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // instances)


class TritonPythonModel:
    """Runs model.onnx with ONNX Runtime: one session run per batch Triton hands it."""

    def initialize(self, args: dict[str, Any]) -> None:
        import onnxruntime as ort

        config = json.loads(args["model_config"])
        to_numpy = pb_utils.triton_string_to_numpy
        self.inputs = [(i["name"], to_numpy(i["data_type"])) for i in config["input"]]
        self.outputs = [(o["name"], to_numpy(o["data_type"])) for o in config["output"]]
        path = Path(args["model_repository"]) / args["model_version"] / "model.onnx"
        if not path.is_file():
            raise RuntimeError(f"ONNX model not found: {path}; build it with: python -m servelab.model build")
        options = ort.SessionOptions()
        options.intra_op_num_threads = _threads(config)
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        pb_utils.Logger.log_info(f"{config['name']}: onnxruntime runner, intra-op threads "
                                 f"{options.intra_op_num_threads or 'default'}")

    def execute(self, requests: list[Any]) -> list[Any]:
        feeds: dict[str, np.ndarray] = {}
        sizes: list[int] = []
        for name, dtype in self.inputs:
            parts = [pb_utils.get_input_tensor_by_name(r, name).as_numpy().astype(dtype, copy=False)
                     for r in requests]
            sizes = [len(p) for p in parts]
            feeds[name] = np.concatenate(parts)
        results = self.session.run([name for name, _ in self.outputs], feeds)
        splits = np.cumsum(sizes)[:-1]
        per_output = [np.split(result, splits) for result in results]
        return [
            pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor(name, per_output[j][i].astype(dtype, copy=False))
                for j, (name, dtype) in enumerate(self.outputs)
            ])
            for i in range(len(requests))
        ]

    def finalize(self) -> None:
        self.session = None
