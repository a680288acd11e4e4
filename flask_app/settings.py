"""GourmetGram's configuration, read from environment variables.

The same image runs against FastAPI, Triton or Triton-ONNX; which one is a
deployment decision (a Compose file, a notebook cell), so it lives in the
environment and never in code. Every value has a default that works for a
local run, and a bad value fails at start-up with one line naming the
variable (``flask_app/gunicorn_conf.py`` checks them before any worker
starts), not at the first upload. Why the upload folder's bound and its
defaults: docs/decisions/2026-11-28-gourmetgram-upload-bound.md.
"""

from __future__ import annotations

import math
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

BACKENDS = ("fastapi", "triton", "triton_onnx", "triton_ensemble")
DEFAULT_MODELS = {"triton": "food_classifier", "triton_onnx": "food_classifier_onnx",
                  "triton_ensemble": "food_classifier_ensemble"}
DEFAULT_MAX_UPLOAD_BYTES = 10 * 1024 * 1024
DEFAULT_UPLOADS_MAX_MB = 1024.0  # the folder's bound in bytes (MiB)...
DEFAULT_UPLOADS_MAX_FILES = 20_000  # ...and in files: whichever is reached first
# under abuse (flask_app/guard.py): uploads a minute per client, at once per worker (gunicorn's 4 threads
# less one for the page and /health), seconds without a byte of the body
DEFAULT_UPLOADS_PER_MINUTE = 60.0
DEFAULT_UPLOADS_AT_ONCE = 3
DEFAULT_UPLOAD_READ_TIMEOUT = 20.0
MB = 1024 * 1024
PACKAGE_DIR = Path(__file__).resolve().parent

Number = TypeVar("Number", int, float)


class SettingsError(ValueError):
    """An environment variable holds a value the app cannot use; the message names it."""


