"""Both FastAPI services as a user reaches them with a client the lab does not use itself: ``requests``,
reading the API from the service's own OpenAPI document, as a client generated from it would."""

from __future__ import annotations

import base64
from typing import Any

import jsonschema
import pytest
import requests

from servelab.core.labels import CLASSES
from servelab.core.samples import sample_paths
from servelab.targets.services import Service

TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def api(service: Service) -> dict[str, Any]:
    """The service's OpenAPI document, fetched the way a client generator does."""
    response = requests.get(f"{service.url}/openapi.json", timeout=TIMEOUT_S)
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    return dict(response.json())


def _schema(api: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A request/response schema with its ``$ref`` resolved against the document's components."""
    if "$ref" in schema:
        return dict(api["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]])
    return schema


def _predict_operation(api: dict[str, Any]) -> dict[str, Any]:
    return dict(api["paths"]["/predict"]["post"])


def test_docs_page_serves_the_openapi_document(service: Service, api: dict[str, Any]) -> None:
    page = requests.get(f"{service.url}/docs", timeout=TIMEOUT_S)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "swagger-ui" in page.text.lower() and "/openapi.json" in page.text
    assert api["openapi"].startswith("3.") and api["info"]["title"]
    operation = _predict_operation(api)
    body = _schema(api, operation["requestBody"]["content"]["application/json"]["schema"])
    assert body["required"] == ["image"] and body["properties"]["image"]["type"] == "string"
    assert "base64" in body["properties"]["image"]["description"]
    assert {"200", "400", "413", "422"} <= set(operation["responses"]), "the errors /docs promises"


def test_predict_with_requests_answers_what_the_schema_says(service: Service, api: dict[str, Any]) -> None:
    operation = _predict_operation(api)
    answer_schema = _schema(api, operation["responses"]["200"]["content"]["application/json"]["schema"])
    session = requests.Session()
    labels = []
    for path in sample_paths()[:4]:
        image = base64.b64encode(path.read_bytes()).decode("ascii")
        response = session.post(f"{service.url}/predict", json={"image": image}, timeout=TIMEOUT_S)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/json"
        answer = response.json()
        jsonschema.validate(answer, answer_schema)
        assert answer["prediction"] in CLASSES and 0.0 < answer["probability"] <= 1.0
        labels.append(answer["prediction"])
    assert len(set(labels)) >= 2, labels


@pytest.mark.parametrize(("send", "status", "words"), [
    ({"json": {"image": "this is not base64!"}}, 400, "not valid base64"),
    ({"json": {"image": base64.b64encode(b"plain text, no picture").decode()}}, 400, "not an image"),
    ({"json": {"picture": "abc"}}, 422, "missing field 'image'"),
    ({"json": {"image": 42}}, 422, "must be a string"),
    ({"data": {"image": "abc"}}, 422, "Content-Type is not application/json"),  # a form post, a usual slip
    ({"data": b"{not json", "headers": {"Content-Type": "application/json"}}, 422, "not valid JSON"),
])
def test_a_bad_request_is_a_4xx_with_a_message(service: Service, api: dict[str, Any], send: dict[str, Any],
                                               status: int, words: str) -> None:
    response = requests.post(f"{service.url}/predict", timeout=TIMEOUT_S, **send)
    assert response.status_code == status, response.text
    assert str(status) in _predict_operation(api)["responses"], "an error the docs do not list"
    detail = response.json()["detail"]
    assert isinstance(detail, str) and words in detail, detail
    assert "Traceback" not in response.text
