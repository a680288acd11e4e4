"""Bad uploads get a clear message and the right status; good uploads are never lost.

Uploads are refused before any backend is asked, so most cases here point the
app at a port where nothing listens; the two-uploads case uses a real FastAPI.
"""

from __future__ import annotations

import errno
import io
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from flask_app.settings import Settings, SettingsError
from flask_app.uploads import UploadFolder
from servelab.core.procs import free_port
from servelab.targets.services import Service


@pytest.fixture
def offline_client(make_client: Callable[..., FlaskClient]) -> FlaskClient:
    """The app pointed at a FastAPI address where nothing listens."""
    return make_client(backend="fastapi", fastapi_url=f"http://127.0.0.1:{free_port()}", request_timeout=2)


def stored_uploads(client: FlaskClient) -> list[Path]:
    settings: Settings = client.application.extensions["gourmetgram"].settings
    return sorted(settings.upload_dir.iterdir())


@pytest.mark.parametrize("route", ["/predict", "/api/predict"])
def test_text_file_named_jpg_is_not_an_image(offline_client: FlaskClient, route: str) -> None:
    data = {"file": (io.BytesIO(b"this is a recipe, not a photo\n" * 20), "dinner.jpg")}
    response = offline_client.post(route, data=data)
    assert response.status_code == 400
    assert "not an image" in response.get_data(as_text=True)
    assert stored_uploads(offline_client) == []


@pytest.mark.parametrize("route", ["/predict", "/api/predict"])
def test_eleven_megabytes_is_too_large(offline_client: FlaskClient, route: str) -> None:
    big = b"\xff\xd8\xff\xe0" + bytes(11 * 1024 * 1024)
    response = offline_client.post(route, data={"file": (io.BytesIO(big), "huge.jpg")})
    assert response.status_code == 413
    assert "too large" in response.get_data(as_text=True)
    assert "10 MB" in response.get_data(as_text=True)
    assert stored_uploads(offline_client) == []


def test_limit_between_form_overhead_and_limit_is_still_too_large(
        make_client: Callable[..., FlaskClient], samples: list[Path]) -> None:
    """A file just over MAX_UPLOAD_BYTES is refused even though the request fits the form slack."""
    data = samples[0].read_bytes()
    client = make_client(backend="fastapi", fastapi_url=f"http://127.0.0.1:{free_port()}",
                         max_upload_bytes=len(data) - 1)
    response = client.post("/api/predict", data={"file": (io.BytesIO(data), "a.jpg")})
    assert response.status_code == 413
    assert "too large" in response.get_json()["error"]


@pytest.mark.parametrize("route", ["/predict", "/api/predict"])
def test_empty_form_says_no_file(offline_client: FlaskClient, route: str) -> None:
    response = offline_client.post(route, data={})
    assert response.status_code == 400
    assert "No file" in response.get_data(as_text=True)


def test_empty_file_says_empty(offline_client: FlaskClient) -> None:
    response = offline_client.post("/api/predict", data={"file": (io.BytesIO(b""), "empty.jpg")})
    assert response.status_code == 400
    assert "empty" in response.get_json()["error"]


def test_upload_kept_when_backend_is_down(offline_client: FlaskClient, samples: list[Path]) -> None:
    data = samples[0].read_bytes()
    response = offline_client.post("/api/predict", data={"file": (io.BytesIO(data), "a.jpg")})
    assert response.status_code == 503
    assert "unavailable" in response.get_json()["error"]
    assert [p.read_bytes() for p in stored_uploads(offline_client)] == [data]


def test_same_filename_twice_keeps_both(make_client: Callable[..., FlaskClient], fastapi_onnx: Service,
                                        samples: list[Path]) -> None:
    client = make_client(backend="fastapi", fastapi_url=fastapi_onnx.url, request_timeout=60)
    sent = [samples[0].read_bytes(), samples[1].read_bytes()]
    for data in sent:
        response = client.post("/predict", data={"file": (io.BytesIO(data), "../../my dinner.jpg")})
        assert response.status_code == 200, response.get_data(as_text=True)
    stored = stored_uploads(client)
    assert sorted(p.read_bytes() for p in stored) == sorted(sent)
    assert all("dinner" not in p.name and p.suffix == ".jpg" for p in stored)


def test_png_is_accepted_and_stored_as_png(offline_client: FlaskClient, samples: list[Path]) -> None:
    from PIL import Image

    buffer = io.BytesIO()
    Image.open(samples[0]).save(buffer, format="PNG")
    response = offline_client.post("/api/predict", data={"file": (io.BytesIO(buffer.getvalue()), "x.jpg")})
    assert response.status_code == 503  # past the image check; only the (absent) backend failed
    assert [p.suffix for p in stored_uploads(offline_client)] == [".png"]