@dataclass(frozen=True)
class Settings:
    """Everything the app needs to know about where and how to classify, and what it keeps."""

    backend: str = "fastapi"
    fastapi_url: str = "http://127.0.0.1:8000"
    triton_url: str = "127.0.0.1:8000"
    model_name: str = ""
    request_timeout: float = 10.0
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    instance_path: Path = PACKAGE_DIR / "instance"
    uploads_max_mb: float = DEFAULT_UPLOADS_MAX_MB
    uploads_max_files: int = DEFAULT_UPLOADS_MAX_FILES
    uploads_per_minute: float = DEFAULT_UPLOADS_PER_MINUTE
    uploads_at_once: int = DEFAULT_UPLOADS_AT_ONCE
    upload_read_timeout: float = DEFAULT_UPLOAD_READ_TIMEOUT

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise SettingsError(
                f"PREDICT_BACKEND={self.backend!r} is not a backend; choose one of {', '.join(BACKENDS)}"
            )
        _check_url("FASTAPI_SERVER_URL", self.fastapi_url, scheme_required=True)
        _check_url("TRITON_SERVER_URL", self.triton_url, scheme_required=False)
        if not (math.isfinite(self.request_timeout) and self.request_timeout > 0):
            raise SettingsError(f"REQUEST_TIMEOUT must be seconds > 0, got {self.request_timeout}")
        if self.max_upload_bytes <= 0:
            raise SettingsError(f"MAX_UPLOAD_BYTES must be > 0, got {self.max_upload_bytes}")
        if not (math.isfinite(self.uploads_max_mb) and self.uploads_max_mb > 0):
            raise SettingsError(f"UPLOADS_MAX_MB must be a size in MB > 0, got {self.uploads_max_mb}")
        if self.uploads_max_files < 1:
            raise SettingsError(f"UPLOADS_MAX_FILES must be at least 1, got {self.uploads_max_files}")
        if not (math.isfinite(self.uploads_per_minute) and self.uploads_per_minute > 0):
            raise SettingsError(f"UPLOADS_PER_MINUTE must be > 0, got {self.uploads_per_minute}")
        if self.uploads_at_once < 1:
            raise SettingsError(f"UPLOADS_AT_ONCE must be at least 1, got {self.uploads_at_once}")
        if not (math.isfinite(self.upload_read_timeout) and self.upload_read_timeout > 0):
            raise SettingsError(f"UPLOAD_READ_TIMEOUT must be seconds > 0, got {self.upload_read_timeout}")
        if self.uploads_trim_bytes < self.max_upload_bytes:
            need = math.ceil(self.max_upload_bytes / 0.9 / MB * 100) / 100
            raise SettingsError(
                f"UPLOADS_MAX_MB={self.uploads_max_mb:g} cannot hold one upload of MAX_UPLOAD_BYTES="
                f"{self.max_upload_bytes} with the 10 % the trim frees: set UPLOADS_MAX_MB to at least "
                f"{need:g} or lower MAX_UPLOAD_BYTES")
        if not self.model_name and self.backend in DEFAULT_MODELS:
            object.__setattr__(self, "model_name", DEFAULT_MODELS[self.backend])

    @property
    def upload_dir(self) -> Path:
        return Path(self.instance_path) / "uploads"

    @property
    def uploads_max_bytes(self) -> int:
        """The upload folder's bound in bytes (``UPLOADS_MAX_MB``)."""
        return int(self.uploads_max_mb * MB)

    @property
    def uploads_trim_bytes(self) -> int:
        """What a trim leaves at most: 90 % of the bound (so a full folder is scanned once per 10 %)."""
        return self.uploads_max_bytes - self.uploads_max_bytes // 10

    @property
    def backend_url(self) -> str:
        return self.fastapi_url if self.backend == "fastapi" else self.triton_url

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``env`` (default: ``os.environ``)."""
        env = os.environ if env is None else env
        defaults = cls()
        return cls(
            backend=env.get("PREDICT_BACKEND", defaults.backend).strip().lower(),
            fastapi_url=env.get("FASTAPI_SERVER_URL", defaults.fastapi_url).strip().rstrip("/"),
            triton_url=env.get("TRITON_SERVER_URL", defaults.triton_url).strip().rstrip("/"),
            model_name=env.get("TRITON_MODEL_NAME", "").strip(),
            request_timeout=_number(env, "REQUEST_TIMEOUT", defaults.request_timeout, float),
            max_upload_bytes=_number(env, "MAX_UPLOAD_BYTES", defaults.max_upload_bytes, int),
            instance_path=Path(env.get("INSTANCE_PATH", "").strip() or defaults.instance_path),
            uploads_max_mb=_number(env, "UPLOADS_MAX_MB", defaults.uploads_max_mb, float),
            uploads_max_files=_number(env, "UPLOADS_MAX_FILES", defaults.uploads_max_files, int),
            uploads_per_minute=_number(env, "UPLOADS_PER_MINUTE", defaults.uploads_per_minute, float),
            uploads_at_once=_number(env, "UPLOADS_AT_ONCE", defaults.uploads_at_once, int),
            upload_read_timeout=_number(env, "UPLOAD_READ_TIMEOUT", defaults.upload_read_timeout, float),
        )


def _number(env: Mapping[str, str], name: str, default: Number, kind: type[Number]) -> Number:
    """Parse a numeric variable, naming it when it is not a number."""
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return kind(raw)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise SettingsError(f"{name}={raw!r} is not {what}") from None


def _check_url(name: str, url: str, scheme_required: bool) -> None:
    """``http(s)://host:port`` (the scheme optional where ``scheme_required`` is false)."""
    shown = url if "://" in url else f"http://{url}"
    try:
        parts = urllib.parse.urlsplit(shown)
        parts.port  # noqa: B018 (raises ValueError on a port that is not a number)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname \
            or (scheme_required and "://" not in url):
        example = "http://127.0.0.1:8000" if scheme_required else "127.0.0.1:8000"
        raise SettingsError(f"{name}={url!r} is not a server address; give one like {example}")
