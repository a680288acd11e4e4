"""The live model repository: deploy staged models into it, as the lab's
``cp -r models_staging/x models/`` does, adapted to the target.

On a CPU target every ``KIND_GPU`` instance group becomes ``KIND_CPU`` (the
staged configs are written for the GPU node). The local Triton has no ONNX
Runtime backend, so an ``onnxruntime`` model is deployed there under the same
name and I/O through a generated Python-backend runner. Both adaptations are
printed: a student must see that the local run is not the GPU node's setup.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from servelab.core.paths import BUILD_COMMAND, STAGING_DIR
from servelab.triton.config import CONFIG_NAME, ModelConfig, config_text, mc, read_config

RUNNER_TEMPLATE = Path(__file__).with_name("onnx_runner_model.py")
ONNX_BACKENDS = {"onnxruntime", "onnxruntime_onnx"}
REQUIRED_ARTEFACTS = {"food_classifier": "food11.pth", "food_classifier_onnx": "model.onnx"}


def to_cpu(cfg: ModelConfig) -> tuple[ModelConfig, bool]:
    """KIND_GPU instance groups → KIND_CPU (gpus dropped); says whether anything changed."""
    new = ModelConfig()
    new.CopyFrom(cfg)
    changed = False
    for group in new.instance_group:
        if group.kind == mc.ModelInstanceGroup.KIND_GPU:
            group.kind = mc.ModelInstanceGroup.KIND_CPU
            del group.gpus[:]
            changed = True
    return new, changed


def is_onnx(cfg: ModelConfig) -> bool:
    return cfg.backend in ONNX_BACKENDS or cfg.platform in ONNX_BACKENDS


def to_python_runner(cfg: ModelConfig) -> ModelConfig:
    """The staged ONNX config with its backend switched to the generated Python runner."""
    new = ModelConfig()
    new.CopyFrom(cfg)
    new.ClearField("platform")
    new.backend = "python"
    new.parameters["CPU_THREADS"].string_value = "auto"  # the runner follows the Python model's rule
    return new


def serving_device(live: ModelConfig, staged: ModelConfig, same_packages: bool = True) -> tuple[str, str]:
    """Where a deployed model's instances compute: (``device`` as the tables record it, the words a
    notebook prints). ``cuda`` for KIND_GPU instances; ``cpu`` for KIND_CPU ones. A Python-backend model
    on KIND_GPU falls back to the CPU where its packages cannot run the GPU: the generated ONNX runner
    without onnxruntime's CUDA provider, ``food_classifier`` where torch cannot run it (no CUDA, or no
    kernels for the GPU). ``same_packages``: Triton's stubs import this Python's packages (the local
    target), so this process can tell; elsewhere (Triton's own image) the config is taken at its word."""
    if not any(g.kind == mc.ModelInstanceGroup.KIND_GPU for g in live.instance_group):
        return "cpu", "CPU"
    if live.backend == "python" and same_packages:
        from servelab.core.gpu import ort_has_cuda, torch_gpu_usable

        if is_onnx(staged):
            import onnxruntime

            if not ort_has_cuda(onnxruntime):
                return "cpu", ("CPU (KIND_GPU, but onnxruntime here has no CUDA provider: the runner falls "
                               "back)")
        else:
            import torch

            gpu = next((int(g.gpus[0]) for g in live.instance_group
                        if g.kind == mc.ModelInstanceGroup.KIND_GPU and g.gpus), 0)
            if not torch_gpu_usable(torch, gpu):
                return "cpu", (f"CPU (KIND_GPU, but torch {torch.__version__} here cannot run the GPU: the "
                               "model falls back, as Triton's log says)")
    return "cuda", "GPU"


def _check_artefacts(staged: Path) -> None:
    needed = REQUIRED_ARTEFACTS.get(staged.name)
    versions = [p for p in staged.iterdir() if p.is_dir() and p.name.isdigit()]
    if not versions:
        raise FileNotFoundError(f"{staged} has no version folder (e.g. {staged}/1)")
    if needed and not any((v / needed).is_file() for v in versions):
        raise FileNotFoundError(f"{staged}/1/{needed} is missing; build it with: {BUILD_COMMAND}")


def deploy_model(staged_name: str, repository: Path, gpu: bool, staging_dir: Path = STAGING_DIR,
                 onnx_backend: bool | None = None, quiet: bool = False) -> Path:
    """Copy ``staging_dir/staged_name`` into ``repository`` and adapt it to the target.

    ``onnx_backend`` says whether the server has Triton's ONNX Runtime backend
    (default: only on GPU targets). Returns the deployed model folder.
    """
    say = (lambda _msg: None) if quiet else print
    staged = Path(staging_dir) / staged_name
    if not (staged / CONFIG_NAME).is_file():
        raise FileNotFoundError(f"no staged model '{staged_name}' ({staged / CONFIG_NAME} missing)")
    _check_artefacts(staged)
    cfg = read_config(staged)
    dest = Path(repository) / staged_name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(staged, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    say(f"deployed {staged} -> {dest}")
    if not gpu:
        cfg, changed = to_cpu(cfg)
        if changed:
            say(f"  {staged_name}: CPU target, instance_group KIND_GPU -> KIND_CPU")
    if is_onnx(cfg) and not (gpu if onnx_backend is None else onnx_backend):
        cfg = to_python_runner(cfg)
        for version in (p for p in dest.iterdir() if p.is_dir() and p.name.isdigit()):
            shutil.copyfile(RUNNER_TEMPLATE, version / "model.py")
        say(f"  {staged_name}: this Triton has no onnxruntime backend; serving model.onnx through a "
            "generated Python-backend runner (model.py calling onnxruntime), same name and I/O")
    elif is_onnx(cfg) and not gpu:  # Triton's onnxruntime backend on a CPU: the Python backend's thread rule
        from servelab.triton.config import set_parameter
        from servelab.triton.instances import ort_threads

        threads = ort_threads("auto", sum(g.count for g in cfg.instance_group) or 1)
        cfg = set_parameter(cfg, "intra_op_thread_count", str(threads))
        say(f"  {staged_name}: CPU target, intra_op_thread_count {threads} (the Python backend's "
            "CPU_THREADS=auto rule, so the two backends compare on the same cores)")
    (dest / CONFIG_NAME).write_text(config_text(cfg))
    if cfg.backend == "python":
        precompile(dest)
    return dest


def precompile(model_dir: Path) -> None:
    """Write model.py's bytecode now, so the first load does not write a __pycache__.

    A file appearing in a version folder after the load makes Triton treat the
    next config change as a modified model: a full reload (every instance
    restarted, seconds) instead of adding/removing instances in place.
    """
    import py_compile

    for source in Path(model_dir).glob("[0-9]*/model.py"):
        # hash-checked: stays valid when the folder is copied (new mtimes) to another host or stack
        py_compile.compile(str(source), doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)


MODELS = ("food_classifier", "food_classifier_onnx")


def deploy_all(repository: Path, gpu: bool, names: tuple[str, ...] = MODELS, *,
               staging_dir: Path = STAGING_DIR, onnx_backend: bool | None = None,
               quiet: bool = False) -> dict[str, Path]:
    """Deploy several staged models (``deploy_model``'s options for each); returns name → deployed folder."""
    Path(repository).mkdir(parents=True, exist_ok=True)
    return {name: deploy_model(name, repository, gpu, staging_dir=staging_dir, onnx_backend=onnx_backend,
                               quiet=quiet)
            for name in names}