def test_settings_from_env() -> None:
    settings = Settings.from_env({"PREDICT_BACKEND": "triton_onnx", "TRITON_SERVER_URL": "http://h:8000/",
                                  "REQUEST_TIMEOUT": "2.5", "MAX_UPLOAD_BYTES": "1000"})
    assert (settings.backend, settings.model_name, settings.triton_url) == \
        ("triton_onnx", "food_classifier_onnx", "http://h:8000")
    assert (settings.request_timeout, settings.max_upload_bytes) == (2.5, 1000)
    assert Settings.from_env({"PREDICT_BACKEND": "triton"}).model_name == "food_classifier"
    assert Settings.from_env({}).backend == "fastapi"


BAD_SETTINGS = [
    ({"PREDICT_BACKEND": "torchserve"}, "PREDICT_BACKEND"),
    ({"REQUEST_TIMEOUT": "soon"}, "REQUEST_TIMEOUT"),
    ({"REQUEST_TIMEOUT": "inf"}, "REQUEST_TIMEOUT"),
    ({"MAX_UPLOAD_BYTES": "0"}, "MAX_UPLOAD_BYTES"),
    ({"FASTAPI_SERVER_URL": "localhost:8000"}, "FASTAPI_SERVER_URL"),
    ({"FASTAPI_SERVER_URL": "http://127.0.0.1:port"}, "FASTAPI_SERVER_URL"),
    ({"TRITON_SERVER_URL": "triton_server:eighty"}, "TRITON_SERVER_URL"),
    ({"UPLOADS_MAX_MB": "a gigabyte"}, "UPLOADS_MAX_MB"),
    ({"UPLOADS_MAX_MB": "nan"}, "UPLOADS_MAX_MB"),
    ({"UPLOADS_MAX_MB": "-1"}, "UPLOADS_MAX_MB"),
    ({"UPLOADS_MAX_MB": "5"}, "UPLOADS_MAX_MB"),  # less than one 10 MB upload
    ({"UPLOADS_MAX_FILES": "0"}, "UPLOADS_MAX_FILES"),
    ({"UPLOADS_MAX_FILES": "1e4"}, "UPLOADS_MAX_FILES"),
]


@pytest.mark.parametrize(("env", "named"), BAD_SETTINGS)
def test_bad_settings_name_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        Settings.from_env(env)


def test_the_upload_bound_is_read_from_the_environment() -> None:
    settings = Settings.from_env({"UPLOADS_MAX_MB": "0.5", "UPLOADS_MAX_FILES": "30",
                                  "MAX_UPLOAD_BYTES": "100000"})
    assert (settings.uploads_max_bytes, settings.uploads_max_files) == (524288, 30)
    defaults = Settings.from_env({})
    assert (defaults.uploads_max_mb, defaults.uploads_max_files) == (1024, 20_000)


@pytest.mark.parametrize("route", ["/predict", "/api/predict"])
def test_a_full_disk_is_a_507_and_keeps_nothing(offline_client: FlaskClient, samples: list[Path],
                                               monkeypatch: pytest.MonkeyPatch, route: str) -> None:
    def half_then_full(self: UploadFolder, temp: Path, data: bytes) -> None:
        temp.write_bytes(data[:100])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(temp))

    monkeypatch.setattr(UploadFolder, "_write", half_then_full)
    data = {"file": (io.BytesIO(samples[0].read_bytes()), "a.jpg")}
    response = offline_client.post(route, data=data)
    assert response.status_code == 507
    assert "disk is full" in response.get_data(as_text=True)
    settings: Settings = offline_client.application.extensions["gourmetgram"].settings
    assert list(settings.upload_dir.iterdir()) == []
    metrics = offline_client.get("/metrics").get_data(as_text=True)
    assert "gourmetgram_uploads_disk_full_total 1" in metrics.splitlines()


def test_metrics_count_what_the_folder_keeps(make_client: Callable[..., FlaskClient],
                                             samples: list[Path]) -> None:
    client = make_client(backend="fastapi", fastapi_url=f"http://127.0.0.1:{free_port()}", request_timeout=2,
                         max_upload_bytes=30_000, uploads_max_mb=0.05, uploads_max_files=100)
    for path in samples[:3]:  # 17-20 KB each: the third takes the folder over 52 KB
        sent = client.post("/api/predict", data={"file": (io.BytesIO(path.read_bytes()), "a.jpg")})
        assert sent.status_code == 503  # stored, then the absent backend
    response = client.get("/metrics")
    assert response.status_code == 200 and response.mimetype == "text/plain"
    values = dict(line.split() for line in response.get_data(as_text=True).splitlines() if line[0] != "#")
    kept = stored_uploads(client)
    assert values["gourmetgram_uploads_files"] == str(len(kept)) == "2"
    assert values["gourmetgram_uploads_bytes"] == str(sum(p.stat().st_size for p in kept))
    assert values["gourmetgram_uploads_stored_total"] == "3"
    assert values["gourmetgram_uploads_removed_total"] == "1"
    assert [p.read_bytes() for p in kept] == [p.read_bytes() for p in samples[1:3]]
