"""The micro-batcher on its own: batches what is waiting, survives a failing forward pass."""

from __future__ import annotations

import asyncio
import base64
import functools
import threading

import numpy as np
import pytest

from servelab.core.labels import NUM_CLASSES
from servelab.core.preprocess import ImageError
from servelab.core.samples import sample_paths
from servelab.serving.batcher import InferenceError, MicroBatcher
from servelab.serving.endpoint import decode_and_preprocess
from servelab.serving.settings import Settings
from servelab.serving.stages import Stopwatch

SETTINGS = Settings.from_env(default_model_path=sample_paths()[0], default_max_batch=2, gpu=False)
IMAGE = functools.partial(decode_and_preprocess, base64.b64encode(sample_paths()[0].read_bytes()).decode(),
                          SETTINGS, Stopwatch())
BROKEN = functools.partial(decode_and_preprocess, "not base64!", SETTINGS, Stopwatch())


class CountingModel:
    """A stand-in forward pass (the real engines are tested through the services)."""

    def __init__(self, fail_first: int = 0, hold: threading.Event | None = None) -> None:
        self.batch_sizes: list[int] = []
        self.fail_first = fail_first
        self.hold = hold

    def __call__(self, batch: np.ndarray, alone: bool = True) -> np.ndarray:
        if self.hold is not None:
            self.hold.wait(10)
        self.batch_sizes.append(len(batch))
        if len(self.batch_sizes) <= self.fail_first:
            raise RuntimeError("simulated out-of-memory")
        return np.tile(np.arange(NUM_CLASSES, dtype=np.float32), (len(batch), 1))


async def _gather(batcher: MicroBatcher, count: int) -> list[object]:
    return await asyncio.gather(*(batcher.predict(IMAGE) for _ in range(count)), return_exceptions=True)


def _behind_held_batches(batcher: MicroBatcher, hold: threading.Event, count: int) -> list[object]:
    """``count`` requests at once, all preprocessed and queued while the first batches are held."""

    async def scenario() -> list[object]:
        tasks = asyncio.gather(*(batcher.predict(IMAGE) for _ in range(count)))
        await asyncio.sleep(1.0)
        hold.set()
        return await tasks

    try:
        return asyncio.run(scenario())
    finally:
        batcher.close()


def test_worker_survives_a_failing_batch() -> None:
    model = CountingModel(fail_first=1)
    batcher = MicroBatcher(lambda _index: model, max_batch=1, preprocess_workers=1)
    try:
        results = asyncio.run(_gather(batcher, 3))
    finally:
        batcher.close()
    assert isinstance(results[0], InferenceError) and "simulated out-of-memory" in str(results[0])
    assert all(isinstance(r, np.ndarray) and r.shape == (NUM_CLASSES,) for r in results[1:])


def test_waiting_requests_are_batched_up_to_max_batch() -> None:
    hold = threading.Event()
    model = CountingModel(hold=hold)
    batcher = MicroBatcher(lambda _index: model, max_batch=4, preprocess_workers=2)
    results = _behind_held_batches(batcher, hold, 9)
    assert len(results) == 9 and max(model.batch_sizes) == 4 and sum(model.batch_sizes) == 9


def test_a_bad_image_fails_only_its_own_request() -> None:
    batcher = MicroBatcher(lambda _index: CountingModel(), max_batch=8, preprocess_workers=2)

    async def scenario() -> list[object]:
        return await asyncio.gather(batcher.predict(BROKEN), batcher.predict(IMAGE),
                                    return_exceptions=True)

    try:
        bad, good = asyncio.run(scenario())
    finally:
        batcher.close()
    assert isinstance(bad, ImageError)
    assert isinstance(good, np.ndarray)


def test_a_model_that_fails_to_load_fails_the_start() -> None:
    def load(_index: int) -> CountingModel:
        raise FileNotFoundError("weights.pth")

    with pytest.raises(FileNotFoundError, match=r"weights\.pth"):
        MicroBatcher(load, max_batch=1, preprocess_workers=1)


def test_settings_reject_nonsense() -> None:
    from pathlib import Path

    from servelab.serving.settings import Settings, SettingsError

    with pytest.raises(SettingsError, match="MAX_BATCH=0 must be at least 1"):
        Settings.from_env(Path("m.onnx"), 16, env={"MAX_BATCH": "0"})
    settings = Settings.from_env(Path("m.onnx"), 16, env={"INFER_THREADS": "1"})
    assert settings.max_batch == 16 and settings.infer_threads == 1


