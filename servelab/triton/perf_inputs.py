"""perf_analyzer's ``--input-data`` JSON for the lab's models: base64 image text for ``food_classifier``'s
BYTES input, the preprocessed tensor for ``food_classifier_onnx``'s FP32 one, the file's bytes for the
ensemble's UINT8 one. One entry per image: perf_analyzer sends them in turn, so a measurement chooses
one image (every request the same) or many distinct ones (``servelab.triton.experiments.input_data_for``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path


def make_input_data(jpeg_paths: Path | Sequence[Path], out_json: Path,
                    input_name: str = "INPUT_IMAGE") -> Path:
    """perf_analyzer input data for food_classifier: base64 text of each image file, as Flask sends it.

    Several images make several entries; perf_analyzer cycles through them.
    """
    import base64

    paths = [jpeg_paths] if isinstance(jpeg_paths, str | Path) else list(jpeg_paths)
    data = [{input_name: [base64.b64encode(Path(p).read_bytes()).decode("ascii")]} for p in paths]
    out_json = Path(out_json)
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps({"data": data}))
    return out_json


def make_tensor_input_data(jpeg_paths: Path | Sequence[Path], out_json: Path,
                           input_name: str = "input") -> Path:
    """perf_analyzer input data for food_classifier_onnx: the preprocessed FP32 [3,224,224] tensor.

    Stored as base64 of the little-endian float32 bytes (exact, and 4× smaller than JSON numbers).
    """
    import base64

    from servelab.core.preprocess import preprocess_bytes

    paths = [jpeg_paths] if isinstance(jpeg_paths, str | Path) else list(jpeg_paths)
    data = []
    for p in paths:
        tensor = preprocess_bytes(Path(p).read_bytes()).astype("<f4")
        data.append({input_name: {"b64": base64.b64encode(tensor.tobytes()).decode("ascii"),
                                  "shape": list(tensor.shape)}})
    out_json = Path(out_json)
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps({"data": data}))
    return out_json


def make_file_input_data(jpeg_paths: Path | Sequence[Path], out_json: Path,
                         input_name: str = "IMAGE") -> Path:
    """perf_analyzer input data for food_classifier_ensemble: each image file's bytes as a UINT8 tensor of
    its own length (base64 in the JSON, as perf_analyzer reads binary content)."""
    import base64

    paths = [jpeg_paths] if isinstance(jpeg_paths, str | Path) else list(jpeg_paths)
    data = []
    for p in paths:
        raw = Path(p).read_bytes()
        data.append({input_name: {"b64": base64.b64encode(raw).decode("ascii"), "shape": [len(raw)]}})
    out_json = Path(out_json)
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps({"data": data}))
    return out_json
