"""Commands and files on the Chameleon node over SSH, as its login user: the ``NodeShell`` the
instructor's run and the results fetch use, and its Fabric implementation (python-chi's
``Server.ssh_connection`` is a Fabric ``Connection``), whose commands a stop ends at once
(``servelab.remote.runner``). The tests pass recording stand-ins, or Fabric with a stand-in channel."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class NodeShell(Protocol):
    """Commands and files on the node, as its login user, from the user's home directory."""

    def run(self, command: str, timeout: float) -> int:
        """Run ``command`` with its output streamed here; its exit code."""

    def capture(self, command: str, timeout: float) -> tuple[int, str]:
        """Run ``command`` quietly; its exit code and stdout. Raises when the node cannot be reached."""

    def get(self, remote_path: str, local_path: Path) -> None:
        """Copy a file from the node."""


class FabricShell:
    """``NodeShell`` over a Fabric ``Connection`` (python-chi's ``Server.ssh_connection``)."""

    def __init__(self, connection: Any) -> None:
        from servelab.remote.runner import make_stoppable  # Fabric: imported where a real node is reached

        self.connection = make_stoppable(connection)

    def run(self, command: str, timeout: float) -> int:
        result = self.connection.run(command, warn=True, hide=False, pty=False, in_stream=False,
                                     timeout=timeout)
        return int(result.exited)

    def capture(self, command: str, timeout: float) -> tuple[int, str]:
        result = self.connection.run(command, warn=True, hide=True, pty=False, in_stream=False,
                                     timeout=timeout)
        return int(result.exited), str(result.stdout)

    def get(self, remote_path: str, local_path: Path) -> None:
        self.connection.get(remote_path, local=str(local_path))

    def close(self) -> None:
        """End the connection (and with it a copy still running after a time limit)."""
        self.connection.close()
