"""GourmetGram: upload a food photo, get its label from the configured serving backend.

Run with ``gunicorn -c flask_app/gunicorn_conf.py "flask_app.app:create_app()"``; the
backend and its address come from environment variables (see ``flask_app.settings``).
Every upload is checked by Pillow and stored under a generated name before the backend
is called, so nothing a user sent is lost when the backend fails; the upload folder is
kept within its bound, oldest first (``flask_app.uploads``), and ``/metrics`` counts it.
"""

from __future__ import annotations

import io
import logging
import threading
from pathlib import Path

from flask import Blueprint, Flask, Response, current_app, jsonify, render_template, request
from PIL import Image
from werkzeug.exceptions import ClientDisconnected, RequestEntityTooLarge

from flask_app.backends import TITLES, Backend, BackendUnavailable, Prediction, make_backend
from flask_app.guard import Refused, UploadGuard
from flask_app.settings import PACKAGE_DIR, Settings
from flask_app.uploads import DiskFull, UploadFolder, metrics_text
from servelab.core.preprocess import DecodeBusy, ImageError, load_image

TEST_IMAGE = PACKAGE_DIR / "static" / "test_image.jpg"
FORM_OVERHEAD_BYTES = 64 * 1024  # multipart boundaries and headers on top of the file itself
# Pillow format → stored suffix (phones' multi-picture JPEGs open as "MPO")
EXTENSIONS = {"JPEG": ".jpg", "MPO": ".jpg", "PNG": ".png", "GIF": ".gif", "WEBP": ".webp",
              "BMP": ".bmp", "TIFF": ".tif"}

bp = Blueprint("gourmetgram", __name__)


class UploadError(Exception):
    """An upload the app refuses; carries the user-facing message and the HTTP status."""

    def __init__(self, message: str, status: int, retry_after_s: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after_s = retry_after_s  # a Retry-After header when set (429, 503)

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)} if self.retry_after_s else {}


class BackendHolder:
    """The process's one backend client, built on first use (not at import or fork)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._backend: Backend | None = None
        self._lock = threading.Lock()

    def get(self) -> Backend:
        with self._lock:
            if self._backend is None:
                self._backend = make_backend(self.settings)
            return self._backend


def create_app(settings: Settings | None = None) -> Flask:
    """The WSGI app; ``settings`` default to the environment (what gunicorn uses)."""
    settings = settings or Settings.from_env()
    app = Flask(__name__, instance_path=str(Path(settings.instance_path).resolve()))
    app.config["MAX_CONTENT_LENGTH"] = settings.max_upload_bytes + FORM_OVERHEAD_BYTES
    app.extensions["gourmetgram"] = BackendHolder(settings)
    app.logger.setLevel(logging.INFO)  # the upload folder's trims are logged at INFO
    uploads = UploadFolder(settings.upload_dir, settings.uploads_max_bytes, settings.uploads_max_files,
                           app.logger)
    uploads.open()
    app.extensions["gourmetgram_uploads"] = uploads
    app.extensions["gourmetgram_guard"] = UploadGuard(settings.uploads_per_minute, settings.uploads_at_once,
                                                      settings.upload_read_timeout)
    app.register_blueprint(bp)
    app.register_error_handler(RequestEntityTooLarge, _too_large)
    return app


def _settings() -> Settings:
    return current_app.extensions["gourmetgram"].settings


def _backend() -> Backend:
    return current_app.extensions["gourmetgram"].get()


def _uploads() -> UploadFolder:
    return current_app.extensions["gourmetgram_uploads"]


@bp.get("/")
def index() -> str:
    settings = _settings()
    return render_template("index.html", backend_title=TITLES[settings.backend],
                           backend_url=settings.backend_url, model=settings.model_name,
                           max_bytes=settings.max_upload_bytes,
                           max_size=_human_size(settings.max_upload_bytes))


@bp.post("/predict")
def predict() -> tuple[str, int] | tuple[str, int, dict[str, str]]:
    """Form upload → HTML fragment the page swaps in (status code tells success or not)."""
    try:
        prediction = _classify_upload()
    except UploadError as exc:
        return render_template("_result.html", message=exc.message), exc.status, exc.headers()
    return render_template("_result.html", prediction=prediction), 200


@bp.post("/api/predict")
def api_predict() -> tuple[Response, int] | tuple[Response, int, dict[str, str]]:
    """Form upload → JSON, for scripts: ``curl -F file=@dish.jpg …/api/predict``."""
    try:
        prediction = _classify_upload()
    except UploadError as exc:
        return jsonify(error=exc.message), exc.status, exc.headers()
    return jsonify(prediction.as_json()), 200


@bp.get("/test")
def smoke_test() -> tuple[Response, int]:
    """Classify the bundled test image: proves app → backend → model end to end."""
    try:
        prediction = _run_backend(TEST_IMAGE.read_bytes(), kept=False)
    except UploadError as exc:
        return jsonify(error=exc.message), exc.status
    return jsonify(prediction.as_json()), 200


@bp.get("/health")
def health() -> tuple[Response, int]:
    """200 whenever the app runs; whether the backend is reachable is in the body."""
    return jsonify(status="ok", **_backend().health()), 200


@bp.get("/metrics")
def metrics() -> Response:
    """The upload folder in Prometheus' text format: kept, stored, removed to keep the bound, refused."""
    return Response(metrics_text(_uploads()), mimetype="text/plain; version=0.0.4; charset=utf-8")


