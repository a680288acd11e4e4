"""Fabric's ``Remote`` runner with a stop that acts at once (imported where Fabric runs: it imports Fabric).

invoke 2.2.1's ``Runner._finish`` joins its output reader threads, with no timeout, whatever ended the
wait, and a reader returns only at the remote command's end of output: a SIGTERM (``Terminated``) or a
Ctrl-C during a long remote command (``./lab jupyter``'s image builds) used to reach the caller only
when the command ended. Fabric's own ``Remote.send_interrupt`` forwards Ctrl-C to a pty and otherwise
re-raises it into that same join. ``StoppableRemote`` closes the SSH channel the moment anything stops
the wait: the readers see the end of output, the joins return, the stop goes on to the caller. The
command itself may go on on the node until it next writes; a teardown deletes the node anyway, and the
lab's node commands are safe to run again. Why: docs/decisions/2026-11-28-class-day-third-pass.md
"""

from __future__ import annotations

from typing import Any

from fabric import Config, Connection
from fabric.runners import Remote


class StoppableRemote(Remote):
    """A ``Remote`` whose wait, cut by any exception (a stop, a timer), closes the channel first."""

    def wait(self) -> None:
        try:
            super().wait()
        except BaseException:
            self.kill()  # Remote.kill: channel.close(); every recv() then returns b"" at once
            raise

    def send_interrupt(self, interrupt: KeyboardInterrupt) -> None:
        """Ctrl-C stops this controller's command; it is never typed into the node's (no pty here)."""
        raise interrupt


def stoppable_config(**overrides: Any) -> Config:
    """A Fabric ``Config`` whose ``Connection.run`` uses ``StoppableRemote`` (for python-chi's
    ``Server.execute``, which hands its keyword arguments to the ``Connection``)."""
    return Config(overrides={"runners": {"remote": StoppableRemote}, **overrides})


def make_stoppable(connection: Connection) -> Connection:
    """``connection`` (python-chi's ``Server.ssh_connection``), its ``run`` using ``StoppableRemote``."""
    connection.config.runners.remote = StoppableRemote
    return connection
