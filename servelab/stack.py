"""The one interface behind which the three targets differ.

A notebook asks for ``get_stack(target)`` and then only calls these methods;
what "bring up the Triton stack" or "run perf_analyzer" means — local
processes, ``docker compose`` on this host, or ``docker compose`` on the
Chameleon node over SSH — lives in the implementations, never in ``if target``
branches in a notebook.

Service names are the Compose service names: ``fastapi_server``,
``triton_server``, ``flask``, ``jupyter``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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
        """``host:port`` of ``service`` as seen from inside the stack — where commands run with
        ``run(..., service=...)`` reach it (perf_analyzer's ``-u``, ``--metrics-url``). On the compose
        targets that is the compose network (``triton_server:8000``); locally the same as ``url``."""
        return self.url(service, port).split("://", 1)[-1]

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
    from servelab import stacks  # implementations live apart from the interface

    return stacks.make(target, **options)
