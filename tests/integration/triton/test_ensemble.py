"""Notebook 12's ensemble on the local Triton (the pytriton wheel's 2.51, whose ensemble scheduler is the
server's own): it answers as the Python backend does for every sample photo (top-1, probability within
1e-4), a request carries the file, a broken file fails alone with its reason, the student's config is
loaded or refused with Triton's reason, the client's measurement counts every member, and perf_analyzer
measures it from distinct photos' bytes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from servelab.core.paths import STAGING_DIR
from servelab.core.samples import sample_paths
from servelab.lab import step12_triton_ensemble as step
from servelab.lab.exercise import StudentError
from servelab.triton import pipelines

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, artifact_dir: Path) -> Iterator[object]:
    """A local Triton with the Python backend, the ONNX model, the two members and the staged ensemble."""
    from servelab.triton.repository import deploy_all
    from servelab.triton.server import TritonServer

    repository = tmp_path_factory.mktemp("ensemble-repo")
    deploy_all(repository, gpu=False, names=(*step.MODELS, step.ENSEMBLE), quiet=True)
    triton = TritonServer(repository, log_path=artifact_dir / "triton-ensemble.log").start(timeout=180)
    try:
        for model in (*step.MODELS, step.ENSEMBLE):
            triton.load(model, timeout=180)
        yield triton
    finally:
        triton.stop()


def test_the_ensemble_answers_as_the_python_backend_for_every_photo(server) -> None:  # type: ignore[no-untyped-def]
    photos = sample_paths()
    assert len(photos) >= 10
    for path in photos:
        image = path.read_bytes()
        python, ensemble = (pipelines.answer(server.url, name, image) for name in ("python", "ensemble"))
        assert ensemble["prediction"] == python["prediction"], path.name
        assert abs(ensemble["probability"] - python["probability"]) <= step.TOLERANCE, path.name


def test_a_request_carries_the_file_and_a_broken_file_fails_alone(server) -> None:  # type: ignore[no-untyped-def]
    image = sample_paths()[0].read_bytes()
    ensemble, client = (pipelines.answer(server.url, name, image) for name in ("ensemble", "client"))
    assert len(image) < ensemble["request_bytes"] < len(image) + 1000  # the file, and a small JSON header
    assert client["request_bytes"] >= 3 * 224 * 224 * 4  # the FP32 tensor
    with pytest.raises(pipelines.PipelineError, match=r"HTTP 4\d\d.*bad image"):
        pipelines.answer(server.url, "ensemble", b"not a photo at all")
    assert pipelines.answer(server.url, "ensemble", image)["prediction"] == ensemble["prediction"]


@dataclass
class Stack:
    """What deploy_ensemble asks of a stack, on the test's own Triton."""

    server: object

    def write_file(self, relpath: str, content: bytes | str) -> None:
        path = Path(self.server.repository) / Path(relpath).relative_to("models")  # type: ignore[attr-defined]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)

    def reload_model(self, name: str, config_json: str | None = None) -> None:
        self.server.client().load_model(name)  # type: ignore[attr-defined]


@dataclass
class Triton:
    stack: Stack
    url: str


def test_the_students_config_loads_or_is_refused_with_the_reason(server) -> None:  # type: ignore[no-untyped-def]
    text = (STAGING_DIR / step.ENSEMBLE / "config.pbtxt").read_text()
    triton = Triton(Stack(server), server.url)
    with pytest.raises(StudentError, match=r"invalid config\.pbtxt"):
        step.deploy_ensemble(triton, text.replace("ensemble_scheduling {", "ensemble_scheduling", 1))
    wrong = text.replace('input_map { key: "input" value: "pixels" }',
                         'input_map { key: "pixels" value: "pixels" }')
    with pytest.raises(StudentError, match=r"Triton refused food_classifier_ensemble: .*pixels"):
        step.deploy_ensemble(triton, wrong)
    with pytest.raises(StudentError, match=r"Triton refused|nothing loaded"):  # the release's empty steps
        empty = text.split("  step [", 1)[0] + "  step [\n    # YOUR CODE HERE\n  ]\n}\n"
        step.deploy_ensemble(triton, empty)
    step.deploy_ensemble(triton, text)
    assert server.model_ready(step.ENSEMBLE)


def test_the_clients_measurement_counts_every_member(server) -> None:  # type: ignore[no-untyped-def]
    got = pipelines.measure(server.url, server.client(), "ensemble", sample_paths(), 12, 2, progress=False)
    assert got["errors"] == 0 and got["requests"] == 12 and got["throughput_infer_s"] > 0
    assert list(got["members"]) == list(step.MEMBERS)
    assert all(m["inference_count"] == 12 and m["compute_ms"] > 0 for m in got["members"].values())
    assert got["client_cpu_ms"] > 0 and got["latency_p99_ms"] >= got["latency_p50_ms"]


def test_perf_analyzer_measures_the_ensemble_from_distinct_photos(server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import json

    from servelab.triton.experiments import input_data_for, measure

    data = input_data_for(server, step.ENSEMBLE, sample_paths()[:3], workdir=tmp_path)
    entries = json.loads(data.read_text())["data"]
    assert [e["IMAGE"]["shape"] for e in entries] == [[p.stat().st_size] for p in sample_paths()[:3]]
    frame = measure(server, step.ENSEMBLE, "ensemble", concurrency=1, input_data=data, settle="fixed",
                    warmup_requests=0, record=False, request_count=8, timeout=120)
    assert float(frame["throughput_infer_s"].iloc[0]) > 0
