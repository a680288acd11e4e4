"""Model Analyzer as the lab drives it: the command and YAML it builds hold against Model Analyzer's own
argument parser and config validator (the pinned package, in its side environment); the pins agree with
the lab's; what it wrote is read back as rows; what it cannot do and why it stopped are one line each."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from servelab.core.paths import REPO_ROOT
from servelab.triton import model_analyzer as ma
from servelab.triton import model_analyzer_docker as mad
from servelab.triton import model_analyzer_env as ma_env
from servelab.triton import model_analyzer_results as mar
from servelab.triton.config import config_text, parse_config

# Run in the side environment: the lab's argv as sys.argv, through Model Analyzer's own entry point up to
# the parsed config (CLI flags by argparse, the YAML by its validator and each field's schema), then the
# values the lab relies on as JSON. A renamed flag exits 2 (argparse), a refused YAML key or value 1.
PARSE = """
import json, sys
sys.argv = ["model-analyzer", *sys.argv[1:]]
from model_analyzer.entrypoint import get_cli_and_config_options
args, config = get_cli_and_config_options()
fields = ["run_config_search_mode", "run_config_search_max_instance_count",
          "run_config_search_max_model_batch_size", "run_config_search_min_concurrency",
          "run_config_search_max_concurrency", "concurrency_sweep_disable", "triton_launch_mode",
          "triton_server_path", "perf_analyzer_path", "perf_analyzer_max_auto_adjusts", "export_path",
          "override_output_model_repository", "output_model_repository_path", "triton_http_endpoint",
          "client_protocol", "triton_server_flags", "perf_analyzer_flags", "latency_budget",
          "triton_docker_image", "triton_docker_args", "triton_docker_labels", "triton_docker_shm_size"]
