"""Triton Python-backend model: the Food-11 classifier (MobileNetV2, PyTorch), read top to bottom.

The contract with Triton: it creates one ``TritonPythonModel`` per instance
that ``instance_group`` in config.pbtxt asks for, each in its own process.
``initialize(args)`` runs once per instance and loads the model on that
instance's device. ``execute(requests)`` gets a *list* of requests — one, or
several if a ``dynamic_batching`` block lets Triton combine them — and must
return one response per request, in the same order. Each request's ``INPUT_IMAGE`` holds base64 text
of an image file (raw image bytes work too).

The config's ``parameters`` (explained in config.pbtxt): ``CPU_THREADS``
(torch threads per CPU instance) and ``EXECUTION`` (``batch``: one forward pass
for everything Triton hands over; ``per_request``: one per request, the plain
way the lab compares with). Shared helpers: ``servelab/triton/instances.py``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Loads the model on this instance's device; classifies every image of every request."""

    def initialize(self, args: dict[str, Any]) -> None:
        config = json.loads(args["model_config"])  # config.pbtxt, as JSON
        _find_servelab(config)
        from servelab.triton.instances import CpuThreads, stub_arrays_problem

        if problem := stub_arrays_problem(pb_utils, np):  # refuse to load, rather than die at a request
            raise RuntimeError(problem)
        import torch

        from servelab.core.gpu import torch_gpu_usable
        from servelab.core.model import load_model

        # The instance's kind and device come from instance_group: KIND_GPU → a GPU id, KIND_CPU → the CPU.
        # A GPU this torch cannot run (no driver it accepts, no kernels for it) → the CPU, said in the log
        gpu_id = int(args.get("model_instance_device_id") or 0)
        wants_gpu = args.get("model_instance_kind") == "GPU"
        on_gpu = wants_gpu and torch_gpu_usable(torch, gpu_id, warn=pb_utils.Logger.log_warn)
        if wants_gpu and not on_gpu:
            pb_utils.Logger.log_warn(f"food_classifier: KIND_GPU, but torch {torch.__version__} cannot run "
                                     f"GPU {gpu_id} here: this instance computes on the CPU")
        self.device = f"cuda:{gpu_id}" if on_gpu else "cpu"
        self.threads = CpuThreads(torch, config, __file__, on_gpu)  # CPU_THREADS
        self.per_request = _parameter(config, "EXECUTION", "batch").lower() == "per_request"
        weights = Path(args["model_repository"]) / args["model_version"] / "food11.pth"
        if not weights.is_file():
            raise RuntimeError(f"weights not found: {weights}; "
                               "build them with: python -m servelab.core.model build")
        self.model = load_model(weights, self.device)  # MobileNetV2 with 11 outputs, in eval mode
        self.torch = torch
        pb_utils.Logger.log_info(
            f"food_classifier instance {args.get('model_instance_name')} on {self.device}, "
            f"threads={torch.get_num_threads()}, execution={'per_request' if self.per_request else 'batch'}")

    def execute(self, requests: list[Any]) -> list[Any]:
        from servelab.core.preprocess import ImageError
        from servelab.triton.instances import decode_image

        if said := self.threads.follow():  # CPU: Triton may have added or removed instances in place
            pb_utils.Logger.log_info(f"food_classifier: {said}")
        # 1. Every request's images → one array each [n, 3, 224, 224], or the reason it failed
        images: list[np.ndarray | str] = []
        for request in requests:
            items = pb_utils.get_input_tensor_by_name(request, "INPUT_IMAGE").as_numpy().reshape(-1)
            try:
                if items.size == 0:
                    raise ImageError("INPUT_IMAGE holds no image")
                images.append(np.stack([decode_image(item) for item in items]))
            except ImageError as exc:
                images.append(f"bad image: {exc}")
            except Exception as exc:  # anything else about this request fails it alone, not the batch
                images.append(f"could not process the image: {exc.__class__.__name__}: {exc}")
        good = [a for a in images if not isinstance(a, str)]

        # 2. The forward pass: ONE for all the requests Triton handed over (what makes batching pay)
        if self.per_request:
            results = [self._classify(a) for a in good]
        elif good:
            labels, probs = self._classify(np.concatenate(good))
            ends = np.cumsum([len(a) for a in good])[:-1]  # split the batch back per request
            results = list(zip(np.split(labels, ends), np.split(probs, ends), strict=True))
        else:
            results = []

        # 3. One response per request, in order: its labels and probabilities, or its error
        answers = iter(results)
        return [pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(a))
                if isinstance(a, str) else self._response(*next(answers)) for a in images]

    def _classify(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """[N, 3, 224, 224] → (Food-11 label, softmax probability of that label) per image."""
        from servelab.core.labels import CLASSES

        with self.torch.inference_mode():
            logits = self.model(self.torch.from_numpy(batch).to(self.device))
            best, index = self.torch.softmax(logits.float(), dim=1).max(dim=1)
        labels = np.array([[CLASSES[int(i)].encode()] for i in index.cpu().numpy()], dtype=np.object_)
        return labels, best.cpu().numpy().astype(np.float32).reshape(-1, 1)

    def _response(self, labels: np.ndarray, probs: np.ndarray) -> Any:
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("FOOD_LABEL", labels),
                                                          pb_utils.Tensor("PROBABILITY", probs)])

    def finalize(self) -> None:
        self.model = None


def _parameter(config: dict[str, Any], key: str, default: str) -> str:
    """A string ``parameters`` entry of config.pbtxt (``default`` when absent or empty)."""
    value = config.get("parameters", {}).get(key, {}).get("string_value", "") or default
    return str(value).strip()


def _find_servelab(config: dict[str, Any]) -> None:
    """Make ``servelab`` importable: installed (the Docker image), ``SERVELAB_ROOT`` (env or config
    parameter), or a folder above this file (the checkout). The stub ignores PYTHONPATH."""
    try:
        import servelab  # noqa: F401
        return
    except ImportError:
        pass
    for candidate in (os.environ.get("SERVELAB_ROOT"), _parameter(config, "SERVELAB_ROOT", "") or None,
                      *map(str, Path(__file__).parents)):
        if candidate and (Path(candidate) / "servelab" / "__init__.py").is_file():
            sys.path.insert(0, candidate)
            return
    raise RuntimeError("cannot import servelab: install it or set SERVELAB_ROOT to the lab's checkout")
