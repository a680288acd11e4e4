"""The local Triton as a user reaches it with tritonclient's own clients, over HTTP and over gRPC (the
two protocols the lab's server listens on): health, metadata, inference on both lab models, bad input."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from servelab.core.labels import CLASSES
from servelab.core.preprocess import preprocess_bytes, softmax

PROTOCOLS = {"http": httpclient, "grpc": grpcclient}


def _connect(triton: Any, protocol: str) -> Any:
    """tritonclient's client for ``protocol`` on the server's address for it, as its docs show."""
    if protocol == "http":
        return httpclient.InferenceServerClient(url=triton.url, network_timeout=120.0)
    return grpcclient.InferenceServerClient(url=triton.grpc_url)


@pytest.fixture(params=sorted(PROTOCOLS))
def client(request: pytest.FixtureRequest, triton: Any) -> Iterator[Any]:
    made = _connect(triton, request.param)
    yield made
    made.close()


def _module(client: Any) -> Any:
    """The client's protocol module: its InferInput and InferRequestedOutput classes."""
    return grpcclient if isinstance(client, grpcclient.InferenceServerClient) else httpclient


def _metadata(client: Any, model: str) -> dict[str, Any]:
    """Model metadata as a dict from either client (gRPC's JSON form writes the int64 dims as strings)."""
    meta = client.get_model_metadata(model, as_json=True) if _module(client) is grpcclient \
        else client.get_model_metadata(model)
    return {kind: [(t["name"], t["datatype"], [int(d) for d in t["shape"]]) for t in meta[kind]]
            for kind in ("inputs", "outputs")}


def _images(client: Any, paths: list[Path]) -> Any:
    tensor = _module(client).InferInput("INPUT_IMAGE", [len(paths), 1], "BYTES")
    encoded = [[base64.b64encode(p.read_bytes())] for p in paths]
    tensor.set_data_from_numpy(np.array(encoded, dtype=np.object_))
    return tensor


def _tensor(client: Any, batch: np.ndarray, name: str = "input", datatype: str = "FP32") -> Any:
    tensor = _module(client).InferInput(name, list(batch.shape), datatype)
    tensor.set_data_from_numpy(batch)
    return tensor


def test_server_and_models_are_live_and_ready(client: Any) -> None:
    assert client.is_server_live() and client.is_server_ready()
    for model in ("food_classifier", "food_classifier_onnx"):
        assert client.is_model_ready(model), model
    assert not client.is_model_ready("no_such_model")
    server = client.get_server_metadata(as_json=True) if _module(client) is grpcclient \
        else client.get_server_metadata()
    assert server["name"] == "triton" and server["version"]


def test_model_metadata_names_the_inputs_and_outputs(client: Any) -> None:
    assert _metadata(client, "food_classifier") == {
        "inputs": [("INPUT_IMAGE", "BYTES", [-1, 1])],
        "outputs": [("FOOD_LABEL", "BYTES", [-1, 1]), ("PROBABILITY", "FP32", [-1, 1])]}
    assert _metadata(client, "food_classifier_onnx") == {
        "inputs": [("input", "FP32", [-1, 3, 224, 224])],
        "outputs": [("output", "FP32", [-1, len(CLASSES)])]}


def test_both_models_classify_alike_over_the_protocol(client: Any, samples: list[Path]) -> None:
    """food_classifier answers a label and its probability per image; food_classifier_onnx answers the
    logits of the same network: their softmax gives the same label and probability."""
    paths = samples[:3]
    outputs = [_module(client).InferRequestedOutput(name) for name in ("FOOD_LABEL", "PROBABILITY")]
    answer = client.infer("food_classifier", [_images(client, paths)], outputs=outputs)
    labels, probability = answer.as_numpy("FOOD_LABEL"), answer.as_numpy("PROBABILITY")
    assert labels.shape == (3, 1) and probability.shape == (3, 1) and probability.dtype == np.float32
    labels = [x.decode() for x in labels.reshape(-1)]
    assert all(label in CLASSES for label in labels) and ((probability > 0) & (probability <= 1)).all()

    batch = np.stack([preprocess_bytes(p.read_bytes()) for p in paths]).astype(np.float32)
    logits = client.infer("food_classifier_onnx", [_tensor(client, batch)]).as_numpy("output")
    assert logits.shape == (3, len(CLASSES)) and logits.dtype == np.float32
    probs = softmax(logits)
    assert labels == [CLASSES[i] for i in probs.argmax(axis=1)]
    np.testing.assert_allclose(probability.reshape(-1), probs.max(axis=1), atol=1e-4)


def test_http_and_grpc_give_the_same_answer(triton: Any, samples: list[Path]) -> None:
    answers = []
    for protocol in sorted(PROTOCOLS):
        with _connect(triton, protocol) as made:
            result = made.infer("food_classifier", [_images(made, samples[:2])])
            answers.append((result.as_numpy("FOOD_LABEL").tolist(), result.as_numpy("PROBABILITY").tolist()))
    assert answers[0] == answers[1]


BAD_INPUTS = {  # what a client sends → words of Triton's (or the model's) answer
    "not-an-image": ("food_classifier", lambda c: [_bytes(c, b"this is not an image")],
                     "bad image: the data is not an image"),
    "wrong-shape": ("food_classifier_onnx", lambda c: [_tensor(c, np.zeros((1, 3, 100, 100), np.float32))],
                    "Expected [-1,3,224,224], got [1,3,100,100]"),
    "wrong-datatype": ("food_classifier_onnx",
                       lambda c: [_tensor(c, np.zeros((1, 3, 224, 224)), datatype="FP64")],
                       "data-type is 'FP64', but model 'food_classifier_onnx' expects 'FP32'"),
    "wrong-input-name": ("food_classifier_onnx",
                         lambda c: [_tensor(c, np.zeros((1, 3, 224, 224), np.float32), name="image")],
                         "unexpected inference input 'image' for model 'food_classifier_onnx'"),
    "unknown-model": ("no_such_model", lambda c: [_tensor(c, np.zeros((1, 3, 224, 224), np.float32))],
                      "unknown model: 'no_such_model'"),
}


@pytest.mark.parametrize(("model", "make", "words"), list(BAD_INPUTS.values()), ids=list(BAD_INPUTS))
def test_bad_input_is_a_clear_error_and_the_server_stays_up(client: Any, samples: list[Path], model: str,
                                                            make: Any, words: str) -> None:
    with pytest.raises(InferenceServerException) as raised:
        client.infer(model, make(client))
    message = raised.value.message()
    assert words in message, message
    assert "Traceback" not in message
    answer = client.infer("food_classifier", [_images(client, samples[:1])])
    assert answer.as_numpy("FOOD_LABEL").shape == (1, 1), "the model still answers after a bad request"


def _bytes(client: Any, data: bytes) -> Any:
    tensor = _module(client).InferInput("INPUT_IMAGE", [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[data]], dtype=np.object_))
    return tensor
