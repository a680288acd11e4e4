"""Triton Python-backend model: Food-11 MobileNetV2 (PyTorch) behind INPUT_IMAGE.

Each request carries base64 text of an image file (raw image bytes are accepted
too). ``execute`` decodes every image of every request, preprocesses with the
lab's shared code (``servelab.core.preprocess``, the same as FastAPI and Flask) and
runs ONE forward pass for the whole batch Triton hands it — that is what makes
dynamic batching worth anything. A request whose image is broken gets an error
response of its own; the others in the batch are still answered.

Config parameters (config.pbtxt ``parameters``):
- ``CPU_THREADS``: ``auto`` (the cores but one divided among the running CPU instances, so
  several instances do not oversubscribe the cores; re-checked while serving,
  because Triton adds/removes instances in place when only the count changes),
  ``default`` (leave torch alone: the plain implementation the lab compares
  with) or a number. Env ``SERVELAB_TRITON_THREADS`` overrides it.
- ``EXECUTION``: ``batch`` (one forward pass per execute) or ``per_request``
  (one forward pass per request: the plain implementation the lab compares with).
- ``SERVELAB_ROOT``: where the ``servelab`` package lives when it is not installed
  (env ``SERVELAB_ROOT`` works too; otherwise the folders above this file are tried).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG", b"GIF8", b"RIFF", b"BM", b"II*\x00", b"MM\x00*")


def _parameters(model_config: dict[str, Any]) -> dict[str, str]:
    return {k: v.get("string_value", "") for k, v in model_config.get("parameters", {}).items()}


def _import_servelab(params: dict[str, str]) -> None:
    """Make ``servelab`` importable: installed (docker image), env/parameter, or a parent folder."""
    try:
        import servelab  # noqa: F401
        return
    except ImportError:
        pass
    candidates = [os.environ.get("SERVELAB_ROOT"), params.get("SERVELAB_ROOT"),
                  *map(str, Path(__file__).parents)]
    for candidate in candidates:
        if candidate and (Path(candidate) / "servelab" / "__init__.py").is_file():
            sys.path.insert(0, candidate)
            return
    raise RuntimeError("cannot import servelab: install it or set SERVELAB_ROOT to the lab's checkout")


def choose_threads(setting: str, instances: int, on_gpu: bool) -> int | None:
    """Intra-op threads for this instance; None leaves torch's default (all cores)."""
    setting = os.environ.get("SERVELAB_TRITON_THREADS", setting or "auto").strip().lower()
    if setting == "default":
        return None
    if setting != "auto":
        return max(1, int(setting))
    if on_gpu:
        return 1  # the CPU only decodes images; the GPU does the maths
    from servelab.core.cpu import cpu_cores

    # One core stays free for Triton's front end, the stubs' image decoding and
    # the client: PyTorch's OpenMP team spins between layers, and when it wants
    # every core beside a busy perf_analyzer a 25 ms forward pass took 440 ms
    # (measured on the 2-core lab machine: 2.3 infer/s at concurrency 1).
    return max(1, (cpu_cores() - 1) // max(1, instances))


class TritonPythonModel:
    """Loads the model on the instance's device; classifies batches of images."""

    def initialize(self, args: dict[str, Any]) -> None:
        model_config = json.loads(args["model_config"])
        params = _parameters(model_config)
        _import_servelab(params)
        import torch

        from servelab.core.model import load_model
        from servelab.triton.instances import cpu_instances

        kind = args.get("model_instance_kind", "CPU")
        on_gpu = kind == "GPU" and torch.cuda.is_available()
        self.device = f"cuda:{args.get('model_instance_device_id', '0')}" if on_gpu else "cpu"
        self.thread_setting = params.get("CPU_THREADS", "auto")
        self.adapt_threads = (not on_gpu and os.environ.get("SERVELAB_TRITON_THREADS", self.thread_setting)
                              .strip().lower() == "auto")
        self.next_thread_check = 0.0
        threads = choose_threads(self.thread_setting, cpu_instances(model_config), on_gpu)
        if threads is not None:
            torch.set_num_threads(threads)
        self.per_request = params.get("EXECUTION", "batch").strip().lower() == "per_request"
        weights = Path(args["model_repository"]) / args["model_version"] / "food11.pth"
        if not weights.is_file():
            raise RuntimeError(f"weights not found: {weights}; "
                               "build them with: python -m servelab.core.model build")
        self.model = load_model(weights, self.device)
        self.torch = torch
        pb_utils.Logger.log_info(
            f"food_classifier instance {args.get('model_instance_name')} on {self.device}, "
            f"threads={torch.get_num_threads()}, execution={'per_request' if self.per_request else 'batch'}"
        )

    def _retune_threads(self) -> None:
        """In ``auto`` mode, follow in-place instance-count changes (checked at most every 2 s)."""
        now = time.monotonic()
        if not self.adapt_threads or now < self.next_thread_check:
            return
        self.next_thread_check = now + 2.0
        from servelab.triton.instances import running_instances

        wanted = choose_threads("auto", running_instances(__file__), on_gpu=False)
        if wanted is not None and wanted != self.torch.get_num_threads():
            self.torch.set_num_threads(wanted)
            pb_utils.Logger.log_info(f"food_classifier: {wanted} intra-op thread(s) per instance now")

    def _decode(self, item: Any) -> np.ndarray:
        """One INPUT_IMAGE element (base64 text or raw image bytes) → [3, 224, 224]."""
        from servelab.core.preprocess import ImageError, decode_base64, load_image, preprocess

        data = item if isinstance(item, bytes) else str(item).encode()
        if not data.startswith(IMAGE_MAGIC):
            try:
                text = data.decode("ascii")
            except UnicodeDecodeError:
                raise ImageError("INPUT_IMAGE is neither base64 text nor an image file") from None
            data = decode_base64(text)
        return preprocess(load_image(data))

    def _forward(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Logits → (class index, softmax probability of that class) per image."""
        with self.torch.inference_mode():
            logits = self.model(self.torch.from_numpy(batch).to(self.device))
            probs = self.torch.softmax(logits.float(), dim=1)
            best, index = probs.max(dim=1)
        return index.cpu().numpy(), best.cpu().numpy().astype(np.float32)

    def _respond(self, index: np.ndarray, prob: np.ndarray) -> Any:
        from servelab.core.labels import CLASSES

        labels = np.array([[CLASSES[int(i)].encode()] for i in index], dtype=np.object_)
        return pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("FOOD_LABEL", labels),
            pb_utils.Tensor("PROBABILITY", prob.reshape(-1, 1)),
        ])

    def execute(self, requests: list[Any]) -> list[Any]:
        from servelab.core.preprocess import ImageError

        self._retune_threads()
        arrays: list[np.ndarray | None] = []
        errors: list[str | None] = []
        for request in requests:
            items = pb_utils.get_input_tensor_by_name(request, "INPUT_IMAGE").as_numpy().reshape(-1)
            try:
                if items.size == 0:
                    raise ImageError("INPUT_IMAGE holds no image")
                arrays.append(np.stack([self._decode(item) for item in items]))
                errors.append(None)
            except ImageError as exc:
                arrays.append(None)
                errors.append(f"bad image: {exc}")
            except Exception as exc:  # anything else about this request fails it alone, not the batch
                arrays.append(None)
                errors.append(f"could not process the image: {exc.__class__.__name__}: {exc}")
        good = [a for a in arrays if a is not None]
        if self.per_request:
            results = [self._forward(a) for a in good]
        elif good:
            index, prob = self._forward(np.concatenate(good))
            sizes = np.cumsum([len(a) for a in good])[:-1]
            results = list(zip(np.split(index, sizes), np.split(prob, sizes), strict=True))
        else:
            results = []
        responses, it = [], iter(results)
        for error in errors:
            if error is not None:
                responses.append(pb_utils.InferenceResponse(output_tensors=[],
                                                            error=pb_utils.TritonError(error)))
            else:
                responses.append(self._respond(*next(it)))
        return responses

    def finalize(self) -> None:
        self.model = None
