"""The one interface behind which the three targets differ.

A notebook asks for ``get_stack(target)`` and then only calls these methods;
what "bring up the Triton stack" or "run perf_analyzer" means — local
processes, ``docker compose`` on this host, or ``docker compose`` on the
Chameleon node over SSH — lives in the implementations, never in ``if target``
branches in a notebook.

Service names are the Compose service names: ``fastapi_server``,
``triton_server``, ``flask``. Clients (the benchmarks, perf_analyzer, the
utilisation sampler) run where the kernel runs, which on every target is the
machine that runs the servers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TARGETS = ("local", "docker", "chameleon")


@dataclass
class CommandResult:
    """What a command run on a target's host (or in one of its services) gave back."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def check(self) -> CommandResult:
        if self.returncode != 0:
            raise RuntimeError(
                f"command failed ({self.returncode}): {' '.join(self.argv)}\n{self.stderr[-2000:]}"
            )
        return self


class Stack(ABC):
    """Start/stop a set of services and act on the host they run on."""

    target: str = ""
    has_gpu: bool = False
    root: Path  # the project root on the services' host

    @abstractmethod
    def up(self, stack: str, services: Sequence[str] | None = None, timeout: float = 600.0) -> None:
        """Bring up ``stack`` ("fastapi" or "triton"), optionally only some services, and wait ready."""

    @abstractmethod
    def down(self, stack: str | None = None, timeout: float = 120.0) -> None:
        """Stop ``stack`` (all stacks when None)."""

    @abstractmethod
    def url(self, service: str, port: str = "http") -> str:
        """Base URL of ``service`` as seen by the clients the lab runs (bench, perf_analyzer)."""

    def service_address(self, service: str, port: str = "http") -> str:
        """``host:port`` of ``service`` as the stack's other services reach it (GourmetGram → its
        server): the compose network on the compose targets (``triton_server:8000``); else ``url``'s."""
        return self.url(service, port).split("://", 1)[-1]

    def perf_options(self, input_data: Path | None = None) -> dict[str, Any]:
        """Keyword arguments for ``servelab.triton.experiments.measure``: perf_analyzer runs here,
        next to the kernel, against ``url("triton_server")``; ``input_data`` is its JSON input."""
        return {"input_data": input_data} if input_data is not None else {}

    @abstractmethod
    def run(self, argv: Sequence[str], service: str | None = None,
            timeout: float | None = None) -> CommandResult:
        """Run a command on the host, or inside ``service`` (perf_analyzer runs in ``jupyter``)."""

    @abstractmethod
    def write_file(self, relpath: str, content: bytes | str) -> None:
        """Write a file under the project root on the host (e.g. a model's config.pbtxt)."""

    @abstractmethod
    def read_file(self, relpath: str) -> bytes:
        """Read a file under the project root on the host."""

    @abstractmethod
    def reload_model(self, name: str, config_json: str | None = None) -> None:
        """Ask the live Triton server to (re)load ``name``, optionally with a config override."""

    @abstractmethod
    def fetch(self, remote_relpath: str, local_path: Path) -> Path:
        """Copy a result file from the host to this machine."""


def get_stack(target: str, **options: object) -> Stack:
    """The implementation for ``target``; ``options`` go to its constructor."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}: choose one of {', '.join(TARGETS)}")
    from servelab.targets import stacks  # implementations live apart from the interface

    return stacks.make(target, **options)
