"""Triton Python-backend model: food_classifier_onnx's 11 logits in, the label and its probability out.

The ensemble's last member (``food_classifier_ensemble``): the softmax a client applied itself in 06,
by the lab's one definition of it (``servelab.core.preprocess.softmax``), and the class names
(``servelab.core.labels``), answered as food_classifier answers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

from servelab.core.labels import CLASSES
from servelab.core.preprocess import softmax
from servelab.triton.instances import stub_arrays_problem


class TritonPythonModel:
    """The top class and its probability for every image of every request."""

    def initialize(self, args: dict[str, Any]) -> None:
        if problem := stub_arrays_problem(pb_utils, np):  # refuse to load, rather than die at a request
            raise RuntimeError(problem)

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            probs = softmax(pb_utils.get_input_tensor_by_name(request, "LOGITS").as_numpy())  # [n, 11]
            best = probs.argmax(axis=1)
            labels = np.array([[CLASSES[int(i)].encode()] for i in best], dtype=np.object_)
            chance = probs[np.arange(len(best)), best].astype(np.float32).reshape(-1, 1)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("FOOD_LABEL", labels), pb_utils.Tensor("PROBABILITY", chance)]))
        return responses
