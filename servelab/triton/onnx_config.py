"""A whole config.pbtxt against the model.onnx it is to serve: what Triton's ONNX Runtime backend checks.

``onnx_tensors`` reads model.onnx's inputs and outputs as ONNX Runtime reads them (names, element types,
shapes with their free dimensions), so no name or shape is written down twice. ``check_servable``
refuses, before anything reaches the server, a config that names no backend or one that does not run
model.onnx, another folder's name, a ``max_batch_size`` the model's first dimension does not allow, or an
input or output whose name, data type or dims model.onnx does not have: each with its line in the text
and the fix (``ConfigTextError``, as ``config_text.parse_edit`` refuses a typo). The lab's Triton does
not auto-complete a config (``servelab.triton.command``), so it too needs every tensor written.
Why: docs/decisions/2026-12-01-exercise-layer.md
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from servelab.triton.config import ModelConfig, mc
from servelab.triton.config_text import refusal

ONNX_BACKEND, ONNX_PLATFORM = "onnxruntime", "onnxruntime_onnx"
# Triton's backends and the model file each runs (its default_model_filename), and its platforms
BACKEND_FILES = {"python": "model.py", "pytorch": "model.pt", "tensorflow": "model.savedmodel",
                 "tensorrt": "model.plan", "openvino": "model.xml", "dali": "model.dali",
                 "fil": "xgboost.model", "vllm": "model.json", "identity": "", "repeat": "", "square": ""}
PLATFORMS = ("onnxruntime_onnx", "tensorrt_plan", "pytorch_libtorch", "tensorflow_graphdef",
             "tensorflow_savedmodel", "ensemble")
# ONNX Runtime's element types → the data_type config.pbtxt spells
ORT_TYPES = {"float": "TYPE_FP32", "float16": "TYPE_FP16", "double": "TYPE_FP64", "bfloat16": "TYPE_BF16",
             "int8": "TYPE_INT8", "int16": "TYPE_INT16", "int32": "TYPE_INT32", "int64": "TYPE_INT64",
             "uint8": "TYPE_UINT8", "uint16": "TYPE_UINT16", "uint32": "TYPE_UINT32",
             "uint64": "TYPE_UINT64", "bool": "TYPE_BOOL", "string": "TYPE_STRING"}


@dataclass(frozen=True)
class OnnxTensor:
    """One input or output of model.onnx as ONNX Runtime reads it."""

    name: str
    element: str  # ONNX Runtime's element type: "float"
    shape: tuple[int | str, ...]  # a fixed size, or the name of a free dimension ("batch"; "?" unnamed)

    @property
    def data_type(self) -> str:
        return ORT_TYPES.get(self.element, f"TYPE_{self.element.upper()}")

    def free(self, i: int) -> bool:
        size = self.shape[i]
        return not isinstance(size, int) or size < 0

    def dims(self, batched: bool) -> list[int]:
        """The dims config.pbtxt writes for it: -1 for a free dimension, the batch's left out when batched."""
        first = 1 if batched else 0
        return [-1 if self.free(i) else int(self.shape[i]) for i in range(first, len(self.shape))]

    def __str__(self) -> str:
        return f"`{self.name}` {self.element} [{', '.join(str(d) for d in self.shape)}]"