out = {f: getattr(config, f) for f in fields}
spec = config.profile_models[0]
out["model"] = spec.model_name()
out["cpu_only"] = spec.cpu_only()
out["concurrency"] = spec.parameters().get("concurrency")
print(json.dumps(out, default=str))
"""


@pytest.fixture(scope="module")
def ma_python() -> Path:
    """The side environment's Python (made when missing: the notebook's own path, ``ensure_installed``)."""
    ma_env.ensure_installed(say=lambda _line: None)
    return ma_env.venv_dir() / "bin" / "python"


def _built(tmp_path: Path, mode: str = "brute",
           where: str = "local") -> tuple[list[str], ma.Search, ma.Launch]:
    """What the notebook builds (``step11_model_analyzer.plan_search``): a launch on ``where`` ("docker": a
    CPU Docker host's, "gpu": a GPU Docker host's), a search."""
    work = ma.Workspace.new(tmp_path)
    work.repository.mkdir()
    search = ma.Search("food_classifier_onnx", 8, 449, 2, 4, mode, window_requests=24, stability_pct=30,
                       max_trials=5, cpu_only=where != "gpu")
    launch = {"docker": lambda: ma.Launch.docker(mad.Container.jupyter()),
              "gpu": lambda: ma.Launch.docker(mad.Container.sdk())}.get(where, ma.Launch.local)()
    ma.write_config(ma.launch_config(search, launch, work), work)
    return ma.profile_argv(search, work, binary="model-analyzer"), search, launch


def _parse(python: Path, argv: list[str], path: str = "/usr/bin:/bin") -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-c", PARSE, *argv[1:]], capture_output=True, text=True, timeout=120,
                          check=False, env={"PATH": path, "MPLBACKEND": "Agg"})


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["brute", "quick"])
def test_the_lab_command_means_what_the_lab_intends_to_model_analyzer(ma_python: Path, tmp_path: Path,
                                                                      mode: str) -> None:
    argv, search, launch = _built(tmp_path, mode)
    done = _parse(ma_python, argv)
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["model"] == "food_classifier_onnx" and got["cpu_only"] is True
    assert got["run_config_search_mode"] == mode
    assert got["run_config_search_max_instance_count"] == 2
    assert got["run_config_search_max_model_batch_size"] == 4
    assert got["latency_budget"] == 449
    assert got["triton_launch_mode"] == "local" and got["client_protocol"] == "http"
    assert got["triton_server_path"] == launch.server_path and Path(launch.server_path).is_file()
    assert got["perf_analyzer_path"] == launch.perf_analyzer_path
    assert got["triton_http_endpoint"] == f"127.0.0.1:{launch.http_port}"
    assert got["override_output_model_repository"] is True
    assert got["triton_server_flags"]["backend_directory"] == launch.backend_directory
    assert got["perf_analyzer_flags"]["measurement-request-count"] == "24"
    assert got["perf_analyzer_max_auto_adjusts"] == search.auto_adjusts
    if mode == "brute":  # every configuration at the constraint's concurrency
        assert got["concurrency"] == [8]
    else:
        assert got["run_config_search_min_concurrency"] == got["run_config_search_max_concurrency"] == 8
        assert got["concurrency_sweep_disable"] is True


@pytest.mark.slow
@pytest.mark.parametrize("where", ["docker", "gpu"])
def test_the_docker_targets_launch_means_what_the_lab_intends_to_model_analyzer(
        ma_python: Path, tmp_path: Path, where: str) -> None:
    """On the docker target Model Analyzer starts the lab's Triton image as the notebook's uid:gid, with a
    label the clean-up finds, its ports published where perf_analyzer reaches them; KIND_GPU variants on a
    GPU host. (NVIDIA's SDK image carries Model Analyzer 1.45.0, whose package is the same as the pinned
    1.44.0's, file for file: docs/decisions/2026-11-28-model-analyzer.md.)"""
    from servelab.triton.perf import perf_analyzer_binary

    argv, _, launch = _built(tmp_path, where=where)
    # the SDK image's perf_analyzer is on its PATH (Model Analyzer checks it is there): here, the lab's
    done = _parse(ma_python, argv, path=f"{Path(perf_analyzer_binary()).parent}:/usr/bin:/bin")
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    if where == "gpu":  # asked of it; the parser sets cpu_only wherever numba finds no CUDA, as here
        assert "cpu_only: false" in (tmp_path / "model-analyzer" / "search-1" / "config.yaml").read_text()
    else:
        assert got["cpu_only"] is True
    assert got["perf_analyzer_path"] == ("perf_analyzer" if where == "gpu" else launch.perf_analyzer_path)
    assert got["triton_launch_mode"] == "docker" and got["triton_docker_image"] == ma.TRITON_IMAGE
    assert got["triton_docker_args"] == {"user": f"{os.getuid()}:{os.getgid()}"}
    assert got["triton_docker_labels"] == {mad.LABEL: launch.shm_prefix}
    assert got["triton_docker_shm_size"] == "1g"
    assert got["triton_http_endpoint"] == f"127.0.0.1:{launch.http_port}"
    flags = got["triton_server_flags"]
    assert flags["http_port"] == str(launch.http_port) and "http_address" not in flags  # mapped, not bound
    assert "backend_directory" not in flags  # the image's own backends


def test_the_docker_launch_names_the_images_compose_and_lab_images_make() -> None:
    """The lab's Triton image, the Jupyter image (Model Analyzer's container on a CPU host) and NVIDIA's SDK
    image (on a GPU host), as compose names the first two and ``./lab images`` pulls the last."""
    import yaml

    def image(stack: str, service: str) -> str:
        return yaml.safe_load((REPO_ROOT / "docker" / f"docker-compose-{stack}.yaml").read_text()
                              )["services"][service]["image"]

    assert image("triton", "triton_server") == ma.TRITON_IMAGE
    assert image("jupyter", "jupyter") == mad.JUPYTER_IMAGE
    script = (REPO_ROOT / "scripts" / "docker_host.sh").read_text()
    assert f'model_analyzer) LABEL="Model Analyzer"; IMAGE="{mad.SDK_IMAGE}"' in script


@pytest.mark.slow
def test_a_renamed_flag_or_yaml_key_fails_model_analyzers_parser(ma_python: Path, tmp_path: Path) -> None:
    """The check above can fail: a flag Model Analyzer does not know, or a YAML key it refuses."""
    argv, _, _ = _built(tmp_path)
    renamed = ["--latency-budgets" if a == "--latency-budget" else a for a in argv]
    assert _parse(ma_python, renamed).returncode == 2
    config = Path(argv[argv.index("-f") + 1])
    text = config.read_text()
    config.write_text(text.replace("perf_analyzer_max_auto_adjusts", "perf_analyzer_max_adjusts"))
    assert _parse(ma_python, argv).returncode != 0


def _pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        m = re.match(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==(\S+)", line.split("#")[0].strip())
        if m:
            found[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return found


def test_the_side_environment_pins_agree_with_the_labs() -> None:
    side, lab = _pins(REPO_ROOT / "constraints-model-analyzer.txt"), _pins(REPO_ROOT / "constraints.txt")
    assert side["triton-model-analyzer"] == ma_env.VERSION
    differ = {name: (side[name], lab[name]) for name in set(side) & set(lab) if side[name] != lab[name]}
    assert not differ, f"constraints-model-analyzer.txt pins these unlike constraints.txt: {differ}"
    assert side["tritonclient"] == lab["tritonclient"], "its perf_analyzer's client is the lab's"


# ----------------------------------------------------------------------------- what it wrote

# the inference CSV as Model Analyzer 1.44 wrote it here (2026-11-28), for this lab's fields
CSV = """Model,Batch,Concurrency,Model Config Path,Instance Group,Max Batch Size,Satisfies Constraints,\
Throughput (infer/sec),p99 Latency (ms),Avg Latency (ms),Server Queue time (ms),Server Compute Infer time (ms)
food_classifier_onnx,1,8,food_classifier_onnx_config_2,2:CPU,1,Yes,95.7,168.7,80.1,40.2,30.1
food_classifier_onnx,1,8,food_classifier_onnx_config_default,1:CPU,16,Yes,60.1,175.3,120.0,90.3,25.0
food_classifier_onnx,1,8,food_classifier_onnx_config_0,1:CPU,1,No,48.0,250.7,150.0,100.1,40.0

"""
VARIANT = """name: "food_classifier_onnx"
max_batch_size: {mbs}
input {{ name: "input" data_type: TYPE_FP32 dims: [3, 224, 224] }}
output {{ name: "output" data_type: TYPE_FP32 dims: [11] }}
instance_group {{ count: {count} kind: KIND_CPU }}
{batching}backend: "python"
"""
SUMMARY = ("<html><body><h1>Online Result Summary</h1><p>In 3 measurements across 3 configurations, "
           "<strong>food_classifier_onnx_config_2</strong> is <strong>59%</strong> better than the default "
           "configuration at maximizing throughput, under the given constraints.</p><ul><li>x : 2 CPU "
           "instances</li></ul></body></html>")


def _search_written(tmp_path: Path) -> tuple[ma.Workspace, ma.Search]:
    work = ma.Workspace.new(tmp_path)
    (work.export / "results").mkdir(parents=True)
    mar.inference_csv(work).write_text(CSV)
    batched = "dynamic_batching { }\n"
    for name, mbs, count, batching in (("config_2", 1, 2, batched), ("config_default", 16, 1, ""),
                                       ("config_0", 1, 1, batched)):
        folder = work.variants / f"food_classifier_onnx_{name}"
        (folder / "1").mkdir(parents=True)
        (folder / "1" / "model.onnx").write_bytes(b"\0" * 1024)
        (folder / "config.pbtxt").write_text(config_text(parse_config(
            VARIANT.format(mbs=mbs, count=count, batching=batching))))
    summary = mar.summary_report(work, "food_classifier_onnx")
    summary.parent.mkdir(parents=True)
    summary.write_text(SUMMARY)
    (work.repository / "food_classifier_onnx").mkdir(parents=True)
    return work, ma.Search("food_classifier_onnx", 8, 200, 2, 2)


def test_its_results_become_rows_in_its_own_order(tmp_path: Path) -> None:
    work, search = _search_written(tmp_path)
    rows = mar.rows(work, search)
    assert [r["rank"] for r in rows] == [1, 2, 3]
    first = rows[0]
    assert first["variant"] == "food_classifier_onnx_config_2" and first["picked"] is True
    assert (first["instances"], first["max_batch_size"], first["dynamic_batching"]) == (2, 1, True)
    assert first["configuration"] == "2 CPU instances, max batch 1, dynamic batching on"
    assert first["throughput"] == 95.7 and first["p99_ms"] == 168.7 and first["queue_ms"] == 40.2
    assert first["p99_budget_ms"] == 200 and first["search"] == "search-1"
    assert [r["within_budget"] for r in rows] == [True, True, False]
    assert not any(r["picked"] for r in rows[1:])
    assert rows[1]["configuration"] == "1 CPU instance, max batch 16, dynamic batching off"
    assert mar.sentence(work, "food_classifier_onnx") == (
        "In 3 measurements across 3 configurations, food_classifier_onnx_config_2 is 59% better than the "
        "default configuration at maximizing throughput, under the given constraints.")


def test_nothing_is_picked_when_none_met_the_budget(tmp_path: Path) -> None:
    work, search = _search_written(tmp_path)
    mar.inference_csv(work).write_text(CSV.replace(",Yes,", ",No,"))
    assert not any(r["picked"] for r in mar.rows(work, search))


def test_an_unknown_column_is_refused_in_one_line(tmp_path: Path) -> None:
    work, _ = _search_written(tmp_path)
    mar.inference_csv(work).write_text(CSV.replace("Avg Latency (ms)", "Mean Latency (ms)"))
    with pytest.raises(ValueError, match=r"columns this lab does not read: \['Mean Latency \(ms\)'\]"):
        mar.read_inference(work)


def test_prune_keeps_each_config_and_drops_the_model_copies(tmp_path: Path) -> None:
    work, _ = _search_written(tmp_path)
    mar.prune(work)
    left = sorted(str(p.relative_to(work.variants)) for p in work.variants.rglob("*") if p.is_file())
    names = ("config_0", "config_2", "config_default")
    assert left == [f"food_classifier_onnx_{n}/config.pbtxt" for n in names]
    assert not work.repository.exists()


def test_a_new_search_never_reuses_a_folder(tmp_path: Path) -> None:
    assert [ma.Workspace.new(tmp_path).root.name for _ in range(3)] == ["search-1", "search-2", "search-3"]


def test_the_space_and_its_size() -> None:
    search = ma.Search("m", 8, 100, 2, 4)
    assert search.batch_sizes == [1, 2, 4] and search.most_configurations == 7
    with pytest.raises(ValueError, match="not one of brute, quick"):
        ma.Search("m", 8, 100, 2, 4, mode="optuna")


# ----------------------------------------------------------------------------- one line, never a traceback

STOPPED = """[Model Analyzer] Profiling food_classifier_onnx_config_0: concurrency=8
[Model Analyzer] Running perf_analyzer failed with exit status 127:
/x/perf_analyzer: error while loading shared libraries: libcudart.so.12: cannot open shared object file
Traceback (most recent call last):
  File "/x/bin/model-analyzer", line 8, in <module>
    sys.exit(main())
model_analyzer.model_analyzer_exceptions.TritonModelAnalyzerException: The first 2 attempts to acquire \
measurements have failed. Please examine the Tritonserver/PA error logs to determine what has gone wrong.
"""
REFUSED = """[Model Analyzer] Model Analyzer encountered an error:
 The profile model option is specified on both the CLI (--profile-models) and in the YAML config file.
 Please remove the option from one of the locations and try again
"""


def test_why_it_stopped_is_one_line(tmp_path: Path) -> None:
    log = tmp_path / "ma.log"
    log.write_text(STOPPED)
    said = ma.failure(log)
    assert said.startswith("The first 2 attempts to acquire measurements have failed") and "\n" not in said
    log.write_text(REFUSED)
    assert ma.failure(log) == ("The profile model option is specified on both the CLI (--profile-models) and "
                               "in the YAML config file. Please remove the option from one of the locations "
                               "and try again")
    assert ma.failure(tmp_path / "none.log") == "no log was written"


DROPPED = """[Model Analyzer] Profiling food_classifier_onnx_config_1: concurrency=8
[Model Analyzer] Saved checkpoint to c/0.ckpt
[Model Analyzer] Profiling food_classifier_onnx_config_2: concurrency=8
[Model Analyzer] perf_analyzer's request count is too small, increased to 74.
[Model Analyzer] perf_analyzer's request count is too small, increased to 124.
[Model Analyzer] Ran perf_analyzer 2 times, but no valid requests recorded
[Model Analyzer] Done with brute mode search.
"""


def test_what_it_cannot_do_here_is_one_line_each(tmp_path: Path) -> None:
    log = tmp_path / "ma.log"
    log.write_text('[Model Analyzer] WARNING: GPU output field "gpu_used_memory", has no data\n'
                   '[Model Analyzer] WARNING: Server output field "gpu_utilization", has no data\n')
    lines = mar.cannot(log, onnx_backend=False)
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    assert lines[0].startswith("No GPU metrics") and lines[1].startswith("No ONNX Runtime backend")
    log.write_text(DROPPED)
    [dropped] = mar.cannot(log, onnx_backend=True)
    assert dropped.startswith("Not measured: food_classifier_onnx_config_2 (perf_analyzer found no stable")
    log.write_text("")
    assert mar.cannot(log, onnx_backend=True) == []
    [threads] = mar.cannot(log, onnx_backend=True, cpu_threads="2")  # the onnxruntime backend on a CPU
    assert threads.startswith("Each variant kept the deployed model's intra_op_thread_count (2, set for one")


def test_a_failed_install_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MA_VENV", str(tmp_path / "venv-ma"))
    monkeypatch.setenv("PYTHON", str(tmp_path / "no-python"))  # set-up's own check stops it
    with pytest.raises(ma.ModelAnalyzerError) as raised:
        ma_env.ensure_installed(say=lambda _line: None)
    said = str(raised.value)
    assert "\n" not in said and said.startswith(f"installing Model Analyzer {ma_env.VERSION} failed (error: ")
    assert "./lab setup --model-analyzer" in said


def test_the_shown_command_is_the_real_one_with_relative_paths(tmp_path: Path) -> None:
    argv, _, _ = _built(tmp_path)
    shown = ma.command_line([str(REPO_ROOT / ".venv-ma/bin/model-analyzer"), *argv[1:]])
    assert shown.startswith("model-analyzer profile -f ") and "--latency-budget 449" in shown
    assert "--concurrency 8" in shown and "--profile-models" not in shown  # the YAML names the model


def test_the_environments_stamp_is_one_digest_in_setup_the_image_and_the_library(tmp_path: Path) -> None:
    """scripts/setup.sh finds an environment stamped with ``pins_digest`` ready (no install), and the Jupyter
    image's build line writes that same digest: the image's Model Analyzer is used as built, and a changed
    pin is noticed on every target."""
    venv = tmp_path / "ma"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "model-analyzer").write_text("#!/bin/sh\n")
    (venv / "bin" / "model-analyzer").chmod(0o755)
    (venv / ".servelab-stamp").write_text(ma_env.pins_digest() + "\n")
    setup = REPO_ROOT / "scripts" / "setup.sh"
    done = subprocess.run(["bash", "-c", f'source "{setup}"; cd "{REPO_ROOT}"; install_model_analyzer'],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "MA_VENV": str(venv), "PYTHON": "python3"})
    assert done.returncode == 0 and "ready" in done.stdout and "installing" not in done.stdout, done.stdout
    dockerfile = (REPO_ROOT / "docker" / "Dockerfile.jupyter").read_text().replace("\\\n", " ")
    line = re.search(r"(python -c '[^']*'\s+constraints-model-analyzer\.txt model-analyzer\.txt)", dockerfile)
    assert line, "Dockerfile.jupyter no longer writes the stamp this test reads"
    for name, source in (("constraints-model-analyzer.txt", "constraints-model-analyzer.txt"),
                         ("model-analyzer.txt", "requirements/model-analyzer.txt")):
        (tmp_path / name).write_bytes((REPO_ROOT / source).read_bytes())
    built = subprocess.run(["sh", "-c", line.group(1).replace("python -c", "python3 -c")], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    assert built == ma_env.pins_digest()


def test_an_environment_this_user_cannot_write_is_used_only_while_its_stamp_matches(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Jupyter image's /opt/model-analyzer (root's, the notebook runs as the checkout's owner): used as
    built, with one line; a stale one (the checkout's pins changed) is one line to rebuild the image."""
    venv = tmp_path / "image-ma"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "model-analyzer").write_text("#!/bin/sh\n")
    monkeypatch.setenv("MA_VENV", str(venv))
    # as a non-root user sees it (root may write anywhere)
    monkeypatch.setattr(ma_env.os, "access", lambda path, mode: Path(path) != venv)
    said: list[str] = []
    (venv / ".servelab-stamp").write_text(ma_env.pins_digest() + "\n")
    assert ma_env.ensure_installed(say=said.append) == venv / "bin" / "model-analyzer"
    assert said == [f"[setup] Model Analyzer {ma_env.VERSION} ready ({venv}, built into this image)"]
    (venv / ".servelab-stamp").write_text("an older digest\n")
    with pytest.raises(ma.ModelAnalyzerError, match=r"rebuild the image \(./lab images\)"):
        ma_env.ensure_installed(say=said.append)


def test_on_docker_model_analyzer_runs_in_a_container_of_its_own(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The Jupyter image's Model Analyzer on a CPU host; NVIDIA's SDK image on GPU 0 of a GPU host; the same
    docker run otherwise: the engine's socket as the host names it, the search's folder at its own path,
    the host's network, root (DCGM's need), the search's label; then its files given back to the
    notebook's uid:gid by a chown in the same image."""
    monkeypatch.setenv(mad.SOCKET_SETTING, "/run/engine.sock")
    work = ma.Workspace.new(tmp_path)
    argv = ma.profile_argv(ma.Search("food_classifier_onnx", 8, 449, 2, 4), work, binary="model-analyzer")
    cpu, gpu = ma.Launch.docker(mad.Container.jupyter()), ma.Launch.docker(mad.Container.sdk())
    assert ma.process_env(cpu) == dict(os.environ)  # the docker CLI's; not the local Triton's (server_env)
    ran = {}
    for name, launch in (("cpu", cpu), ("gpu", gpu)):
        ran[name] = ma.docker_argv(argv, launch, work)
        sid = launch.shm_prefix
        assert ran[name][:4] == ["docker", "run", "--rm", "--init"]
        head = " ".join(ran[name][:ran[name].index(launch.container.image)])
        assert f"--name servelab-model-analyzer-{sid.rsplit('_', 1)[-1]} --label {mad.LABEL}={sid} " in head
        assert "--network host --user 0:0 --shm-size 1g " in head
        assert f"-v /run/engine.sock:/var/run/docker.sock -v {work.root}:{work.root} -w {work.root}" in head
        assert ran[name][ran[name].index(launch.container.image) + 2:] == argv[1:]
    assert ran["cpu"][ran["cpu"].index(mad.JUPYTER_IMAGE) + 1] == str(ma_env.executable())
    assert ran["cpu"][ran["cpu"].index("-e") + 1] == "MPLBACKEND=Agg"  # the rest: the image's own
    assert "--gpus" not in ran["cpu"]
    assert ran["gpu"][ran["gpu"].index("--gpus"):ran["gpu"].index("--gpus") + 4] == [
        "--gpus", "device=0", mad.SDK_IMAGE, "model-analyzer"]
    assert mad.give_back_argv(gpu.container, work.root, gpu.shm_prefix, gpu.user) == [
        "docker", "run", "--rm", "--pull", "never", "--no-healthcheck",
        "--label", f"{mad.LABEL}={gpu.shm_prefix}", "--user", "0:0", "-v", f"{work.root}:{work.root}",
        "--entrypoint", "chown", mad.SDK_IMAGE, "-R", f"{os.getuid()}:{os.getgid()}", str(work.root)]


def test_a_missing_image_or_a_failed_give_back_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    monkeypatch.setattr(subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 1, "", "Error: no such image\n"))
    with pytest.raises(ma.ModelAnalyzerError, match=r"is not on this Docker host: `./lab images` makes it"):
        mad.require_image(mad.SDK_IMAGE)
    assert mad.give_back(mad.Container.sdk(), tmp_path, "id", "1000:1000") == (
        f"Model Analyzer's files in {tmp_path} are still root's (Error: no such image): `sudo chown -R "
        f"1000:1000 {tmp_path}` on the Docker host")


class _Exits:
    """A Model Analyzer (``docker run``) that has already ended with ``code``."""

    def __init__(self, code: int) -> None:
        self.proc = subprocess.Popen(["sh", "-c", f"exit {code}"])
        self.proc.wait()
        self.pid = self.proc.pid

    def stop(self, timeout: float = 10) -> None:
        pass


@pytest.mark.parametrize(("code", "chown"), [(0, ""), (3, ""), (3, "denied"), (0, "denied")])
def test_a_docker_search_runs_in_order_and_keeps_its_own_error(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, code: int, chown: str) -> None:
    """Earlier searches' containers removed and their files given back, the image checked, the docker run;
    then its containers removed and its files given back whatever happened. Model Analyzer's own failure is
    the error, the give-back's line beside it; a give-back that fails alone is the error."""
    from servelab.core import procs

    done: list[str] = []
    monkeypatch.setattr(mad, "remove_containers", lambda f: done.append(f"remove {f}"))
    monkeypatch.setattr(mad, "require_image", lambda image: done.append(f"image {image}"))
    monkeypatch.setattr(mad, "give_back",
                        lambda c, root, sid, user: done.append(f"give back {root.name}") or chown)
    monkeypatch.setattr(procs, "ManagedProcess",
                        lambda name, argv, log, **k: done.append(argv[:2]) or _Exits(code))
    work = ma.Workspace.new(tmp_path)
    launch = ma.Launch.docker(mad.Container.sdk())
    search = ma.Search("food_classifier_onnx", 8, 449, 2, 4)
    argv = ma.profile_argv(search, work, binary="model-analyzer")
    if code == 0 and not chown:
        ma.run_profile(argv, search, work, launch, progress=False)
    else:
        with pytest.raises(ma.ModelAnalyzerError) as raised:
            ma.run_profile(argv, search, work, launch, progress=False)
        said = str(raised.value)
        assert said.startswith("Model Analyzer stopped (exit 3)" if code else "denied")
        assert said.endswith(f"; {chown}" if code and chown else ")" if code else "denied")
    assert done == [f"remove label={mad.LABEL}", f"image {mad.SDK_IMAGE}", "give back model-analyzer",
                    ["docker", "run"], f"remove label={mad.LABEL}={launch.shm_prefix}", "give back search-1"]
