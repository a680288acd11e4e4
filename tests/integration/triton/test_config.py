"""Config editing as ModelConfig protobufs, and live reloads on the real server."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from servelab.core.paths import STAGING_DIR
from servelab.triton import config as cfgmod
from servelab.triton.experiments import configure
from servelab.triton.repository import deploy_model
from servelab.triton.server import ModelLoadError

ONNX = "food_classifier_onnx"


# ------------------------------------------------------------------ offline
def test_staged_configs_parse_and_say_what_the_lab_says() -> None:
    classifier = cfgmod.read_config(STAGING_DIR / "food_classifier")
    assert classifier.backend == "python" and classifier.max_batch_size == 16
    assert [(i.name, i.data_type, list(i.dims)) for i in classifier.input] == [
        ("INPUT_IMAGE", cfgmod.mc.TYPE_STRING, [1])]
    assert [o.name for o in classifier.output] == ["FOOD_LABEL", "PROBABILITY"]
    assert cfgmod.summary(classifier)["instances"] == "1xKIND_GPU[0]"
    onnx = cfgmod.read_config(STAGING_DIR / ONNX)
    assert onnx.backend == "onnxruntime" and list(onnx.input[0].dims) == [3, 224, 224]


def test_edits_and_diff() -> None:
    cfg = cfgmod.read_config(STAGING_DIR / ONNX)
    new = cfgmod.set_instance_groups(cfg, [(2, "KIND_GPU", [0, 1])])
    new = cfgmod.set_dynamic_batching(new, True, [4, 6, 8], 100)
    diff = cfgmod.diff_configs(cfgmod.config_text(cfg), cfgmod.config_text(new))
    assert "+  count: 2" in diff and "+  preferred_batch_size: 6" in diff
    assert "+  max_queue_delay_microseconds: 100" in diff
    off = cfgmod.set_dynamic_batching(new, False)
    assert not off.HasField("dynamic_batching") and cfg.instance_group[0].count == 1  # input untouched


@pytest.mark.parametrize("groups", [[(0, "KIND_CPU")], [(-1, "KIND_GPU", [0])]])
def test_instance_count_below_one_is_refused(groups) -> None:
    with pytest.raises(cfgmod.ConfigError, match="at least 1"):
        cfgmod.set_instance_groups(cfgmod.read_config(STAGING_DIR / ONNX), groups)


def test_unknown_field_and_bad_sizes_are_refused() -> None:
    text = (STAGING_DIR / ONNX / "config.pbtxt").read_text() + "\nbogus_field: 3\n"
    with pytest.raises(cfgmod.ConfigError, match="bogus_field"):
        cfgmod.parse_config(text)
    with pytest.raises(cfgmod.ConfigError, match=r"outside 1\.\.16"):
        cfgmod.set_dynamic_batching(cfgmod.read_config(STAGING_DIR / ONNX), True, [32])
    with pytest.raises(cfgmod.ConfigError, match="unknown instance kind"):
        cfgmod.set_instances(cfgmod.read_config(STAGING_DIR / ONNX), 1, "KIND_TPU")


def test_deploy_adapts_to_the_target(tmp_path: Path, capsys) -> None:
    cpu = deploy_model(ONNX, tmp_path / "cpu", gpu=False)
    said = capsys.readouterr().out
    assert "KIND_GPU -> KIND_CPU" in said and "no onnxruntime backend" in said
    cfg = cfgmod.read_config(cpu)
    assert cfg.backend == "python" and cfg.instance_group[0].kind == cfgmod.mc.ModelInstanceGroup.KIND_CPU
    assert (cpu / "1" / "model.py").is_file() and (cpu / "1" / "model.onnx").is_file()
    gpu = deploy_model(ONNX, tmp_path / "gpu", gpu=True)
    assert cfgmod.read_config(gpu) == cfgmod.read_config(STAGING_DIR / ONNX)  # unchanged for the GPU node
    assert not (gpu / "1" / "model.py").exists()


# ------------------------------------------------------------------ live
def _keep_sending(triton, tri, batch: np.ndarray, stop: threading.Event, outcomes: list[str]) -> None:
    client = triton.new_client()
    try:
        while not stop.is_set():
            try:
                client.infer(ONNX, [tri.tensor_input(batch)])
                outcomes.append("ok")
            except Exception as exc:  # every failure is recorded and asserted on
                outcomes.append(f"error: {exc}")
    finally:
        client.close()


def test_instances_1_to_2_live_without_restart_while_answering(triton, tri, samples) -> None:
    from servelab.core.preprocess import preprocess_bytes

    batch = preprocess_bytes(samples[0].read_bytes())[None]
    pid = triton.pid
    stop, outcomes = threading.Event(), []
    sender = threading.Thread(target=_keep_sending, args=(triton, tri, batch, stop, outcomes))
    sender.start()
    log_offset = triton.log_path.stat().st_size
    try:
        time.sleep(0.5)
        result = configure(triton, ONNX, instances=2)
        answered_during = len(outcomes)
        time.sleep(2.5)  # the first instance re-checks its thread count at most every 2 s
    finally:
        stop.set()
        sender.join(30)
        back = configure(triton, ONNX, instances=1, show_diff=False)
    assert result["live"]["instances"] == "2xKIND_CPU"
    assert "+  count: 2" in result["diff"]
    assert result["seconds_to_live"] < 30
    assert triton.pid == pid and triton.running, "the server was restarted"
    failures = [o for o in outcomes if o != "ok"]
    assert not failures, failures[:3]
    assert answered_during > 0 and len(outcomes) > answered_during
    assert back["live"]["instances"] == "1xKIND_CPU"
    with triton.log_path.open("rb") as handle:
        handle.seek(log_offset)
        log = handle.read().decode(errors="replace")
    cores = len(os.sched_getaffinity(0))
    # the CPU_THREADS=auto rule: the cores but one, shared out; the new instance starts with the
    # two-instance share, and the old one follows in place when that share differs from its own
    one, two = max(1, cores - 1), max(1, (cores - 1) // 2)
    assert log.count(f"intra-op threads {two}") >= (2 if two != one else 1), log[-2000:]


def test_dynamic_batching_without_preferred_sizes_goes_live(triton) -> None:
    # Triton fills in preferred_batch_size = [max_batch_size] itself; that is not a mismatch
    try:
        result = configure(triton, ONNX, dynamic_batching=True, max_queue_delay_us=500, show_diff=False)
        assert result["live"]["dynamic_batching"] is True
        assert result["live"]["max_queue_delay_us"] == 500
    finally:
        back = configure(triton, ONNX, dynamic_batching=False, show_diff=False)
    assert back["live"]["dynamic_batching"] is False


def test_bad_configs_are_refused_and_the_old_one_keeps_serving(triton, tri, samples) -> None:
    from servelab.core.preprocess import preprocess_bytes

    model_dir = Path(triton.repository) / ONNX
    before_text = (model_dir / "config.pbtxt").read_text()
    before = cfgmod.live_config(triton, ONNX)
    zero = cfgmod.ModelConfig()
    zero.CopyFrom(before)
    zero.instance_group[0].count = 0
    with pytest.raises(cfgmod.ConfigError, match="at least 1"):
        cfgmod.apply_config(triton, ONNX, model_dir, zero)
    too_big = cfgmod.set_dynamic_batching(before, True, [8], 100)
    too_big.max_batch_size = 4  # Triton's own check: preferred size must be <= max batch size
    with pytest.raises(cfgmod.ConfigError, match="preferred size must be <= max batch size"):
        cfgmod.apply_config(triton, ONNX, model_dir, too_big)
    unknown = json.loads(cfgmod.config_json(before))
    unknown["bogus_field"] = 1
    with pytest.raises(ModelLoadError, match="bogus_field"):
        triton.load(ONNX, config=json.dumps(unknown))
    assert (model_dir / "config.pbtxt").read_text() == before_text, "refused config left in the file"
    assert cfgmod.live_config(triton, ONNX) == before
    batch = preprocess_bytes(samples[0].read_bytes())[None]
    assert triton.client().infer(ONNX, [tri.tensor_input(batch)]).as_numpy("output").shape == (1, 11)


def test_a_bad_image_in_a_batch_fails_alone(triton, tri, samples) -> None:
    """With dynamic batching, good and bad requests share one execute; only the bad one fails."""
    from concurrent.futures import ThreadPoolExecutor

    from servelab.triton.stats import run_stats

    configure(triton, "food_classifier", dynamic_batching=True, preferred_batch_sizes=[4],
              max_queue_delay_us=300_000, show_diff=False)
    items = [tri.b64(samples[0]), b"%%% broken %%%", tri.b64(samples[1]), tri.b64(samples[2])]

    def send(item: bytes) -> str:
        client = triton.new_client()
        try:
            return tri.classify(client, [item])[0][0]
        except Exception as exc:
            return f"error: {exc}"
        finally:
            client.close()

    try:
        with run_stats(triton.client(), "food_classifier") as stats, ThreadPoolExecutor(4) as pool:
            replies = list(pool.map(send, items))
    finally:
        configure(triton, "food_classifier", dynamic_batching=False, show_diff=False)
    assert replies[1].startswith("error") and "bad image" in replies[1]
    assert all(not r.startswith("error") for i, r in enumerate(replies) if i != 1), replies
    assert stats.delta["executions_batch_gt1"] >= 1, stats.delta
