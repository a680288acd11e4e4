"""A FastAPI service's settings, read from the environment when the app starts.

Variables (defaults in brackets, CPU / GPU): ``WORKERS`` [1: worker processes,
each a copy of everything below], ``MODEL_PATH`` [the service's artefact],
``MAX_BATCH`` [per service / per service], ``INFER_WORKERS`` [share / 1],
``INFER_THREADS`` [share], ``PREPROCESS_WORKERS`` [share / 2, at least 1 / share],
``MAX_BODY_BYTES`` [10 MB], ``MAX_PIXELS`` [40 M], where the share is one
process's part of the cores: cores / ``WORKERS``, at least 1. An empty variable
means its default. A value that is not a whole number of at least 1 raises
``SettingsError`` naming the variable. The engines read their own tuning
variables (``ORT_*``, see ``engines.py``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from servelab.core.cpu import cpu_cores
from servelab.core.preprocess import DEFAULT_MAX_PIXELS

DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
# why: docs/decisions/2026-11-22-fastapi-max-batch-per-device.md
GPU_MAX_BATCH = 16  # one batch = the lab's 16 clients


MULTIPROC_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"  # where worker processes share their metrics (serve.py)


class SettingsError(ValueError):
    """An environment variable holds a value the service cannot use; the message names it."""


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"environment variable {name}={raw!r} is not an integer: set it to a whole "
                            f"number of at least 1, or leave it empty for the default ({default})") from None
    if value < 1:
        raise SettingsError(f"environment variable {name}={value} must be at least 1 "
                            f"(leave it empty for the default, {default})")
    return value


def processes_from_env(env: Mapping[str, str] | None = None) -> int:
    """``WORKERS``: the service's worker processes (1 when unset or empty); ``SettingsError`` if nonsense."""
    env = os.environ if env is None else env
    return _env_int(env, "WORKERS", 1)


@dataclass(frozen=True)
class Settings:
    """A service's configuration; ``from_env`` reads it, so containers configure it by env."""

    model_path: Path
    max_batch: int
    infer_threads: int
    preprocess_workers: int
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_pixels: int = DEFAULT_MAX_PIXELS
    infer_workers: int = 1
    processes: int = 1  # WORKERS: worker processes of the service, this one among them

    @classmethod
    def from_env(cls, default_model_path: Path, default_max_batch: int,
                 env: Mapping[str, str] | None = None, gpu: bool = False,
                 gpu_max_batch: int = GPU_MAX_BATCH) -> Settings:
        """Read the settings from ``env`` (the process environment by default); raises ``SettingsError``.

        ``gpu``: the engine will run on a GPU (``engines.engine_uses_gpu``).
        Each of the ``WORKERS`` processes gets its share of the cores. On a CPU
        its inference workers split the share and half the share decodes; on a
        GPU one worker feeds the device batches of up to ``gpu_max_batch`` and
        the whole share decodes.
        """
        # why: docs/decisions/2026-11-22-fastapi-cpu-threads-and-workers.md,
        # docs/decisions/2026-11-28-fastapi-stages-and-workers.md (the share per process)
        env = os.environ if env is None else env
        processes = processes_from_env(env)
        cores = max(1, cpu_cores() // processes)
        preprocess, workers = (cores, 1) if gpu else (max(1, cores // 2), cores)
        return cls(
            model_path=Path(env.get("MODEL_PATH") or default_model_path),
            max_batch=_env_int(env, "MAX_BATCH", gpu_max_batch if gpu else default_max_batch),
            infer_threads=_env_int(env, "INFER_THREADS", cores),
            preprocess_workers=_env_int(env, "PREPROCESS_WORKERS", preprocess),
            max_body_bytes=_env_int(env, "MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES),
            max_pixels=_env_int(env, "MAX_PIXELS", DEFAULT_MAX_PIXELS),
            infer_workers=_env_int(env, "INFER_WORKERS", workers),
            processes=processes,
        )
