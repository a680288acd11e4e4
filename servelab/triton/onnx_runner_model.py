"""Generated Triton Python-backend runner for an ONNX model (local target only).

The Triton build in the nvidia-pytriton wheel has no ONNX Runtime backend, so on
the ``local`` target ``servelab.triton.repository.deploy_model`` copies this file
as ``model.py`` next to ``model.onnx`` and switches the staged config's backend
to ``python`` — same name, same inputs and outputs, same batching, taken from
the one staged config.pbtxt. On GPU targets the real ``onnxruntime`` backend
runs the staged config unchanged. Self-contained: needs only numpy and
onnxruntime in the server's Python. A KIND_GPU instance (a GPU host running
this Triton build) gets the CUDA provider on its GPU when onnxruntime-gpu is
installed.

Threads per instance: the Python model's rule on the config's ``CPU_THREADS``
(``servelab.triton.instances.choose_threads``; env ``SERVELAB_TRITON_THREADS``
overrides), re-checked while serving because Triton adds/removes instances in
place when only the count changes, so two instances do not fight over the cores.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

from servelab.core.gpu import ort_providers, pad_rows
from servelab.triton.instances import (
    cpu_instances,
    ort_threads,
    running_instances,
    stub_arrays_problem,
    thread_setting,
)


def _providers(args: dict[str, Any]) -> list[Any]:
    """The CUDA provider on the instance's GPU for a KIND_GPU instance (onnxruntime-gpu), else the CPU."""
    import onnxruntime as ort

    if args.get("model_instance_kind") == "GPU":
        return ort_providers(ort, int(args.get("model_instance_device_id", 0)))
    return ["CPUExecutionProvider"]


class TritonPythonModel:
    """Runs model.onnx with ONNX Runtime: one session run per batch Triton hands it."""

    def initialize(self, args: dict[str, Any]) -> None:
        if problem := stub_arrays_problem(pb_utils, np):  # its inputs would arrive as garbage
            raise RuntimeError(problem)
        config = json.loads(args["model_config"])
        self.name = config["name"]
        to_numpy = pb_utils.triton_string_to_numpy
        self.inputs = [(i["name"], to_numpy(i["data_type"])) for i in config["input"]]
        self.outputs = [(o["name"], to_numpy(o["data_type"])) for o in config["output"]]
        self.path = Path(args["model_repository"]) / args["model_version"] / "model.onnx"
        if not self.path.is_file():
            raise RuntimeError(f"ONNX model not found: {self.path}; "
                               "build it with: python -m servelab.core.model build")
        self.next_thread_check = time.monotonic() + 2.0
        self.providers = _providers(args)
        # on CUDA every batch is padded to max_batch_size: one shape (see pad_rows)
        on_cuda = self.providers[0] != "CPUExecutionProvider"
        self.pad_to = int(config.get("max_batch_size", 0)) if on_cuda else 0
        parameters = config.get("parameters", {})
        self.setting = thread_setting(parameters.get("CPU_THREADS", {}).get("string_value", ""))
        self.session = self._session(ort_threads(self.setting, cpu_instances(config)))

    def _session(self, threads: int) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # idle intra-op threads would spin and steal the cores other instances need
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.threads = threads
        pb_utils.Logger.log_info(f"{self.name}: onnxruntime runner on {self.providers[0]}, "
                                 f"intra-op threads {threads or 'default'}")
        return ort.InferenceSession(str(self.path), options, providers=self.providers)

    def _retune_threads(self) -> None:
        """In ``auto`` mode, follow in-place instance-count changes (checked at most every 2 s)."""
        now = time.monotonic()
        if self.setting != "auto" or now < self.next_thread_check:
            return
        self.next_thread_check = now + 2.0
        wanted = ort_threads(self.setting, running_instances(__file__))
        if wanted != self.threads:
            self.session = self._session(wanted)

    def execute(self, requests: list[Any]) -> list[Any]:
        self._retune_threads()
        feeds: dict[str, np.ndarray] = {}
        sizes: list[int] = []
        for name, dtype in self.inputs:
            parts = [pb_utils.get_input_tensor_by_name(r, name).as_numpy().astype(dtype, copy=False)
                     for r in requests]
            sizes = [len(p) for p in parts]
            feeds[name] = pad_rows(np.concatenate(parts), self.pad_to)
        total = sum(sizes)
        results = [r[:total] for r in self.session.run([name for name, _ in self.outputs], feeds)]
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
