"""Triton Python-backend model: an image file's bytes in, food_classifier_onnx's input tensor out.

The ensemble's first member (``food_classifier_ensemble``): the preprocessing a client did itself in
06 (decode, resize, crop, normalise) runs here, in the server, by the lab's one definition of it
(``servelab.core.preprocess``). A file that is not a usable image fails its request alone, with the
reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

from servelab.core.preprocess import ImageError, preprocess_bytes
from servelab.triton.instances import stub_arrays_problem


class TritonPythonModel:
    """Decodes and normalises every image of every request Triton hands over."""

    def initialize(self, args: dict[str, Any]) -> None:
        if problem := stub_arrays_problem(pb_utils, np):  # refuse to load, rather than die at a request
            raise RuntimeError(problem)

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            files = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy()  # [n, bytes]
            try:
                if files.size == 0:
                    raise ImageError("IMAGE holds no bytes: send the image file's bytes")
                pixels = np.stack([preprocess_bytes(row.tobytes()) for row in files]).astype(np.float32)
            except ImageError as exc:
                invalid = pb_utils.TritonError.INVALID_ARG  # the client's fault: HTTP 400, not 500
                responses.append(pb_utils.InferenceResponse(
                    output_tensors=[], error=pb_utils.TritonError(f"bad image: {exc}", invalid)))
                continue
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("PIXELS", pixels)]))
        return responses
