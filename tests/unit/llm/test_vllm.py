"""vLLM on a GPU host: the GPU is asked first, the P100 and the CPU are refused with the reason, and
the compose commands, the service and vLLM's statistics are what the notebook relies on."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from servelab.core.paths import REPO_ROOT
from servelab.lab import step09_vllm
from servelab.lab.params import resolve
from servelab.llm import server, vllm
from servelab.llm.client import parse_stats
from servelab.llm.model import readable_by_transformers_4
from servelab.results.schema import RunData

METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="artifacts/llm"} 7.0
vllm:num_requests_waiting{engine="0",model_name="artifacts/llm"} 3.0
vllm:gpu_cache_usage_perc{engine="0",model_name="artifacts/llm"} 0.25
vllm:num_requests_running_created{engine="0"} 1.7e9
"""


class Recorder:
    """``subprocess.run`` for docker: records each command, answers with ``stdout`` or fails."""

    def __init__(self, stdout: str = "", fail: str = "") -> None:
        self.calls: list[list[str]] = []
        self.stdout, self.fail = stdout, fail

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        if self.fail:
            return subprocess.CompletedProcess(argv, 1, "", self.fail)
        return subprocess.CompletedProcess(argv, 0, self.stdout, "")


def compose(*args: str, kv_blocks: int = 48) -> list[str]:
    st = os.stat(REPO_ROOT)
    return ["env", f"HOST_GID={st.st_gid}", f"HOST_UID={st.st_uid}", "LLM_BATCHING=continuous",
            f"LLM_KV_BLOCKS={kv_blocks}", "LLM_MAX_BATCH=8", "docker", "compose", "-p", "servelab-llm", "-f",
            "docker/docker-compose-llm.yaml", *args]


def notebook_params(target: str) -> Any:
    return resolve(target, "quick", llm_rate_fractions=None, llm_output_lengths=None)


def test_the_gpu_is_asked_in_a_container_of_the_engine_image() -> None:
    run = Recorder(stdout="8.0\n")
    assert vllm.gpu_capabilities(run=run) == ([(8, 0)], "")
    assert run.calls == [compose("run", "--rm", "--no-deps", "--entrypoint", "nvidia-smi", "llm_server",
                                 "--query-gpu=compute_cap", "--format=csv,noheader")]
    caps, error = vllm.gpu_capabilities(run=Recorder(fail="could not select device driver \"nvidia\""))
    assert caps == [] and "failed (exit 1)" in error and "nvidia" in error


@pytest.mark.parametrize(("target", "caps", "error", "said"), [
    ("local", [], "", "target='local': vLLM runs only in the compose stack of a GPU host"),
    ("docker", [(6, 0), (6, 0)], "", "compute capability 6.0 is below 7.0"),
    ("docker", [(8, 0), (6, 1)], "", "6.1 is below 7.0"),
    ("docker", [], "", "shows no GPU"),
    ("docker", [], "exit 1: no nvidia runtime", "could not read the GPU's compute capability: exit 1"),
    ("docker", [(10, 0)], "", "10.0 is newer than the kernels of the vLLM image's torch"),
])
def test_vllm_is_refused_with_the_reason(target: str, caps: list[tuple[int, int]], error: str,
                                         said: str) -> None:
    assert said in (vllm.vllm_problem(target, caps, error) or "")


def test_vllm_runs_from_compute_capability_7_to_9() -> None:
    assert vllm.vllm_problem("docker", [(7, 0)]) is None
    assert vllm.vllm_problem("docker", [(8, 9), (9, 0)]) is None


