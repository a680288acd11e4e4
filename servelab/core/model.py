"""The Food-11 MobileNetV2: build the stand-in, load trained weights, export ONNX.

``python -m servelab.core.model build`` writes the artefacts every serving path needs
and is what set-up runs. Without trained weights (none can be downloaded in CI)
it builds a deterministic stand-in whose predictions are non-degenerate: a fresh
MobileNetV2 in eval mode outputs logits of about 1e-9 (BatchNorm running stats
at their initial values), so every class ties at 1/11 and backends cannot be
compared. The stand-in is trained for a few seconds to tell class-tinted drawn
photos apart (see ``servelab.core.samples``) and its BatchNorm statistics are
re-estimated at 224 px. Serving latency depends on the architecture, not on the
weights.

Weights are stored as a plain state_dict and loaded with ``weights_only=True``:
unpickling a whole module would run whatever code the file carries. A file that needs unpickling (a
whole pickled model, as the original lab publishes its ``food11.pth``) is refused unless it is trusted
explicitly by its sha256 (``--trust-sha256``, ``$SERVELAB_WEIGHTS_TRUSTED``); then only its state_dict
is kept. How to point the lab at trained weights: docs/guides/by-hand.md, "The model".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from servelab.core.labels import NUM_CLASSES
from servelab.core.paths import (
    ARTIFACTS_DIR,
    BUILD_COMMAND,
    MANIFEST_NAME,
    ONNX_NAME,
    PT_WEIGHTS_NAME,
    REPO_ROOT,
)

ONNX_INPUT = "input"
ONNX_OUTPUT = "output"
ONNX_OPSET = 17
AGREEMENT_TOLERANCE = 1e-4
DEFAULT_SEED = 11
TRUST_VARIABLE = "SERVELAB_WEIGHTS_TRUSTED"  # the sha256 of a weights file that may be unpickled
TRAIN_IMAGES = 176
TRAIN_STEPS = 40
TRAIN_RESOLUTION = 128  # training at 128 px keeps the build to seconds on a CPU
BUILD_FORMAT = 1  # bump when the stand-in recipe changes, so set-up rebuilds


class BuildError(RuntimeError):
    """The artefacts could not be built or did not verify."""


def destinations(root: Path = REPO_ROOT) -> dict[str, list[Path]]:
    """Where each artefact is copied: the app folders and the Triton staging repo."""
    return {
        PT_WEIGHTS_NAME: [root / "fastapi_pt" / PT_WEIGHTS_NAME,
                          root / "models_staging" / "food_classifier" / "1" / PT_WEIGHTS_NAME],
        ONNX_NAME: [root / "fastapi_onnx" / ONNX_NAME,
                    root / "models_staging" / "food_classifier_onnx" / "1" / "model.onnx"],
    }


def build_architecture() -> Any:
    """An untrained torchvision MobileNetV2 with 11 outputs."""
    from torchvision.models import mobilenet_v2

    return mobilenet_v2(weights=None, num_classes=NUM_CLASSES)


def _drawn_batch(count: int, seed: int, labelled: bool = True) -> tuple[Any, Any]:
    """Preprocessed drawn photos (class-tinted when ``labelled``) and their labels."""
    import torch

    from servelab.core.preprocess import preprocess
    from servelab.core.samples import synthetic_food_image

    labels = np.arange(count) % NUM_CLASSES
    arrays = [preprocess(synthetic_food_image(seed * 10_000 + i, int(labels[i]) if labelled else None))
              for i in range(count)]
    return torch.from_numpy(np.stack(arrays)), torch.from_numpy(labels)


def _recalibrate_batchnorm(model: Any, images: Any) -> None:
    """Re-estimate BatchNorm running statistics at serving resolution (224)."""
    import torch

    for layer in model.modules():
        if isinstance(layer, torch.nn.modules.batchnorm._BatchNorm):
            layer.reset_running_stats()
            layer.momentum = None  # cumulative average over all batches
    model.train()
    with torch.no_grad():
        for chunk in images.split(16):
            model(chunk)
    model.eval()


def make_stand_in(seed: int = DEFAULT_SEED) -> Any:
    """Deterministic, non-degenerate stand-in for a trained Food-11 model.

    A random network with recalibrated BatchNorm is not enough: its pooled
    features barely differ between images, so confident logits would need a
    classifier so steep that float rounding alone makes ONNX Runtime and PyTorch
    disagree by >1e-4. A few seconds of training on class-tinted drawn photos
    gives features that really differ, hence well-conditioned logits.
    """
    import torch

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = build_architecture()
    images, labels = _drawn_batch(TRAIN_IMAGES, seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for _ in range(TRAIN_STEPS):
        index = torch.from_numpy(rng.choice(len(images), 16, replace=False))
        small = torch.nn.functional.interpolate(images[index], size=TRAIN_RESOLUTION, mode="bilinear")
        loss = torch.nn.functional.cross_entropy(model(small), labels[index])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    _recalibrate_batchnorm(model, images)
    return model


def fetch_weights(source: str, workdir: Path) -> Path:
    """A local path as is, or an http(s) URL downloaded into ``workdir``."""
    if source.startswith(("http://", "https://")):
        target = workdir / "downloaded_weights.pth"
        print(f"downloading trained weights from {source}")
        with urllib.request.urlopen(source, timeout=120) as response, target.open("wb") as out:
            shutil.copyfileobj(response, out)
        return target
    path = Path(source).expanduser()
    if not path.is_file():
        raise BuildError(f"trained weights file not found: {path}")
    return path


def _unpickled(path: Path, trusted: str) -> Any:
    """A file that needs unpickling, loaded only when ``trusted`` is its sha256; a whole model gives its
    state_dict."""
    import torch

    digest = file_sha256(path)
    if trusted.strip().lower() != digest:
        why = "" if not trusted else f" (the sha256 trusted is {trusted.strip()}, not this file's)"
        raise BuildError(
            f"{path} needs unpickling to load (a whole pickled model, not a plain state_dict), which runs "
            f"any code the file carries: refused{why}. If you trust where it comes from, set "
            f"{TRUST_VARIABLE}={digest} (its sha256) and build again, or save its state_dict instead")
    print(f"unpickling {path}: trusted by its sha256 {digest}")
    obj = torch.load(path, map_location="cpu", weights_only=False)
    return obj.state_dict() if hasattr(obj, "state_dict") and callable(obj.state_dict) else obj


def load_state_dict_file(path: Path, trusted: str = "") -> dict[str, Any]:
    """Read a state_dict safely; accepts a bare dict or one under 'state_dict'/'model'. A file that needs
    unpickling is refused unless ``trusted`` is its sha256 (``_unpickled``)."""
    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # torch's weights-only loader refused what it would have to unpickle
        obj = _unpickled(path, trusted)
    except Exception as exc:  # any unreadable file is the same user error
        raise BuildError(
            f"{path} is not a weights-only state_dict ({exc.__class__.__name__}: {exc}); "
            "save it with torch.save(model.state_dict(), path)"
        ) from None
    if isinstance(obj, dict):
        for key in ("state_dict", "model"):
            if isinstance(obj.get(key), dict):
                obj = obj[key]
    if not isinstance(obj, dict):
        raise BuildError(f"{path} holds a {type(obj).__name__}, not a state_dict")
    return obj


def load_model(path: Path, device: str = "cpu", trusted: str = "") -> Any:
    """MobileNetV2 with the weights in ``path``, in eval mode on ``device`` (``trusted``: see
    ``load_state_dict_file``)."""
    model = build_architecture()
    state = load_state_dict_file(path, trusted)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise BuildError(f"{path} does not fit MobileNetV2 with {NUM_CLASSES} outputs: {exc}") from None
    return model.to(device).eval()


def export_onnx(model: Any, path: Path) -> None:
    """ONNX export: input 'input' [N,3,224,224] FP32 → output 'output' [N,11], dynamic N."""
    import torch

    dummy = torch.zeros(1, 3, 224, 224)
    torch.onnx.export(
        model, (dummy,), str(path),
        input_names=[ONNX_INPUT], output_names=[ONNX_OUTPUT],
        dynamic_axes={ONNX_INPUT: {0: "batch"}, ONNX_OUTPUT: {0: "batch"}},
        opset_version=ONNX_OPSET, dynamo=False,
    )


def check_agreement(model: Any, onnx_path: Path, seed: int = DEFAULT_SEED) -> float:
    """Max |PyTorch − ONNX Runtime| logit difference on a batch of drawn images."""
    import onnxruntime as ort
    import torch

    batch, _ = _drawn_batch(8, seed + 1)
    with torch.no_grad():
        expected = model(batch).numpy()
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got = session.run([ONNX_OUTPUT], {ONNX_INPUT: batch.numpy()})[0]
    if got.shape != (8, NUM_CLASSES):
        raise BuildError(f"ONNX output has shape {got.shape}, expected (8, {NUM_CLASSES})")
    diff = float(np.abs(expected - got).max())
    if diff > AGREEMENT_TOLERANCE:
        raise BuildError(
            f"ONNX and PyTorch logits differ by {diff:.2e} (> {AGREEMENT_TOLERANCE:.0e}); "
            "the export is wrong — do not serve it"
        )
    return diff


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_version(path: Path) -> str:
    """Short content hash: what /health reports, so two services can be compared."""
    return file_sha256(path)[:12]


def _manifest(source: str, seed: int, diff: float, pt: Path, onnx_path: Path) -> dict[str, Any]:
    return {
        "format": BUILD_FORMAT,
        "source": source,
        "seed": seed,
        "onnx_max_abs_diff": diff,
        "pt_sha256": file_sha256(pt),
        "onnx_sha256": file_sha256(onnx_path),
        "version": model_version(pt),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _up_to_date(out_dir: Path, source: str, seed: int, root: Path) -> bool:
    manifest_path = out_dir / MANIFEST_NAME
    if not manifest_path.is_file():
        return False
    manifest = json.loads(manifest_path.read_text())
    if (manifest.get("format"), manifest.get("source"), manifest.get("seed")) != (BUILD_FORMAT, source, seed):
        return False
    wanted = {PT_WEIGHTS_NAME: manifest["pt_sha256"], ONNX_NAME: manifest["onnx_sha256"]}
    for name, digest in wanted.items():
        for path in [out_dir / name, *destinations(root)[name]]:
            if not path.is_file() or file_sha256(path) != digest:
                return False
    return True


def _install_copies(out_dir: Path, root: Path) -> None:
    for name, targets in destinations(root).items():
        for target in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out_dir / name, target)
    manifest_copy = root / "models_staging" / "food_classifier" / "1" / MANIFEST_NAME
    shutil.copyfile(out_dir / MANIFEST_NAME, manifest_copy)


def build(out_dir: Path = ARTIFACTS_DIR, weights: str | None = None, seed: int = DEFAULT_SEED,
          force: bool = False, root: Path = REPO_ROOT, trusted: str = "") -> dict[str, Any]:
    """Build (or reuse) the artefacts and copy them where the services load them; ``trusted``: the sha256
    of a ``weights`` file that may be unpickled."""
    import torch

    source = weights or f"stand-in(seed={seed})"
    out_dir.mkdir(parents=True, exist_ok=True)
    if not force and _up_to_date(out_dir, source, seed, root):
        print(f"model artefacts up to date in {out_dir} ({source})")
        return json.loads((out_dir / MANIFEST_NAME).read_text())
    with tempfile.TemporaryDirectory() as tmp:
        if weights:
            model = load_model(fetch_weights(weights, Path(tmp)), trusted=trusted)
        else:
            print(f"building the stand-in Food-11 MobileNetV2 (seed {seed})")
            model = make_stand_in(seed)
        pt_path, onnx_path = out_dir / PT_WEIGHTS_NAME, out_dir / ONNX_NAME
        torch.save(model.state_dict(), pt_path)
        export_onnx(model, onnx_path)
        diff = check_agreement(model, onnx_path, seed)
    manifest = _manifest(source, seed, diff, pt_path, onnx_path)
    (out_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
    _install_copies(out_dir, root)
    print(f"built {pt_path} and {onnx_path} (ONNX vs PyTorch max |diff| {diff:.1e})")
    return manifest


def require_file(path: Path) -> Path:
    """``path`` when it is a file; else ``FileNotFoundError`` naming it and the build command."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"model file not found: {path} (build it with: {BUILD_COMMAND})")
    return Path(path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m servelab.core.model", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the model artefacts (idempotent)")
    b.add_argument("--weights", help="trained MobileNetV2 state_dict: a file path or an http(s) URL")
    b.add_argument("--seed", type=int, default=DEFAULT_SEED)
    b.add_argument("--out", type=Path, default=ARTIFACTS_DIR)
    b.add_argument("--force", action="store_true", help="rebuild even when up to date")
    b.add_argument("--trust-sha256", default=os.environ.get(TRUST_VARIABLE, ""),
                   help="the sha256 of a --weights file that needs unpickling (a whole pickled model): only "
                        f"that file is unpickled (default ${TRUST_VARIABLE})")
    args = parser.parse_args(argv)
    try:
        build(args.out, args.weights, args.seed, args.force, trusted=args.trust_sha256)
    except BuildError as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
