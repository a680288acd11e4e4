"""Every comparison of engines names each side's device, from the rows' own ``device``: the first GPU
run compared ONNX Runtime on 16 CPU cores with PyTorch on the H100 and called it "1.4x faster"."""

from __future__ import annotations

import pandas as pd

from servelab.lab import step03_fastapi
from servelab.report.effects import GPU_NOISE_NOTE, NOISE_NOTE, noise_note
from servelab.report.figures import short_view
from servelab.report.html import run_devices
from servelab.results.schema import FASTAPI_COLUMNS, RunData, device_label, device_of

H100 = "NVIDIA H100 80GB HBM3"


def fastapi(pt_device: str, onnx_device: str, gpu: str | None = H100) -> pd.DataFrame:
    rows = []
    for backend, device, alone, many in (("pt", pt_device, 7.9, 32.6), ("onnx", onnx_device, 5.6, 25.9)):
        for mode, median, clients in (("sequential", alone, 1), ("concurrent", many, 16)):
            rows.append({"backend": backend, "device": device, "gpu": gpu, "mode": mode,
                         "concurrency": clients, "median_ms": median, "median_spread": 0.02,
                         "p99_ms": median * 2, "throughput_rps": 1000 / median})
    return pd.DataFrame(rows)


def data(df: pd.DataFrame) -> RunData:
    return RunData(df, pd.DataFrame(), pd.DataFrame())


def test_device_labels() -> None:
    assert device_label("cuda", H100) == f"GPU ({H100})" and device_label("cuda:1") == "GPU"
    assert device_label("cpu", H100) == "CPU" and device_label(None) == ""
    assert device_label(float("nan")) == ""
    df = fastapi("cuda", "cpu")
    assert device_of(df, backend="pt") == f"GPU ({H100})" and device_of(df, backend="onnx") == "CPU"
    assert device_of(df) == f"GPU ({H100}) and CPU" and device_of(df, backend="tf") == ""


def test_engines_on_different_devices_are_not_compared() -> None:
    df = fastapi("cuda", "cpu")
    reading = step03_fastapi.read_fastapi(df)
    assert "faster" not in reading and "different devices: not an engine comparison" in reading
    assert f"PyTorch on the GPU ({H100}) 8 ms" in reading and "ONNX Runtime on the CPU 6 ms" in reading
    [verdict] = [c for c in step03_fastapi.rules(data(df)) if "ONNX Runtime answers" in c.effect]
    assert verdict.status == "cannot show here" and verdict.evidence.startswith("this run cannot show it")
    assert "PyTorch ran on the GPU" in verdict.evidence and "ONNX Runtime on the CPU" in verdict.evidence


def test_engines_on_one_device_are_compared_and_the_device_is_named() -> None:
    df = fastapi("cpu", "cpu", gpu=None)
    reading = step03_fastapi.read_fastapi(df)
    assert "ONNX Runtime 1.4× faster than PyTorch for one client (both on the CPU)" in reading
    [verdict] = [c for c in step03_fastapi.rules(data(df)) if "ONNX Runtime answers" in c.effect]
    assert verdict.status == "observed" and "(both on the CPU)" in verdict.evidence


def test_the_noise_note_and_the_compared_runs_name_follow_the_rows_devices() -> None:
    assert noise_note(["cpu", "cpu", None]) == NOISE_NOTE
    assert noise_note(["cpu", "cuda"]) == GPU_NOISE_NOTE and "shared or small CPU" not in GPU_NOISE_NOTE
    said = run_devices(data(fastapi("cuda", "cpu")))
    assert said == f"FastAPI pt on the GPU ({H100}), FastAPI onnx on the CPU"


def test_a_gpu_runs_tables_say_where_each_row_computed() -> None:
    view = short_view(fastapi("cuda", "cpu"), FASTAPI_COLUMNS)
    assert view is not None
    assert list(view["measurement"])[:2] == ["pt sequential c=1 · cuda", "pt concurrent c=16 · cuda"]
    assert list(view["measurement"])[2] == "onnx sequential c=1 · cpu"
    cpu_only = short_view(fastapi("cpu", "cpu", gpu=None), FASTAPI_COLUMNS)
    assert cpu_only is not None and "·" not in "".join(cpu_only["measurement"])