class WorkerRecorder:
    """Records which inference thread ran each batch, and whether it was told it ran alone."""

    calls: list[tuple[str, int, bool]]

    def __init__(self, calls: list[tuple[str, int, bool]], hold: threading.Event | None = None,
                 running: list[int] | None = None, overlapped: list[bool] | None = None) -> None:
        self.calls = calls
        self.hold = hold
        self.running = running if running is not None else [0]  # batches inside any recorder now
        self.overlapped = overlapped if overlapped is not None else []  # per call: started beside another

    def __call__(self, batch: np.ndarray, alone: bool = True) -> np.ndarray:
        with LOCK:  # was another batch already running when this one started?
            self.running[0] += 1
            overlapped = self.running[0] > 1
        if self.hold is not None:
            self.hold.wait(10)
        with LOCK:
            self.running[0] -= 1
        self.calls.append((threading.current_thread().name, len(batch), alone))
        self.overlapped.append(overlapped)
        return np.zeros((len(batch), NUM_CLASSES), dtype=np.float32)


LOCK = threading.Lock()


def test_a_lone_request_runs_alone_on_worker_zero() -> None:
    calls: list[tuple[str, int, bool]] = []
    batcher = MicroBatcher(lambda index: WorkerRecorder(calls), max_batch=8, preprocess_workers=1, workers=2)
    try:
        for _ in range(5):  # one client, one request at a time
            asyncio.run(_gather(batcher, 1))
    finally:
        batcher.close()
    assert calls == [("inference-0", 1, True)] * 5


def test_a_backlog_is_shared_between_workers_running_single_threaded() -> None:
    calls: list[tuple[str, int, bool]] = []
    running, overlapped = [0], []
    hold = threading.Event()
    batcher = MicroBatcher(lambda index: WorkerRecorder(calls, hold, running, overlapped), max_batch=8,
                           preprocess_workers=2, workers=2)
    results = _behind_held_batches(batcher, hold, 12)
    assert len(results) == 12 and sum(size for _, size, _ in calls) == 12
    assert {name for name, _, _ in calls} == {"inference-0", "inference-1"}
    # the batches held together were told they share the cores; a batch may be told it runs alone
    # (the very first, taken before the others arrived, or the last, after the others finished)
    # only when no other batch was running as it started
    assert not all(alone for _, _, alone in calls)
    assert not [c for c, both in zip(calls, overlapped, strict=True) if c[2] and both], (calls, overlapped)


def test_gpu_settings_give_one_worker_big_batches_and_every_core_to_decoding() -> None:
    from pathlib import Path

    from servelab.core.cpu import cpu_cores
    from servelab.serving.settings import GPU_MAX_BATCH, Settings

    cpu = Settings.from_env(Path("m.onnx"), 8, env={})
    assert (cpu.max_batch, cpu.infer_workers) == (8, cpu_cores())
    gpu = Settings.from_env(Path("m.pth"), 2, env={}, gpu=True)
    assert (gpu.max_batch, gpu.infer_workers, gpu.preprocess_workers) == (GPU_MAX_BATCH, 1, cpu_cores())
    assert Settings.from_env(Path("m.onnx"), 8, env={}, gpu=True, gpu_max_batch=1).max_batch == 1
    # an empty variable (docker compose's ${MAX_BATCH:-}) means "the default"
    assert Settings.from_env(Path("m.onnx"), 8, env={"MAX_BATCH": ""}, gpu=True).max_batch == GPU_MAX_BATCH


def test_warm_up_runs_every_batch_size_on_a_gpu_and_two_on_the_cpu() -> None:
    from servelab.serving.engines import warm_up

    class Recorder:
        name = "fake"

        def __init__(self, device: str, pad_to: int | None = None) -> None:
            self.device, self.pad_to, self.sizes = device, pad_to, []

        def infer(self, batch: np.ndarray, alone: bool = True) -> np.ndarray:
            self.sizes.append(len(batch))
            return np.zeros((len(batch), NUM_CLASSES), dtype=np.float32)

    gpu, cpu, padded = Recorder("cuda"), Recorder("cpu"), Recorder("cuda", pad_to=6)
    warm_up(gpu, 6)
    warm_up(cpu, 6)
    warm_up(padded, 6)  # ONNX Runtime on CUDA: every batch becomes one [6,3,224,224] pass
    assert gpu.sizes == [1, 2, 3, 4, 5, 6] and cpu.sizes == [1, 6] and padded.sizes == [6]


