"""Helpers for code that runs INSIDE a Triton Python-backend stub (the lab's model.py
files): how many instances share this CPU and the thread policy that follows from it
(``CPU_THREADS``), and how an ``INPUT_IMAGE`` element becomes a model input.

Kept free of tritonclient and torch imports: the stub imports this module.
"""

from __future__ import annotations

import os
from typing import Any


def cpu_instances(model_config: dict[str, Any]) -> int:
    """Instances of kind CPU that the model's config asks for (at least 1)."""
    groups = model_config.get("instance_group", [])
    return sum(int(g.get("count", 1)) for g in groups if g.get("kind", "KIND_CPU") == "KIND_CPU") or 1


def running_instances(model_file: str) -> int:
    """How many stub processes of this model the server runs right now (this one included).

    Triton adds or removes instances in place when only the instance count
    changes, so the count an instance saw at start-up goes stale; the live
    count is read from /proc (siblings under the same server running this model file).
    """
    parent, wanted, count = os.getppid(), model_file.encode(), 0
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return 1
    for pid in entries:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                ppid = int(handle.read().rsplit(b")", 1)[1].split()[1])
            if ppid != parent:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if wanted in handle.read():
                    count += 1
        except (OSError, ValueError, IndexError):
            continue
    return max(count, 1)


def thread_setting(setting: str) -> str:
    """The ``CPU_THREADS`` in force: env ``SERVELAB_TRITON_THREADS`` over the config's (empty: auto)."""
    return os.environ.get("SERVELAB_TRITON_THREADS", setting or "auto").strip().lower()


def choose_threads(setting: str, instances: int, on_gpu: bool, cores: int | None = None) -> int | None:
    """Intra-op threads for one instance (the config's ``CPU_THREADS``); None leaves torch's default.

    ``auto``: the cores but one divided among the CPU instances (one core stays
    free for Triton's front end, the stubs' image decoding and the client);
    ``default``: torch's own (every core, the plain setting the lab compares
    with); a number: that many. Env ``SERVELAB_TRITON_THREADS`` overrides it.
    """
    # why: docs/decisions/2026-11-23-triton-python-model.md
    setting = thread_setting(setting)
    if setting == "default":
        return None
    if setting != "auto":
        return max(1, int(setting))
    if on_gpu:
        return 1  # the CPU only decodes images; the GPU does the maths
    if cores is None:
        from servelab.core.cpu import cpu_cores

        cores = cpu_cores()
    return max(1, (cores - 1) // max(1, instances))


def ort_threads(setting: str, instances: int) -> int:
    """ONNX Runtime's ``intra_op_num_threads`` for one CPU instance by the ``CPU_THREADS`` rule
    (``choose_threads``); 0, ONNX Runtime's own choice, for ``default``. The local runner and Triton's
    onnxruntime backend (``intra_op_thread_count``) both take it."""
    return choose_threads(setting, instances, on_gpu=False) or 0


def instance_threads(backend: str, parameters: dict[str, str], cpu_instances: int, on_gpu: bool,
                     cores: int) -> int | None:
    """Intra-op threads one CPU instance runs with, as the tables show it: the Python backend's (and the
    local ONNX runner's) ``CPU_THREADS`` rule; Triton's onnxruntime backend takes its
    ``intra_op_thread_count`` (absent or 0: every core, its default). None on a GPU: there the GPU
    does the maths and the CPU threads are not what a comparison changes."""
    if on_gpu:
        return None
    if backend == "onnxruntime":
        figure = int(parameters.get("intra_op_thread_count", "0") or 0)
        return figure if figure > 0 else cores
    threads = choose_threads(parameters.get("CPU_THREADS", ""), cpu_instances, on_gpu, cores)
    return threads if threads is not None else cores


class CpuThreads:
    """The torch thread count of one Python-backend instance, following the instance count in ``auto``.

    Triton adds or removes instances in place when only their count changes, so
    ``follow()`` (called from ``execute``) re-reads the live count at most every 2 s.
    """

    def __init__(self, torch: Any, model_config: dict[str, Any], model_file: str, on_gpu: bool) -> None:
        parameters = {k: v.get("string_value", "") for k, v in model_config.get("parameters", {}).items()}
        self.torch, self.model_file = torch, model_file
        self.setting = parameters.get("CPU_THREADS", "").strip() or "auto"  # absent or empty: auto
        self.adapt = not on_gpu and thread_setting(self.setting) == "auto"
        self.next_check = 0.0
        threads = choose_threads(self.setting, cpu_instances(model_config), on_gpu)
        if threads is not None:
            torch.set_num_threads(threads)

    def follow(self) -> str | None:
        """In ``auto`` mode, match the running instance count; returns a log line when it changed."""
        import time

        now = time.monotonic()
        if not self.adapt or now < self.next_check:
            return None
        self.next_check = now + 2.0
        wanted = choose_threads("auto", running_instances(self.model_file), on_gpu=False)
        if wanted is None or wanted == self.torch.get_num_threads():
            return None
        self.torch.set_num_threads(wanted)
        return f"{wanted} intra-op thread(s) per instance now"


def stub_arrays_problem(pb_utils: Any, np: Any) -> str | None:
    """Why this stub would misread its inputs, or None. Call from ``initialize``.

    The Python backend of Triton 2.51 (r24.10) builds its stub with pybind11 2.10, which reads numpy 1's
    dtype layout: with numpy 2 every array it makes from the server's buffers repeats the first byte,
    so a string input kills the stub at the first request (``deserialize_bytes_tensor ...
    unpack_from``) and a float input arrives as garbage. A stub built with a numpy-2-aware pybind11
    passes the probe. Why and how it was found: docs/decisions/2026-11-26-triton-python-backend-on-gpu.md
    """
    if int(str(np.__version__).split(".")[0]) < 2:
        return None  # numpy 1: every stub reads it right (and the probe's DLPack path breaks numpy 1.26)
    probe = np.arange(1, 9, dtype=np.uint8)
    seen = pb_utils.Tensor.from_dlpack("servelab_probe", probe).as_numpy()
    if np.array_equal(seen, probe):
        return None
    import sys

    return (f"this Triton's Python-backend stub misreads numpy {np.__version__} arrays (it reads "
            f"{seen.tolist()} for {probe.tolist()}): requests would kill it. The stub imports the packages "
            f"of {sys.prefix} (numpy at {np.__file__}): give that Python numpy<2 (constraints.txt "
            "pins numpy 1.26.4), or put numpy<2 first on PYTHONPATH before the lab starts Triton")


IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG", b"GIF8", b"RIFF", b"BM", b"II*\x00", b"MM\x00*")


def decode_image(item: Any) -> Any:
    """One INPUT_IMAGE element (base64 text, or the raw bytes of an image file) → float32 [3, 224, 224].

    Raises ``servelab.core.preprocess.ImageError`` when it is neither.
    """
    from servelab.core.preprocess import ImageError, decode_base64, load_image, preprocess

    data = item if isinstance(item, bytes) else str(item).encode()
    if not data.startswith(IMAGE_MAGIC):
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            raise ImageError("INPUT_IMAGE is neither base64 text nor an image file") from None
        data = decode_base64(text)
    return preprocess(load_image(data))