def test_a_gpu_that_does_not_answer_is_a_reason_not_a_crash() -> None:
    def hangs(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        raise subprocess.TimeoutExpired(argv, kwargs["timeout"])
    caps, error = vllm.gpu_capabilities(run=hangs, timeout=5)
    assert caps == [] and "did not answer within 5 s" in error


def test_up_with_its_profile_then_warm_up_then_down(monkeypatch: pytest.MonkeyPatch) -> None:
    posted: list[tuple[str, str]] = []
    monkeypatch.setattr(server, "post_json",
                        lambda url, body, timeout: (posted.append((url, body["model"])), (200, {}))[1])
    monkeypatch.delenv("SERVELAB_LLM", raising=False)
    run = Recorder()
    engine = vllm.start_vllm_compose(timeout=900, run=run)
    assert run.calls == [compose("--profile", "vllm", "up", "-d", "--no-build", "--pull", "never", "--wait",
                                 "--wait-timeout", "900", "vllm_server")]
    assert posted == [("http://localhost:8011/v1/completions", "artifacts/llm")]
    assert engine.kind == "vllm" and engine.stats_path == "/metrics"
    engine.stop()
    assert run.calls[1:] == [compose("--profile", "vllm", "down", "--timeout", "30")]


def test_a_failed_warm_up_brings_vllm_down(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "post_json", lambda url, body, timeout: (404, {"error": "no such model"}))
    monkeypatch.delenv("SERVELAB_LLM", raising=False)
    run = Recorder()
    with pytest.raises(RuntimeError, match="warm-up completion answered HTTP 404"):
        vllm.start_vllm_compose(run=run)
    assert run.calls[1:] == [compose("--profile", "vllm", "logs", "--tail", "40", "vllm_server"),
                             compose("--profile", "vllm", "down", "--timeout", "30")]


def test_a_failed_up_keeps_the_log_and_leaves_nothing_running(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVELAB_LLM", raising=False)

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        if "up" in argv:
            return subprocess.CompletedProcess(argv, 1, "", "container vllm_server is unhealthy")
        if "ps" in argv:
            return subprocess.CompletedProcess(argv, 0, json.dumps(
                {"Service": "vllm_server", "State": "running", "Health": "unhealthy"}) + "\n", "")
        if "logs" in argv:
            return subprocess.CompletedProcess(argv, 0, "CUDA out of memory\n", "")
        return subprocess.CompletedProcess(argv, 0, "", "")

    calls: list[list[str]] = []
    with pytest.raises(RuntimeError) as raised:
        vllm.start_vllm_compose(run=run)
    said = str(raised.value)
    assert "up -d --no-build --pull never --wait --wait-timeout 900 vllm_server` failed (exit 1): " in said
    assert ("the LLM engine's stack did not come up: service vllm_server is running, unhealthy; its last 40 "
            "log lines:\nCUDA out of memory") in said
    assert calls[1:] == [compose("--profile", "vllm", "ps", "-a", "--format", "json"),
                         compose("--profile", "vllm", "logs", "--no-color", "--tail", "40", "vllm_server"),
                         compose("--profile", "vllm", "down", "--timeout", "30")]


def test_the_notebook_goes_on_when_vllm_does_not_start(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    def fails(timeout: float) -> server.Engine:
        raise RuntimeError("`docker compose ... up` failed (exit 1): unhealthy")
    monkeypatch.setattr(step09_vllm, "gpu_capabilities", lambda: ([(8, 0)], ""))
    monkeypatch.setattr(step09_vllm, "start_vllm_compose", fails)
    assert step09_vllm.vllm_run(notebook_params("docker"), 2.0).empty
    assert "vLLM did not start, so nothing was measured with it" in capsys.readouterr().out


def test_the_service_serves_the_lab_model_under_its_name_on_8011(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVELAB_LLM", raising=False)
    monkeypatch.delenv("VLLM_GPU_MEMORY", raising=False)
    services = yaml.safe_load((REPO_ROOT / server.COMPOSE_FILE).read_text())["services"]
    service = services[vllm.VLLM_SERVICE]
    assert service["profiles"] == ["vllm"], "it must not start with the lab engine's `up`"
    assert "profiles" not in services["llm_server"]
    assert service["ports"] == [f"{vllm.VLLM_PORT}:8000"]
    assert service["build"]["dockerfile"] == "docker/Dockerfile.vllm"
    assert service["volumes"] == ["../artifacts:/app/artifacts:ro"]
    command = vllm.serve_command()
    assert command.startswith("vllm serve artifacts/llm --served-model-name artifacts/llm ")
    assert "--dtype float16" in command and "--max-model-len 1024" in command
    assert "ENTRYPOINT [\"vllm\", \"serve\"]" in (REPO_ROOT / "docker/Dockerfile.vllm").read_text()


def test_vllm_metrics_read_as_the_lab_engine_stats() -> None:
    assert parse_stats("/metrics", METRICS) == {"running": 7, "waiting": 3, "kv_free": 0.75}
    assert parse_stats("/lab/stats", json.dumps({"running": 2, "waiting": 0})) == {"running": 2, "waiting": 0}
    assert parse_stats("/metrics", "vllm:kv_cache_usage_perc 0.5\n") == {"kv_free": 0.5}
    # a release that added the new name still publishes the old one: read one, never their sum
    both = 'vllm:kv_cache_usage_perc{engine="0"} 0.4\nvllm:gpu_cache_usage_perc{engine="0"} 0.4\n'
    assert parse_stats("/metrics", both) == {"kv_free": 0.6}


def test_a_hub_id_is_passed_to_compose_as_it_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A kernel runs in notebooks/: a Hub id must not become a path under it; a path in the checkout
    is passed relative to it (compose mounts artifacts/ at the same place)."""
    monkeypatch.chdir(REPO_ROOT / "notebooks")
    monkeypatch.setenv("SERVELAB_LLM", "HuggingFaceTB/SmolLM2-135M")
    assert "SERVELAB_LLM=HuggingFaceTB/SmolLM2-135M" in server.compose_argv(server.EngineOptions())
    monkeypatch.setenv("SERVELAB_LLM", str(REPO_ROOT / "artifacts" / "llm"))
    assert "SERVELAB_LLM=artifacts/llm" in server.compose_argv(server.EngineOptions())


def test_the_model_is_saved_readable_by_transformers_4(tmp_path: Path) -> None:
    """What transformers 5 writes (its tokenizer class name, RoPE under rope_parameters) gains what
    transformers 4 (vLLM's) reads; transformers 5 reads both, as the engine tests show."""
    (tmp_path / "config.json").write_text(json.dumps(
        {"dtype": "float32", "rope_parameters": {"rope_theta": 5000.0, "rope_type": "default"}}))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "TokenizersBackend"}))
    readable_by_transformers_4(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["rope_theta"] == 5000.0 and config["torch_dtype"] == "float32"
    assert config["rope_parameters"]["rope_theta"] == 5000.0
    tokenizer = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert tokenizer["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_the_notebook_says_why_it_skips_vllm(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(step09_vllm, "start_vllm_compose", lambda timeout: pytest.fail("must not start"))
    p = notebook_params("local")
    assert step09_vllm.vllm_run(p, 3.0).empty
    assert "vLLM is not run here. target='local'" in capsys.readouterr().out
    monkeypatch.setattr(step09_vllm, "gpu_capabilities", lambda: ([(6, 0), (6, 0)], ""))
    assert step09_vllm.vllm_run(notebook_params("docker"), 3.0).empty
    out = capsys.readouterr().out
    assert "$ env HOST_GID=" in out and "nvidia-smi" in out and "6.0, 6.0" in out
    assert "compute capability 6.0 is below 7.0" in out and "P100" in out
    assert step09_vllm.compare(pd.DataFrame()) is None
    assert capsys.readouterr().out == ""


def test_on_a_newer_gpu_it_measures_the_top_rate_and_stops(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("SERVELAB_LLM", raising=False)
    monkeypatch.delenv("VLLM_GPU_MEMORY", raising=False)
    stopped: list[bool] = []
    engine = server.Engine("http://localhost:8011", "artifacts/llm", server.EngineOptions(), ["docker", "up"],
                           kind="vllm", stats_path="/metrics")
    monkeypatch.setattr(engine, "stop", lambda: stopped.append(True))
    monkeypatch.setattr(step09_vllm, "gpu_capabilities", lambda: ([(9, 0)], ""))
    monkeypatch.setattr(step09_vllm, "start_vllm_compose", lambda timeout: engine)
    runs: list[tuple[str, float, tuple[int, int]]] = []

    def load_run(e: server.Engine, p: Any, step: str, rate: float, lengths: tuple[int, int],
                 label: str = "") -> dict[str, Any]:
        runs.append((step, rate, lengths))
        return {"step": step, "engine": e.kind, "batching": "continuous", "rate": rate,
                "output_tokens_s": 900.0}
    monkeypatch.setattr(step09_vllm, "load_run", load_run)
    monkeypatch.setattr(step09_vllm, "record", lambda experiment, rows: pd.DataFrame(rows))
    p = notebook_params("docker")
    df = step09_vllm.vllm_run(p, 2.0)
    assert runs == [("vllm", p.llm_rate_fractions[-1] * 2.0, tuple(p.llm_output_lengths))]
    assert stopped == [True] and list(df["engine"]) == ["vllm"]
    assert "the service runs: $ vllm serve artifacts/llm" in capsys.readouterr().out


def test_the_rule_compares_vllm_with_the_continuous_engine_at_its_rate() -> None:
    rows = [{"step": "mixed", "batching": "continuous", "rate": r, "output_tokens_s": t, "ttft_p99_ms": 80,
             "max_running": 8} for r, t in ((1.0, 100.0), (4.0, 300.0))]
    rows.append({"step": "vllm", "engine": "vllm", "batching": "continuous", "rate": 4.0,
                 "output_tokens_s": 2000.0, "ttft_p99_ms": 20, "max_running": 16})
    data = RunData(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), pd.DataFrame(rows))
    [rule] = step09_vllm.rules(data)
    assert rule.status == "observed" and rule.gpu_only
    assert rule.evidence == "transformers 300, vLLM 2000 tokens/s"
    assert "vllm: 2000 tokens/s" in step09_vllm.read(step09_vllm.beside(data.llm))
    assert step09_vllm.sections(data)


def test_a_gap_inside_the_runs_spread_is_within_noise() -> None:
    rows = [{"step": "mixed", "batching": "continuous", "rate": 4.0, "output_tokens_s": 300.0,
             "output_tokens_s_spread": 0.2, "ttft_p99_ms": 80, "max_running": 8},
            {"step": "vllm", "engine": "vllm", "batching": "continuous", "rate": 4.0,
             "output_tokens_s": 330.0, "output_tokens_s_spread": 0.1, "ttft_p99_ms": 20, "max_running": 16}]
    [rule] = step09_vllm.rules(RunData(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), pd.DataFrame(rows)))
    assert rule.status == "too noisy to call", rule.evidence  # 30 tokens/s apart, each run ±60 or ±33
