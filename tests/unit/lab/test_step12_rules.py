"""Notebook 12's expected effects on made-up run data (answers that match and that do not, bytes, the
client's CPU beyond and within its noise, the members counted, one request alone), its report section,
the notebook's ensemble text against the staged config, and its parameters."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from servelab.core.paths import REPO_ROOT, STAGING_DIR
from servelab.lab import params
from servelab.lab import step12_triton_ensemble as step
from servelab.results.schema import RunData, normalise_triton

MEMBERS = {"food_preprocess": {"queue_ms": 0.2, "compute_ms": 9.0, "inference_count": 24},
           "food_classifier_onnx": {"queue_ms": 0.1, "compute_ms": 14.0, "inference_count": 24},
           "food_postprocess": {"queue_ms": 0.1, "compute_ms": 1.0, "inference_count": 24}}


def pipeline(name: str, level: int = 1, **values: Any) -> dict[str, Any]:
    base = {"python": (26_000, 0.8, 60.0, 15.0), "client": (602_286, 6.5, 24.0, 42.0),
            "ensemble": (19_600, 0.7, 21.0, 40.0)}[name]
    model = {"python": "food_classifier", "client": "food_classifier_onnx",
             "ensemble": "food_classifier_ensemble"}[name]
    row = {"step": step.ROWS, "pipeline": name, "model": model, "label": f"{name}, c={level}",
           "load_mode": "concurrency", "load_value": level, "requests": 24, "errors": 0,
           "request_bytes": base[0], "client_cpu_ms": base[1], "client_cpu_ms_spread": 0.05,
           "latency_p50_ms": base[2], "latency_p99_ms": base[2] * 2, "latency_spread": 0.05,
           "throughput_infer_s": base[3], "throughput_spread": 0.1,
           "members": MEMBERS if name == "ensemble" else {}}
    return {**row, **values}


def answers(agree: int = 11, difference: float = 3e-6) -> dict[str, Any]:
    return {"step": step.ANSWERS, "model": step.ENSEMBLE, "photos": 11, "top1_agree": agree,
            "max_probability_difference": difference}


def run(*rows: dict[str, Any]) -> RunData:
    empty = pd.DataFrame()
    return RunData(empty, empty, normalise_triton(pd.DataFrame(list(rows))))


def statuses(data: RunData) -> list[str]:
    return [c.status for c in step.rules(data)]


WHOLE = (answers(), *(pipeline(n) for n in step.ORDER), *(pipeline(n, 4) for n in step.ORDER))


def test_a_whole_run_observes_every_effect() -> None:
    checks = step.rules(run(*WHOLE))
    assert [c.status for c in checks] == ["observed"] * 5, [(c.effect, c.evidence) for c in checks]
    said = {c.effect.split(":")[0]: c.evidence for c in checks}
    assert "11 of 11 photos the same class" in next(v for k, v in said.items() if "answers" in k)
    assert "602 KB per request with client-side preprocessing, 19.6 KB to the ensemble (31×)" in " ".join(
        said.values())


def test_answers_that_differ_are_not_observed() -> None:
    assert statuses(run(answers(agree=10), *WHOLE[1:]))[0] == "not observed"
    assert statuses(run(answers(difference=2e-3), *WHOLE[1:]))[0] == "not observed"


def test_the_clients_cpu_inside_its_noise_is_within_noise_and_a_missing_run_is_not_measured() -> None:
    close = run(*WHOLE[:2], pipeline("client", client_cpu_ms=0.75, client_cpu_ms_spread=0.3), WHOLE[3])
    assert statuses(close)[2] == "too noisy to call"
    assert statuses(run(answers()))[1:] == ["cannot show here"] * 4


def test_a_preprocessing_member_that_missed_requests_is_not_observed() -> None:
    short = {**MEMBERS, "food_preprocess": {**MEMBERS["food_preprocess"], "inference_count": 20}}
    assert statuses(run(*WHOLE[:3], pipeline("ensemble", members=short)))[3] == "not observed"


def test_the_report_draws_the_pipelines_and_the_members() -> None:
    [section] = step.sections(run(*WHOLE))
    page = "".join(section.parts)
    assert "food_preprocess" in page and "<img" in page and "client CPU" in page
    assert step.sections(run(answers())) == []


def test_the_notebooks_ensemble_is_the_staged_one() -> None:
    """The text the student's cell loads means what models_staging holds (GourmetGram, the docs use it)."""
    import jupytext

    from servelab.triton.config import parse_config, read_config

    cells = jupytext.read(REPO_ROOT / "notebooks" / "12_triton_ensemble.py").cells
    source = next(c.source for c in cells if c.source.startswith("ensemble_config = "))
    namespace: dict[str, str] = {}
    exec(source, namespace)  # one string assignment
    assert parse_config(namespace["ensemble_config"]) == read_config(STAGING_DIR / step.ENSEMBLE)
    members = [s.model_name for s in read_config(STAGING_DIR / step.ENSEMBLE).ensemble_scheduling.step]
    assert tuple(members) == step.MEMBERS and set(members) <= set(step.MODELS)


def test_too_few_requests_for_the_clients_is_refused_in_the_parameters_cell() -> None:
    with pytest.raises(params.ParameterError, match="raise it to 24 or more"):
        params.resolve("local", "quick", ensemble_requests=10, ensemble_concurrency_levels=[1, 8])
    assert params.resolve("local", "full", ensemble_requests=None).ensemble_requests == 200
