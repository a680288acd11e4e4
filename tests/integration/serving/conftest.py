"""Fixtures of the foundation tests: one real uvicorn server per FastAPI service for the session.

Both servers run with small limits (``MAX_PIXELS``, ``MAX_BODY_BYTES``) so the
over-limit cases are cheap to send; the sample photos stay well inside them.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.samples import sample_paths
from servelab.targets.services import Service, start_fastapi

TEST_MAX_PIXELS = 300_000  # samples are 512x384 = 196,608 pixels
TEST_MAX_BODY_BYTES = 200_000  # samples are ~26 KB of base64


def _start(kind: str, log_dir: Path) -> Service:
    env = {"MAX_PIXELS": str(TEST_MAX_PIXELS), "MAX_BODY_BYTES": str(TEST_MAX_BODY_BYTES)}
    return start_fastapi(kind, env=env, log_dir=log_dir)


@pytest.fixture(scope="session")
def onnx_service(artifact_dir: Path) -> Iterator[Service]:
    service = _start("onnx", artifact_dir / "foundation-logs")
    yield service
    service.stop()


@pytest.fixture(scope="session")
def pt_service(artifact_dir: Path) -> Iterator[Service]:
    service = _start("pt", artifact_dir / "foundation-logs")
    yield service
    service.stop()


@pytest.fixture(scope="session", params=["pt", "onnx"])
def service(request: pytest.FixtureRequest) -> Service:
    """Each test that takes ``service`` runs against both services."""
    return request.getfixturevalue(f"{request.param}_service")


@pytest.fixture(scope="session")
def sample_b64() -> list[str]:
    """The 11 sample photos as base64 text, in order (food_00 … food_10)."""
    paths = sample_paths()
    assert len(paths) == 11, f"expected 11 sample photos in data/samples, found {len(paths)}"
    return [base64.b64encode(p.read_bytes()).decode() for p in paths]
