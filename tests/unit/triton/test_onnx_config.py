"""06's whole config.pbtxt against the model.onnx it is to serve: refused by its line where the model
could not load by it, the tensors read from the file itself; the notebook's answer is the staged config."""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest

from servelab.core.paths import STAGING_DIR
from servelab.triton.config import config_text, read_config
from servelab.triton.config_text import ConfigTextError, parse_edit
from servelab.triton.onnx_config import OnnxTensor, check_servable, onnx_tensors

ROOT = Path(__file__).resolve().parents[3]
NAME = "food_classifier_onnx"
MODEL = STAGING_DIR / NAME / "1" / "model.onnx"
STAGED = (STAGING_DIR / NAME / "config.pbtxt").read_text()


def _refused(text: str, model: Path = MODEL) -> ConfigTextError:
    with pytest.raises(ConfigTextError) as refused:
        check_servable(parse_edit(text, "w"), text, model, NAME, "w")
    return refused.value


def test_the_tensors_are_read_from_model_onnx() -> None:
    inputs, outputs = onnx_tensors(MODEL)
    assert inputs == [OnnxTensor("input", "float", ("batch", 3, 224, 224))]
    assert outputs == [OnnxTensor("output", "float", ("batch", 11))]
    assert inputs[0].data_type == "TYPE_FP32" and inputs[0].dims(batched=True) == [3, 224, 224]
    assert outputs[0].dims(batched=False) == [-1, 11]


def test_the_staged_config_serves_model_onnx() -> None:
    check_servable(parse_edit(STAGED), STAGED, MODEL, NAME, "w")
    platform = STAGED.replace('backend: "onnxruntime"', 'platform: "onnxruntime_onnx"')
    check_servable(parse_edit(platform), platform, MODEL, NAME, "w")
    nameless = STAGED.replace(f'name: "{NAME}"', "")
    check_servable(parse_edit(nameless), nameless, MODEL, NAME, "w")  # Triton names it by its folder


@pytest.mark.parametrize(("old", "new", "line", "said"), [
    ('backend: "onnxruntime"', 'backend: "onnxrt"', 'backend: "onnxrt"',
     'backend "onnxrt" is not a backend Triton has (it would look for libtriton_onnxrt.so'),
    ('backend: "onnxruntime"', 'backend: "python"', 'backend: "python"',
     'backend "python" runs 1/model.py, but this folder holds 1/model.onnx: write backend: "onnxruntime"'),
    ('backend: "onnxruntime"', 'backend: "onnxruntime"\nplatform: "pytorch_libtorch"',
     'platform: "pytorch_libtorch"', 'is a platform that does not run model.onnx'),
    ('name: "input"', 'name: "inputs"', 'name: "inputs"',
     "input `inputs` is not in model.onnx, whose inputs are `input` float [batch, 3, 224, 224]: "
     'write name: "input"'),
    ('name: "output"', 'name: "logits"', 'name: "logits"', "output `logits` is not in model.onnx"),
    ("dims: [ 3, 224, 224 ]", "dims: [ 3, 224 ]", "dims: [ 3, 224 ]",
     "dims [ 3, 224 ] do not match model.onnx's `input` float [batch, 3, 224, 224] (with max_batch_size "
     "above 0 the batch dimension is Triton's, so dims leave it out): write dims: [ 3, 224, 224 ]"),
    ("dims: [ 3, 224, 224 ]", "dims: [ -1, 3, 224, 224 ]", "dims: [ -1, 3, 224, 224 ]",
     "write dims: [ 3, 224, 224 ]"),
    ("dims: [ 11 ]", "dims: [ 10 ]", "dims: [ 10 ]", "write dims: [ 11 ]"),
    ("data_type: TYPE_FP32\n    dims: [ 3", "data_type: TYPE_FP64\n    dims: [ 3", "data_type: TYPE_FP64",
     "input `input` is TYPE_FP64, and model.onnx's is float: write data_type: TYPE_FP32"),
    ("max_batch_size: 16", "max_batch_size: 0", "max_batch_size: 0", "max_batch_size 0 turns batching off"),
    (f'name: "{NAME}"', 'name: "food_classifer_onnx"', 'name: "food_classifer_onnx"',
     f'is not its folder\'s: Triton serves the folder {NAME} under that name: write name: "{NAME}"'),
])
def test_a_config_model_onnx_cannot_serve_is_refused_with_its_line_and_the_fix(
        old: str, new: str, line: str, said: str) -> None:
    assert old in STAGED
    text = STAGED.replace(old, new, 1)
    refused = _refused(text)
    number = next(i for i, t in enumerate(text.splitlines(), 1) if t.strip() == line)
    assert refused.line == number and f"w, line {number}: " in str(refused)
    assert said in str(refused), str(refused)
    assert f"\n  {number} | " in str(refused), "the line itself is shown"


@pytest.mark.parametrize(("cut", "said"), [
    ('backend: "onnxruntime"', 'w names no backend: add backend: "onnxruntime"'),
    ("max_batch_size: 16", "w names no max_batch_size, and model.onnx's first dimension (batch) is free"),
    ("data_type: TYPE_FP32\n    dims: [ 11 ]", "output `output` has no data_type, and model.onnx's is float: "
                                               "write data_type: TYPE_FP32"),
])
def test_a_field_left_out_is_named(cut: str, said: str) -> None:
    refused = _refused(STAGED.replace(cut, "dims: [ 11 ]" if "dims" in cut else ""))
    assert said in str(refused), str(refused)


def test_a_tensor_left_out_is_named_with_its_shape() -> None:
    refused = _refused('backend: "onnxruntime"\nmax_batch_size: 16\n')
    assert refused.line is None
    assert str(refused) == ("w names no input `input` float [batch, 3, 224, 224], which model.onnx has: add "
                            "it to input [ … ] with its name, data_type and dims")


def test_a_model_without_a_batch_dimension_takes_max_batch_size_0(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "fixed",
                              [helper.make_tensor_value_info("x", TensorProto.INT64, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [1, 4])])
    model = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    io = ('backend: "onnxruntime"\n{}\ninput [ {{ name: "x" data_type: TYPE_INT64 dims: [ 1, 4 ] }} ]\n'
          'output [ {{ name: "y" data_type: TYPE_INT64 dims: [ 1, 4 ] }} ]\n')
    check_servable(parse_edit(io.format("")), io.format(""), model, NAME, "w")
    refused = _refused(io.format("max_batch_size: 8"), model)
    assert refused.line == 2 and "has no free first dimension, so Triton cannot batch it" in str(refused)


def _solution(source: Path, call: str) -> str:
    cell = next(c.source for c in jupytext.read(source).cells if call in c.source)
    return re.search(r"### BEGIN SOLUTION\n(.*)### END SOLUTION", cell, re.S).group(1)  # type: ignore[union-attr]


def test_06s_answer_is_the_staged_config_and_the_release_asks_for_it(tmp_path: Path) -> None:
    """The instructor's answer in 06 is the staged config's text; the student release clears it."""
    from servelab.lab import classwork

    source = ROOT / "notebooks" / "06_onnx_backend.py"
    answer = _solution(source, "write_model_config(")
    assert config_text(parse_edit(answer)) == config_text(read_config(STAGING_DIR / NAME))
    student = classwork.student_version(jupytext.read(source))
    cell = next(c.source for c in student.cells if "write_model_config(" in c.source)
    assert classwork.CODE_STUB in cell and "backend" not in cell and "TYPE_FP32" not in cell
    assert not [c for c in student.cells if c.cell_type == "code" and "show_staged_config" in c.source]
