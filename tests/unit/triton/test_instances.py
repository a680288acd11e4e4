"""The helpers model.py uses inside the stub: thread policy and INPUT_IMAGE decoding."""

from __future__ import annotations

import base64

import pytest

from servelab.core.preprocess import ImageError
from servelab.core.samples import sample_paths
from servelab.triton import instances
from servelab.triton.instances import choose_threads, cpu_instances, decode_image


def test_auto_threads_leave_one_core_and_split_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVELAB_TRITON_THREADS", raising=False)
    monkeypatch.setattr("servelab.core.cpu.cpu_cores", lambda: 9)
    assert choose_threads("auto", 1, on_gpu=False) == 8
    assert choose_threads("auto", 4, on_gpu=False) == 2
    assert choose_threads("auto", 16, on_gpu=False) == 1
    assert choose_threads("auto", 1, on_gpu=True) == 1
    assert choose_threads("default", 1, on_gpu=False) is None
    assert choose_threads("3", 4, on_gpu=False) == 3
    monkeypatch.setenv("SERVELAB_TRITON_THREADS", "default")
    assert choose_threads("auto", 1, on_gpu=False) is None


def test_cpu_instances_counts_only_cpu_groups() -> None:
    config = {"instance_group": [{"count": 2, "kind": "KIND_CPU"}, {"count": 3, "kind": "KIND_GPU"}]}
    assert cpu_instances(config) == 2
    assert cpu_instances({}) == 1


class FakeTorch:
    def __init__(self) -> None:
        self.threads = 8

    def set_num_threads(self, n: int) -> None:
        self.threads = n

    def get_num_threads(self) -> int:
        return self.threads


def test_cpu_threads_follow_the_running_instance_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVELAB_TRITON_THREADS", raising=False)
    monkeypatch.setattr("servelab.core.cpu.cpu_cores", lambda: 5)
    torch = FakeTorch()
    config = {"instance_group": [{"count": 1, "kind": "KIND_CPU"}]}
    threads = instances.CpuThreads(torch, config, "m.py", False)
    assert torch.threads == 4
    monkeypatch.setattr(instances, "running_instances", lambda _file: 2)
    assert threads.follow() == "2 intra-op thread(s) per instance now" and torch.threads == 2
    assert threads.follow() is None  # checked again only after 2 s
    fixed = instances.CpuThreads(FakeTorch(), {"parameters": {"CPU_THREADS": {"string_value": "default"}}},
                                 "m.py", False)
    assert fixed.follow() is None and fixed.torch.threads == 8


def test_decode_image_takes_base64_text_or_raw_bytes() -> None:
    data = sample_paths()[0].read_bytes()
    from_text = decode_image(base64.b64encode(data))
    from_bytes = decode_image(data)
    assert from_text.shape == (3, 224, 224) and (from_text == from_bytes).all()
    with pytest.raises(ImageError):
        decode_image(b"\x00\x01 not an image")
