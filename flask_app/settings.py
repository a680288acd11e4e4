"""GourmetGram's configuration, read from environment variables.

The same image runs against FastAPI, Triton or Triton-ONNX; which one is a
deployment decision (a Compose file, a notebook cell), so it lives in the
environment and never in code. Every value has a default that works for a
local run, and a bad value fails at start-up with a message naming the
variable, not at the first upload.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

BACKENDS = ("fastapi", "triton", "triton_onnx")
DEFAULT_MODELS = {"triton": "food_classifier", "triton_onnx": "food_classifier_onnx"}
DEFAULT_MAX_UPLOAD_BYTES = 10 * 1024 * 1024
PACKAGE_DIR = Path(__file__).resolve().parent

Number = TypeVar("Number", int, float)


class SettingsError(ValueError):
    """An environment variable holds a value the app cannot use; the message names it."""


@dataclass(frozen=True)
class Settings:
    """Everything the app needs to know about where and how to classify."""

    backend: str = "fastapi"
    fastapi_url: str = "http://127.0.0.1:8000"
    triton_url: str = "127.0.0.1:8000"
    model_name: str = ""
    request_timeout: float = 10.0
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    instance_path: Path = PACKAGE_DIR / "instance"

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise SettingsError(
                f"PREDICT_BACKEND={self.backend!r} is not a backend; choose one of {', '.join(BACKENDS)}"
            )
        if self.request_timeout <= 0:
            raise SettingsError(f"REQUEST_TIMEOUT must be > 0 seconds, got {self.request_timeout}")
        if self.max_upload_bytes <= 0:
            raise SettingsError(f"MAX_UPLOAD_BYTES must be > 0, got {self.max_upload_bytes}")
        if not self.model_name and self.backend in DEFAULT_MODELS:
            object.__setattr__(self, "model_name", DEFAULT_MODELS[self.backend])

    @property
    def upload_dir(self) -> Path:
        return Path(self.instance_path) / "uploads"

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
            fastapi_url=env.get("FASTAPI_SERVER_URL", defaults.fastapi_url).rstrip("/"),
            triton_url=env.get("TRITON_SERVER_URL", defaults.triton_url).rstrip("/"),
            model_name=env.get("TRITON_MODEL_NAME", "").strip(),
            request_timeout=_number(env, "REQUEST_TIMEOUT", defaults.request_timeout, float),
            max_upload_bytes=_number(env, "MAX_UPLOAD_BYTES", defaults.max_upload_bytes, int),
            instance_path=Path(env.get("INSTANCE_PATH", defaults.instance_path)),
        )


def _number(env: Mapping[str, str], name: str, default: Number, kind: type[Number]) -> Number:
    """Parse a numeric variable, naming it when it is not a number."""
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return kind(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a valid {kind.__name__}") from None