def test_onnx_padding_to_a_fixed_batch_returns_the_same_logits() -> None:
    from servelab.core.paths import REPO_ROOT
    from servelab.core.preprocess import preprocess_bytes
    from servelab.serving.engines import OnnxBackend

    backend = OnnxBackend(REPO_ROOT / "fastapi_onnx" / "food11.onnx", threads=1)
    assert backend.pad_to is None  # padding is for the CUDA provider only
    batch = np.stack([preprocess_bytes(p.read_bytes()) for p in sample_paths()[:3]])
    plain = backend.infer(batch)
    backend.pad_to = 8
    padded = backend.infer(batch)
    assert padded.shape == (3, NUM_CLASSES)
    np.testing.assert_allclose(padded, plain, atol=1e-5)


def test_cuda_device_count_is_zero_when_devices_are_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    from servelab.core.gpu import cuda_device_count

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert cuda_device_count() == 0


@pytest.mark.parametrize(("capability", "archs", "usable"), [
    ((9, 0), ["sm_80", "sm_90", "sm_100"], True),
    ((8, 6), ["sm_80", "sm_90"], True),             # sm_80 code runs on 8.6
    ((6, 0), ["sm_75", "sm_80", "sm_90a"], False),  # the P100 under a CUDA 12.8+ build
    ((6, 0), ["sm_50", "compute_50"], True),        # PTX for an older GPU is compiled on the fly
    ((12, 0), ["sm_90", "compute_90"], True),
])
def test_a_gpu_the_torch_build_cannot_run_falls_back_to_the_cpu(capability, archs, usable) -> None:
    from types import SimpleNamespace

    from servelab.serving.engines import torch_gpu_usable

    cuda = SimpleNamespace(is_available=lambda: True, get_device_capability=lambda _i: capability,
                           get_arch_list=lambda: archs, get_device_name=lambda _i: "Tesla P100")
    assert torch_gpu_usable(SimpleNamespace(cuda=cuda)) is usable
    no_gpu = SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: False))
    assert torch_gpu_usable(no_gpu) is False


def test_an_engine_that_cannot_run_on_its_device_is_noticed_at_start() -> None:
    from servelab.serving.engines import first_pass_works

    class Broken:
        def run(self, *_args: object) -> list[np.ndarray]:
            raise RuntimeError("CUDA error: no kernel image is available for execution on the device")

    class Fine:
        def run(self, *_args: object) -> list[np.ndarray]:
            return [np.zeros((1, NUM_CLASSES), dtype=np.float32)]

    assert first_pass_works(Broken()) is False and first_pass_works(Fine()) is True


def test_a_torch_worker_keeps_its_thread_count_when_another_worker_loads_beside_it(monkeypatch) -> None:
    """Worker 1 setting one thread while worker 0 loads must not leave worker 0 on one thread.

    PyTorch sets a thread's OpenMP count up at its first op from the count the
    last ``set_num_threads`` anywhere in the process left behind; the
    interloper below lands in exactly that window.
    """
    import torch

    import servelab.core.model
    from servelab.core.paths import REPO_ROOT
    from servelab.serving.engines import TorchBackend

    real_load_model = servelab.core.model.load_model

    def load_model_after_an_interloper(*args: object, **kwargs: object) -> object:
        interloper = threading.Thread(target=torch.set_num_threads, args=(1,))
        interloper.start()
        interloper.join()
        return real_load_model(*args, **kwargs)

    monkeypatch.setattr(servelab.core.model, "load_model", load_model_after_an_interloper)
    seen: list[int] = []

    def worker_0() -> None:
        backend = TorchBackend(REPO_ROOT / "fastapi_pt" / "food11.pth", threads=3)
        backend.infer(np.zeros((1, 3, 224, 224), dtype=np.float32))
        seen.append(torch.get_num_threads())

    main_threads = torch.get_num_threads()
    try:
        worker = threading.Thread(target=worker_0)
        worker.start()
        worker.join(120)
    finally:
        torch.set_num_threads(main_threads)  # the process-wide count other tests' threads start from
    assert seen == [3]
