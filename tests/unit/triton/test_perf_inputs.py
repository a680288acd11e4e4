"""perf_analyzer's input data: one entry per photo, for each input type the lab's models take, and a
measurement that chooses one photo or many distinct ones."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from servelab.core.samples import sample_paths
from servelab.lab import triton_steps
from servelab.triton.perf_inputs import make_file_input_data, make_input_data, make_tensor_input_data


def test_each_photo_is_an_entry_of_its_own(tmp_path: Path) -> None:
    photos = sample_paths()[:3]
    files = json.loads(make_file_input_data(photos, tmp_path / "f.json").read_text())["data"]
    assert [base64.b64decode(e["IMAGE"]["b64"]) for e in files] == [p.read_bytes() for p in photos]
    assert [e["IMAGE"]["shape"] for e in files] == [[p.stat().st_size] for p in photos]
    text = json.loads(make_input_data(photos, tmp_path / "t.json").read_text())["data"]
    assert len({e["INPUT_IMAGE"][0] for e in text}) == 3
    tensors = json.loads(make_tensor_input_data(photos[:2], tmp_path / "x.json").read_text())["data"]
    assert [e["input"]["shape"] for e in tensors] == [[3, 224, 224]] * 2


def test_a_measurement_chooses_one_photo_or_many_distinct_ones() -> None:
    assert triton_steps._photos(1) == sample_paths()[:1]
    many = triton_steps._photos(len(sample_paths()))
    assert len({p.read_bytes() for p in many}) == len(many) >= 10
    with pytest.raises(ValueError, match="choose how many distinct sample photos"):
        triton_steps._photos(0)