def _classify_upload() -> Prediction:
    """Read, check, keep and classify one upload, within the guard's bounds (``flask_app.guard``)."""
    guard: UploadGuard = current_app.extensions["gourmetgram_guard"]
    try:
        with guard.admit(request.remote_addr or "unknown", request.environ):
            try:
                data = _read_upload(_settings().max_upload_bytes)
            except (TimeoutError, ClientDisconnected):  # werkzeug reads a stalled body as a cut one
                raise UploadError(f"The upload stalled (no data for {guard.read_timeout_s:g} s): try again.",
                                  408) from None
            image_format = _check_image(data)
            _save_upload(data, image_format)
            return _run_backend(data, kept=True)
    except Refused as refused:
        raise UploadError(refused.message, refused.status, refused.retry_after_s) from None


def _read_upload(max_bytes: int) -> bytes:
    """The uploaded file's bytes, or an ``UploadError`` saying what is missing or wrong."""
    upload = request.files.get("file") or request.files.get("image")
    if upload is None or not upload.filename:
        raise UploadError("No file received: choose a food photo, then press Submit.", 400)
    data = upload.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise _too_large_error()
    if not data:
        raise UploadError("That file is empty: choose a food photo.", 400)
    return data


def _check_image(data: bytes) -> str:
    """Decode ``data`` with Pillow (the content decides, not the extension); return its format."""
    try:
        load_image(data)
        with Image.open(io.BytesIO(data)) as img:
            return img.format or "IMAGE"
    except DecodeBusy as exc:
        raise UploadError(f"The server is busy decoding other photos ({exc}).", 503, 2) from None
    except ImageError as exc:
        raise UploadError(f"That file is not an image ({exc}): choose a JPEG or PNG photo.", 400) from None


def _save_upload(data: bytes, image_format: str) -> Path:
    """Store under a fresh name (``UploadFolder.save``); a full disk is a 507, nothing half-written."""
    suffix = EXTENSIONS.get(image_format, f".{image_format.lower()}")
    try:
        return _uploads().save(data, suffix)
    except DiskFull as exc:
        current_app.logger.error("upload of %d bytes refused with 507, the disk is full: %s", len(data), exc)
        raise UploadError("The server's disk is full, so your photo was not kept or classified: "
                          "please try again later, and tell the lab's staff.", 507) from None
    except OSError as exc:
        current_app.logger.error("upload of %d bytes could not be stored: %s", len(data), exc)
        raise UploadError(f"The server could not store your photo ({exc.strerror or exc}), so it was not "
                          "classified: please try again later, and tell the lab's staff.", 500) from None


def _run_backend(data: bytes, kept: bool) -> Prediction:
    """Ask the backend; its failure becomes a 503 that says whether the upload was kept."""
    try:
        return _backend().predict(data)
    except BackendUnavailable as exc:
        current_app.logger.warning("prediction backend failed: %s", exc)
        note = "Your photo was kept; please" if kept else "Please"
        raise UploadError(f"The prediction service is unavailable right now ({exc}). "
                          f"{note} try again in a moment.", 503) from None


def _too_large_error() -> UploadError:
    limit = _human_size(_settings().max_upload_bytes)
    return UploadError(f"That file is too large: the limit is {limit}.", 413)


def _too_large(_exc: RequestEntityTooLarge) -> tuple[Response | str, int]:
    """Werkzeug refused the body before reading it; answer in the route's own format."""
    error = _too_large_error()
    if request.path.startswith("/api/"):
        return jsonify(error=error.message), error.status
    return render_template("_result.html", message=error.message), error.status


def _human_size(size: int) -> str:
    """10485760 → "10 MB": limits are shown the way people read them."""
    for unit, scale in (("MB", 1024 * 1024), ("KB", 1024)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"
