"""A notebook's services: the target's stack (``servelab.targets``) opened with the lab's options, stopped,
and the addresses the notebooks talk to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servelab.lab.params import LabParams
from servelab.results.store import run_folder
from servelab.targets import get_stack
from servelab.targets.base import Stack


def open_stack(p: LabParams, **options: Any) -> Stack:
    """The target's stack: local processes, or compose on this host (the node's Jupyter on Chameleon);
    ``options`` go to it as to ``get_stack`` (``triton_flags=[...]``: server flags after the lab's).

    ``target="chameleon"`` raises a TargetError that says where notebooks ``ON_THE_NODE`` run instead.
    """
    return get_stack(p.target, **_local_options(p.target), **options)

def stop_stacks(p: LabParams) -> None:
    """Stop every stack this lab started (08). On chameleon they run on the node, and deleting the
    server stops them: nothing to do from here."""
    if p.target == "chameleon":
        print("The stacks run on the node: deleting its server (next cell) stops them.")
        return
    open_stack(p).down()

def _local_options(target: str) -> dict[str, Any]:
    """The local stack starts Triton with no model loaded: each notebook's ``triton_up`` deploys and
    loads its own (04 never loads 06's ONNX model).

    A headless run (``SERVELAB_RESULTS`` set) also keeps the local host's files inside its results
    folder. The live model repository and the servers' logs then belong to that run:
    two runs on one machine (CI jobs, a test next to a student) never rewrite
    each other's ``models/``, and the logs sit beside the measurements.
    """
    if target != "local":
        return {}
    run = run_folder()
    return {"models": ()} if run is None else {"models": (), "root": run / "host", "log_dir": run / "logs"}

def hostport(url: str) -> str:
    """tritonclient and perf_analyzer take ``host:port`` without a scheme."""
    return url.split("://", 1)[-1].rstrip("/")

@dataclass
class Endpoint:
    """A running HTTP service the notebook talks to: its kind and base URL."""

    kind: str
    url: str

    def _repr_html_(self) -> str:
        return f"<b>{self.kind}</b> at <code>{self.url}</code>"
