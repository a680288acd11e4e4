"""The kernel the headless runner executes notebooks in: its kernelspec, and how papermill starts it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

KERNEL_NAME = "servelab"


def ensure_kernel(name: str = KERNEL_NAME) -> str:
    """Install (or repair) a kernelspec in this interpreter's prefix that runs this interpreter."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(name)
        if spec.argv and Path(spec.argv[0]) == Path(sys.executable):
            return name
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import install

    install(kernel_name=name, display_name="serve-lab (.venv)", prefix=sys.prefix)
    spec_file = Path(sys.prefix) / "share" / "jupyter" / "kernels" / name / "kernel.json"
    spec_json = json.loads(spec_file.read_text())
    spec_json["argv"][0] = sys.executable  # the venv's python, not the interpreter it was made from
    spec_file.write_text(json.dumps(spec_json, indent=1))
    return name


def kernel_config() -> Any:
    """papermill's kernel manager settings: CurveZMQ keys per kernel (ipykernel's kernelspec takes them), so a
    kernel does not warn on the terminal that it runs over TCP in plain text; plain TCP where pyzmq lacks
    CurveZMQ. Why not IPC sockets: docs/decisions/2026-11-25-quiet-run-output.md"""
    import zmq
    from traitlets.config import Config

    return Config({"KernelManager": {"transport_encryption": "auto" if zmq.has("curve") else "disabled"}})
