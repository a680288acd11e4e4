"""POST /predict, the endpoint both FastAPI services run: what you write to serve a model over HTTP.

Read top to bottom: the request model (``PredictRequest`` in ``http.py``:
``{"image": "<base64 of an image file>"}``, validated by FastAPI), the
decode/preprocess call, the inference call, the response. The inference call
goes through the micro-batcher (``batcher.py``), an idea of its own: requests
that wait at the same moment share one forward pass. A body of the wrong shape
is answered 422, an image that cannot be used 400, a model still loading 503.
Each request's ``Stopwatch`` (``stages.py``) is lapped at every stage it passes;
the answer carries the stages in its ``Server-Timing`` header.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Protocol

import numpy as np
from fastapi import FastAPI

from servelab.core.preprocess import decode_base64, load_image, preprocess, top1
from servelab.serving import stages
from servelab.serving.batcher import MicroBatcher
from servelab.serving.http import ERROR_RESPONSES, PredictRequest, PredictResponse
from servelab.serving.settings import Settings


class Service(Protocol):
    """The running model: its micro-batcher and its settings."""

    batcher: MicroBatcher
    settings: Settings


def decode_and_preprocess(image_b64: str, settings: Settings, watch: stages.Stopwatch) -> np.ndarray:
    """Base64 text of an image file → float32 [3, 224, 224]; ``ImageError`` (HTTP 400) if it is no image."""
    data = decode_base64(image_b64, settings.max_body_bytes)  # base64 text → the file's bytes
    watch.lap("parse")  # decoding the base64 counts as parsing the request
    image = load_image(data, settings.max_pixels)  # the file's bytes → RGB image
    return preprocess(image)  # resize, centre crop 224×224, scale to 0..1, normalise as in training


def add_predict(api: FastAPI, service: Callable[[], Service]) -> None:
    """Add POST /predict to ``api``; ``service()`` returns the running model or raises HTTP 503."""

    @api.post("/predict", response_model=PredictResponse, responses=ERROR_RESPONSES)
    async def predict(request: PredictRequest) -> PredictResponse:
        """Classify one image: the label with the highest probability, and that probability."""
        running = service()
        watch = stages.current()  # this request's stage timer, started as it arrived (http.py)
        watch.lap("parse")  # FastAPI has read the body, parsed the JSON and validated it
        # decode + preprocess run in a thread pool (the event loop keeps accepting requests);
        # the forward pass is shared with every other request waiting at that moment
        prepare = partial(decode_and_preprocess, request.image, running.settings, watch)
        logits = await running.batcher.predict(prepare, watch)
        label, probability = top1(logits)  # logits [11] → the most likely class, its softmax probability
        return PredictResponse(prediction=label, probability=probability)