def onnx_tensors(model_file: Path) -> tuple[list[OnnxTensor], list[OnnxTensor]]:
    """model.onnx's (inputs, outputs), read by ONNX Runtime as its Triton backend reads them."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(model_file), providers=["CPUExecutionProvider"])

    def read(args: list[Any]) -> list[OnnxTensor]:
        return [OnnxTensor(a.name, re.sub(r"^tensor\((.*)\)$", r"\1", a.type),
                           tuple("?" if d is None else d for d in a.shape)) for a in args]

    return read(session.get_inputs()), read(session.get_outputs())


def _lines(text: str) -> list[str]:
    return [line.split("#", 1)[0] for line in text.splitlines()]  # a comment names nothing


def _line(text: str, pattern: str, start: int = 0, stop: int | None = None) -> int | None:
    """The first line (1-based) after ``start`` and before ``stop`` whose code matches ``pattern``."""
    for number, line in enumerate(_lines(text), 1):
        if number > start and (stop is None or number < stop) and re.search(pattern, line):
            return number
    return None


def _tensor_lines(text: str, section: str, name: str) -> tuple[int | None, int, int | None]:
    """Where tensor ``name`` of the ``input``/``output`` section is written: (its name's line, the line its
    block opens on, the next tensor's name line: its block ends before it)."""
    begin = _line(text, rf"^\s*{section}\b") or 0
    at = _line(text, rf'\bname\s*:\s*"{re.escape(name)}"', begin)
    if at is None:
        return None, begin, None
    code = _lines(text)
    opens = next((n for n in range(at, begin, -1) if "{" in code[n - 1]), begin)
    return at, opens, _line(text, r"\bname\s*:", at)


Refuse = Callable[[int | None, str], NoReturn]


def check_servable(cfg: ModelConfig, text: str, model_file: Path, folder: str, where: str) -> None:
    """Refuse (``ConfigTextError``, its line and the fix) a config with which model.onnx would not load."""
    def refuse(line: int | None, said: str) -> NoReturn:
        raise refusal(where, text, line, said)

    if cfg.name and cfg.name != folder:
        refuse(_line(text, r"^\s*name\s*:"), f'name "{cfg.name}" is not its folder\'s: Triton serves the '
               f'folder {folder} under that name: write name: "{folder}" (or leave name out)')
    _check_backend(cfg, text, refuse)
    inputs, outputs = onnx_tensors(model_file)
    batchable = all(t.shape and t.free(0) for t in inputs + outputs)
    line = _line(text, r"^\s*max_batch_size\s*:")
    if cfg.max_batch_size < 0:
        refuse(line, f"max_batch_size {cfg.max_batch_size} is negative: write the most requests one batch "
                     "holds (or 0: no batching)")
    if cfg.max_batch_size > 0 and not batchable:
        fixed = next(t for t in inputs + outputs if not (t.shape and t.free(0)))
        refuse(line, f"model.onnx's {fixed} has no free first dimension, so Triton cannot batch it: write "
                     "max_batch_size: 0 and each tensor's whole shape as its dims")
    if cfg.max_batch_size == 0 and batchable:
        said = (f"model.onnx's first dimension ({inputs[0].shape[0]}) is free: it is the batch Triton forms "
                "(the lab's clients and 07's dynamic batching need it)")
        if line:
            refuse(line, f"max_batch_size 0 turns batching off, and {said}: write the most images one batch "
                         "holds (the lab's models take 16)")
        refuse(None, f"names no max_batch_size, and {said}: add max_batch_size: 16 and leave the batch "
                     "dimension out of dims")
    for section, wanted, written in (("input", inputs, cfg.input), ("output", outputs, cfg.output)):
        _check_tensors(section, wanted, list(written), cfg.max_batch_size > 0, text, refuse)


def _check_backend(cfg: ModelConfig, text: str, refuse: Refuse) -> None:
    """backend (or platform) is ONNX Runtime's: the one that runs 1/model.onnx."""
    fix = f'write backend: "{ONNX_BACKEND}", ONNX Runtime\'s, which runs 1/model.onnx'
    if not cfg.backend and not cfg.platform:
        refuse(None, f"names no backend: add backend: \"{ONNX_BACKEND}\" (the backend that runs "
                     "1/model.onnx; this lab's Triton does not guess it from the file name)")
    if cfg.backend and cfg.backend != ONNX_BACKEND:
        line, known = _line(text, r"^\s*backend\s*:"), BACKEND_FILES.get(cfg.backend)
        if known is None:
            near = difflib.get_close_matches(cfg.backend, [ONNX_BACKEND, *BACKEND_FILES], n=1, cutoff=0.6)
            refuse(line, f'backend "{cfg.backend}" is not a backend Triton has (it would look for '
                         f"libtriton_{cfg.backend}.so and not load the model"
                         + (f"; did you mean {near[0]}?" if near and near[0] != ONNX_BACKEND else "")
                         + f"): {fix}")
        runs = f"runs 1/{known}" if known else "is a test backend"
        refuse(line, f'backend "{cfg.backend}" {runs}, but this folder holds 1/model.onnx: {fix}')
    if cfg.platform and cfg.platform != ONNX_PLATFORM:
        known_platform = "a platform that does not run model.onnx" if cfg.platform in PLATFORMS else \
            "not a platform Triton has"
        refuse(_line(text, r"^\s*platform\s*:"), f'platform "{cfg.platform}" is {known_platform}: {fix} '
                                                 f'(or platform: "{ONNX_PLATFORM}")')


def _shown(dims: list[int]) -> str:
    return f"[ {', '.join(str(d) for d in dims)} ]"


def _check_tensors(section: str, wanted: list[OnnxTensor], written: list[Any], batched: bool, text: str,
                   refuse: Refuse) -> None:
    """Each written tensor is one of model.onnx's, with its data type and dims; none of them is left out."""
    by_name = {t.name: t for t in wanted}
    for tensor in written:
        name = str(tensor.name)
        at, opens, stop = _tensor_lines(text, section, name)
        model = by_name.get(name)
        if model is None:
            near = difflib.get_close_matches(name, list(by_name), n=1, cutoff=0.5)
            refuse(at or _line(text, rf"^\s*{section}\b"),
                   f"{section} `{name}` is not in model.onnx, whose {section}s are "
                   f"{', '.join(str(t) for t in wanted)}: "
                   + (f'write name: "{near[0]}"' if near else f"name each {section} as model.onnx does"))
            continue
        data_type = mc.DataType.Name(tensor.data_type)
        if data_type != model.data_type:
            type_line = _line(text, r"\bdata_type\s*:", opens - 1, stop)
            said = "has no data_type" if data_type == "TYPE_INVALID" else f"is {data_type}"
            refuse(type_line or at, f"{section} `{name}` {said}, and model.onnx's is {model.element}: "
                                    f"write data_type: {model.data_type}")
        dims = list(tensor.reshape.shape if tensor.HasField("reshape") else tensor.dims)
        expected = model.dims(batched)
        fits = len(dims) == len(expected) and all(e in (-1, d) for d, e in zip(dims, expected, strict=True))
        if not fits:
            batch = ("with max_batch_size above 0 the batch dimension is Triton's, so dims leave it out"
                     if batched else "with max_batch_size 0 dims are the whole shape")
            refuse(_line(text, r"\bdims\s*:", opens - 1, stop) or at,
                   f"dims {_shown(dims)} do not match model.onnx's {model} ({batch}): write dims: "
                   f"{_shown(expected)}")
    missing = [t for t in wanted if t.name not in {w.name for w in written}]
    if missing:
        refuse(None, f"names no {section} {missing[0]}, which model.onnx has: add it to {section} [ … ] with "
                     "its name, data_type and dims")
