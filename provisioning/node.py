"""Node set-up over SSH: the one idempotent script, and the lab's code on the node.

The script (``node_setup.sh`` beside this file) is uploaded and run with its
settings in the environment; the code reaches the node either as a git clone
(``code_source="git"``) or as an upload of this checkout, built model
artefacts included (``code_source="upload"``, for changes not pushed anywhere).
"""

from __future__ import annotations

import shlex
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from provisioning.config import ChameleonConfig, ProvisioningError
from servelab.paths import REPO_ROOT

NODE_SETUP_SCRIPT = Path(__file__).with_name("node_setup.sh")
REMOTE_SCRIPT = "node_setup.sh"
REMOTE_TARBALL = "serve-system-lab.tar.gz"
# built, gitignored files the images and the model repository need
ARTIFACT_GLOBS = ("artifacts/food11.*", "fastapi_pt/food11.pth", "fastapi_onnx/food11.onnx",
                  "models_staging/*/1/food11.pth", "models_staging/*/1/model.onnx",
                  "models_staging/*/1/*.json")
# builds the model artefacts on the node inside the Triton image (torch + onnx are there)
ARTIFACT_BUILD = ("{ test -f artifacts/food11.onnx || docker compose -f docker/docker-compose-triton.yaml "
                  "run --rm --no-deps -v \"$PWD:/workspace\" -w /workspace -e SERVELAB_ROOT=/workspace "
                  "--entrypoint python3 triton_server -m servelab.model build; }")


def node_setup_env(config: ChameleonConfig) -> dict[str, str]:
    """The script's settings for this configuration."""
    env = {"CODE_DIR": config.remote_dir, "REPO_REF": config.repo_ref}
    if config.code_source == "upload":
        env["CODE_TARBALL"] = REMOTE_TARBALL
    else:
        if not config.repo_url:
            raise ProvisioningError(
                "code_source='git' needs the lab's repository URL: pass repo_url=... or set "
                "SERVELAB_REPO_URL (or use code_source='upload' to send this checkout)")
        env["REPO_URL"] = config.repo_url
    return env


def node_setup_command(config: ChameleonConfig) -> str:
    """The shell command run on the node (in the login user's home)."""
    assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in node_setup_env(config).items())
    return f"env {assignments} bash {REMOTE_SCRIPT}"


def artifact_build_command(config: ChameleonConfig) -> str:
    """Build the model artefacts on the node when the code came without them (git clone)."""
    return f"cd {shlex.quote(config.remote_dir)} && {ARTIFACT_BUILD}"


def node_commands(config: ChameleonConfig) -> list[str]:
    """Every command the node set-up runs over SSH, in order (also what plan mode prints)."""
    commands = [node_setup_command(config)]
    if config.code_source == "git":
        commands.append(artifact_build_command(config))
    return commands


def checkout_files(root: Path = REPO_ROOT) -> list[Path]:
    """The checkout's tracked files plus its built artefacts, relative to ``root``."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True)
    files = {Path(name) for name in listed.stdout.decode().split("\0") if name}
    for pattern in ARTIFACT_GLOBS:
        files.update(path.relative_to(root) for path in root.glob(pattern))
    return sorted(path for path in files if (root / path).is_file())


def checkout_tarball(dest: Path, root: Path = REPO_ROOT) -> Path:
    """Pack the checkout (see ``checkout_files``) as ``dest`` (.tar.gz) for upload."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, "w:gz") as tar:
        for rel in checkout_files(root):
            tar.add(root / rel, arcname=str(rel))
    return dest


def run_node_setup(server: Any, config: ChameleonConfig, workdir: Path,
                   root: Path = REPO_ROOT) -> None:
    """Upload the script (and the checkout in upload mode) and run every node command over SSH."""
    server.upload(str(NODE_SETUP_SCRIPT), REMOTE_SCRIPT)
    if config.code_source == "upload":
        tarball = checkout_tarball(workdir / REMOTE_TARBALL, root)
        print(f"Uploading the checkout ({tarball.stat().st_size / 1e6:.1f} MB)")
        server.upload(str(tarball), REMOTE_TARBALL)
    for command in node_commands(config):
        print(f"$ {command}")
        server.execute(command)
