"""What the Python-backend stubs import, and the crash the first GPU run met.

Triton 2.51's stub (pybind11 2.10) misreads numpy 2 arrays: a string input repeats its first byte
and kills the stub at the first request. The GPU host's run met it on KIND_GPU because the stub
ignored the numpy<2 put first on PYTHONPATH and took the host Python's numpy 2
(docs/decisions/2026-11-26-triton-python-backend-on-gpu.md). Here: the stubs import what PYTHONPATH
puts first, a numpy 2 there makes the lab's models refuse to load with one line instead of dying at
a request, and (where a GPU is present) food_classifier answers on KIND_GPU.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from servelab.core.gpu import cuda_device_count
from servelab.triton.repository import deploy_model
from servelab.triton.server import ModelLoadError, TritonServer, cache_dir

NUMPY_2 = "numpy==2.2.6"  # constraints-vllm.txt's numpy: a numpy 2 the lab already resolves


@pytest.fixture(scope="module")
def numpy2_site() -> Path:
    """A folder holding numpy 2, unpacked from its PyPI wheel (cached across runs)."""
    site = cache_dir() / "test-numpy2-site"
    if not (site / "numpy" / "__init__.py").is_file():
        wheels = cache_dir() / "test-wheels"
        argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                "-d", str(wheels), NUMPY_2]
        got = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        if got.returncode != 0:  # an offline host (a GPU node's compute host): PyPI is where CI gets it
            pytest.skip(f"numpy 2's wheel could not be fetched from the package index: {got.stderr[-300:]}")
        [wheel] = wheels.glob("numpy-2.2.6-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)
    return site


def test_numpy_2_first_on_pythonpath_reaches_the_stub_and_is_refused_at_load(
        numpy2_site: Path, tmp_path: Path, artifact_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("food_classifier", "food_classifier_onnx"):
        deploy_model(name, tmp_path, gpu=False, quiet=True)
    # as on the offline GPU host: a package folder first on PYTHONPATH, ahead of the venv's numpy 1.26
    monkeypatch.setenv("PYTHONPATH", str(numpy2_site))
    monkeypatch.setattr(sys, "path", [str(numpy2_site), *sys.path])
    server = TritonServer(tmp_path, log_path=artifact_dir / "triton-stub-numpy2.log").start(timeout=120)
    try:
        for name in ("food_classifier", "food_classifier_onnx"):
            with pytest.raises(ModelLoadError) as refused:
                server.load(name, timeout=60)
            said = str(refused.value)
            assert "misreads numpy 2.2.6 arrays" in said and "numpy<2" in said, said
            assert str(numpy2_site) in said  # it names where the stub's numpy came from
        assert server.running  # a refused load, not a dead server or stub
    finally:
        server.stop()


@pytest.mark.skipif(cuda_device_count() == 0, reason="no NVIDIA GPU here: KIND_GPU needs one (the unit "
                    "tests of the GPU plans and the numpy test above run everywhere)")
def test_food_classifier_answers_on_kind_gpu(tmp_path: Path, artifact_dir: Path, tri: object) -> None:
    """The first GPU run's crash: the stub died at the first request on KIND_GPU."""
    from servelab.core.labels import CLASSES
    from servelab.core.samples import sample_paths

    folder = deploy_model("food_classifier", tmp_path, gpu=True, quiet=True)
    assert "KIND_GPU" in (folder / "config.pbtxt").read_text()
    server = TritonServer(tmp_path, log_path=artifact_dir / "triton-kind-gpu.log").start(timeout=180)
    try:
        server.load("food_classifier", timeout=180)
        photos = sample_paths()[:3]
        for _ in range(2):  # the crash came at the first request; the second shows the stub lived
            labels, probs = tri.classify(server.client(), [tri.b64(p) for p in photos])  # type: ignore[attr-defined]
            assert set(labels) <= set(CLASSES) and all(0 < p <= 1 for p in probs)
        assert "on cuda:0" in (artifact_dir / "triton-kind-gpu.log").read_text()
    finally:
        server.stop()