def test_where_a_triton_model_computes(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import onnxruntime

    from servelab.core import gpu
    from servelab.core.paths import STAGING_DIR
    from servelab.triton.config import read_config, set_instances
    from servelab.triton.repository import serving_device, to_python_runner

    python, onnx = (read_config(STAGING_DIR / n) for n in ("food_classifier", "food_classifier_onnx"))
    on_gpu, on_cpu = set_instances(python, 1, "KIND_GPU", [0]), set_instances(python, 2, "KIND_CPU", [])
    monkeypatch.setattr(gpu, "torch_gpu_usable", lambda torch, device=0, warn=None: True)
    assert serving_device(on_gpu, python) == ("cuda", "GPU")
    assert serving_device(on_cpu, python) == ("cpu", "CPU")
    # torch here cannot run the GPU (no CUDA, or no kernels for it): the stubs, which import this Python's
    # packages on the local target, fall back to the CPU, and the row says so; Triton's own image is
    # taken at the config's word
    monkeypatch.setattr(gpu, "torch_gpu_usable", lambda torch, device=0, warn=None: False)
    device, words = serving_device(on_gpu, python)
    assert device == "cpu" and "cannot run the GPU: the model falls back" in words
    assert serving_device(on_gpu, python, same_packages=False) == ("cuda", "GPU")
    assert serving_device(set_instances(onnx, 1, "KIND_GPU", [0]), onnx) == ("cuda", "GPU")  # Triton's ORT
    runner = to_python_runner(set_instances(onnx, 1, "KIND_GPU", [0]))  # the local runner: this Python's ORT
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    device, words = serving_device(runner, onnx)
    assert device == "cpu" and "no CUDA provider" in words
    monkeypatch.setattr(onnxruntime, "get_available_providers",
                        lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(gpu, "cuda_device_count", lambda: 1)
    assert serving_device(runner, onnx) == ("cuda", "GPU")


def test_a_cpu_runs_report_sets_the_gpu_reference_beside_it(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from servelab.lab.run_report import write_report
    from servelab.results.reference import REFERENCE_SETTING, reference_run

    reference = reference_run()
    assert reference is not None and (reference / "run.json").is_file()  # the committed H100 run
    fastapi("cpu", "cpu", gpu=None).to_json(tmp_path / "fastapi.jsonl", orient="records", lines=True)
    page = write_report(tmp_path).read_text()
    assert f"compared run {reference.name} (FastAPI pt on the GPU ({H100}), FastAPI onnx on the CPU" in page
    monkeypatch.setenv(REFERENCE_SETTING, "none")
    assert "compared run" not in write_report(tmp_path).read_text()
    monkeypatch.delenv(REFERENCE_SETTING)
    fastapi("cuda", "cpu").to_json(tmp_path / "fastapi.jsonl", orient="records", lines=True)
    assert "compared run" not in write_report(tmp_path).read_text()  # a GPU run needs no GPU beside it


def test_a_reference_setting_without_a_run_is_said_once(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from servelab.results.reference import REFERENCE_SETTING, reference_run

    monkeypatch.setenv(REFERENCE_SETTING, str(tmp_path / "p100"))
    assert reference_run() is None and reference_run() is None
    [line] = capsys.readouterr().err.splitlines()
    assert f"{REFERENCE_SETTING}={tmp_path / 'p100'} holds no run.json" in line and "or to none" in line


def test_06_does_not_compare_the_backends_across_devices() -> None:
    from servelab.lab import step06_onnx_backend

    def rows(onnx_device: str) -> pd.DataFrame:
        sides = (("python_vs_onnx", "food_classifier", "cuda", 30.0),
                 ("onnx_backend", "food_classifier_onnx", onnx_device, 11.0))
        return pd.DataFrame([{"step": step, "model": model, "device": device, "gpu": H100, "concurrency": c,
                              "compute_infer_ms": ms, "throughput": 100.0, "settled": True, "warmup": ""}
                             for step, model, device, ms in sides for c in (1, 8)])

    def verdict(onnx_device: str):  # type: ignore[no-untyped-def]
        data = RunData(pd.DataFrame(), pd.DataFrame(), rows(onnx_device))
        return next(c for c in step06_onnx_backend.rules(data) if "inference time is lower" in c.effect)

    apart = verdict("cpu")
    assert apart.status == "cannot show here" and "this run cannot show it" in apart.evidence
    assert f"the Python backend ran on the GPU ({H100}), the ONNX backend on the CPU" in apart.evidence
    assert verdict("cuda").status == "observed"


def test_a_gpu_effects_evidence_says_where_its_rows_computed() -> None:
    """On a GPU host the local ONNX runner can still compute on the CPU: 06's "two instances" GPU effect
    must not read as a GPU measurement then."""
    from servelab.lab import step06_onnx_backend

    rows = pd.DataFrame([{"step": step, "model": "food_classifier_onnx", "device": "cpu", "gpu": H100,
                          "concurrency": 16, "throughput": tput, "settled": True, "warmup": "",
                          "label": label}
                         for step, tput, label in (("onnx_backend", 100.0, "1 instance"),
                                                   ("onnx_scaling", 150.0, "2 instances"))])
    verdict = next(c for c in step06_onnx_backend.rules(RunData(pd.DataFrame(), pd.DataFrame(), rows))
                   if "two instances" in c.effect)
    assert verdict.evidence.endswith("2 instances 150.0 inferences/s (on the CPU)"), verdict.evidence
