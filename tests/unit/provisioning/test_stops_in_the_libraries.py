"""A stop acts at once inside the libraries the lab calls (issue 42, findings 1 and 2).

python-chi 1.2.10's own ``Server.wait``/``refresh`` and Fabric 3.2.3's own ``Connection``/``Remote`` with
invoke 2.2.1's ``Runner`` run here; only the network under them is stood in
(``tests/unit/network_stand_ins.py``, held to the libraries' signatures below). The signal comes from
another thread while the main thread is inside the library's blocking call, as a ``kill`` does.
"""

from __future__ import annotations

import inspect
import signal
import time

import pytest

import provisioning
from provisioning.config import from_env
from provisioning.errors import Terminated, signals_raise
from servelab.remote.shell import FabricShell
from tests.unit.conftest import FakeNeutron
from tests.unit.network_stand_ins import (
    StandInChannel,
    StandInCompute,
    StandInConnection,
    StandInLeases,
    StandInNode,
    StandInServerManager,
    StandInSFTP,
    Stopper,
    use_chi_server,
)

LEASE = "serve_system_alice"
SERVER = "node-serve-system-alice"
LONG_S = 8.0  # the remote command's length: a stop must not wait for it


def config(**changes: object) -> provisioning.ChameleonConfig:
    return from_env(env={}, **{"project": "CHI-231095", "code_source": "git",
                               "repo_url": "https://git.example.org/serve-lab.git", **changes})


def test_stand_ins_keep_the_libraries_signatures() -> None:
    """Each stand-in method takes what the library's own method takes (names, defaults, order)."""
    import novaclient.v2.servers
    import openstack.compute.v2._proxy
    import paramiko

    def same(stand_in: type, real: type, names: list[str]) -> None:
        for name in names:
            ours, theirs = inspect.signature(getattr(stand_in, name)), inspect.signature(getattr(real, name))
            assert [(p.name, p.default) for p in ours.parameters.values()] == \
                [(p.name, p.default) for p in theirs.parameters.values()], f"{stand_in.__name__}.{name}"

    same(StandInChannel, paramiko.Channel, ["exec_command", "recv", "recv_stderr", "exit_status_ready",
                                            "recv_exit_status", "close", "sendall", "send", "shutdown_write",
                                            "get_pty", "update_environment", "resize_pty"])
    same(StandInSFTP, paramiko.SFTPClient, ["getcwd", "normalize", "stat", "chmod", "put", "get", "close"])
    same(StandInServerManager, novaclient.v2.servers.ServerManager, ["get", "list"])
    same(StandInCompute, openstack.compute.v2._proxy.Proxy, ["get_server"])
    import blazarclient.v1.leases
    import neutronclient.v2_0.client

    same(StandInLeases, blazarclient.v1.leases.LeaseClientManager, ["create", "get", "delete", "list"])
    same(FakeNeutron, neutronclient.v2_0.client.Client, ["list_networks", "list_floatingips",
                                                         "create_floatingip", "update_floatingip",
                                                         "delete_floatingip", "list_ports"])
    import fabric

    assert issubclass(StandInConnection, fabric.Connection)  # its run, runner and transfer are Fabric's


def test_what_the_stop_relies_on_in_python_chi_fabric_and_invoke() -> None:
    """Read from the installed libraries' source: an upgrade that changes one of these fails here, with what
    to re-check. python-chi's ``refresh`` catches ``Exception`` only (a BaseException stop passes);
    invoke's ``_finish`` calls ``wait()`` inside the ``try`` whose ``finally`` joins the reader threads,
    with no timeout for stdout and stdin; Fabric's ``Remote.kill`` closes the channel, and its runner
    comes from the connection's ``runners.remote`` setting."""
    import chi.server
    import fabric.connection
    import fabric.runners
    import invoke.runners

    def flat(func: object) -> str:
        return " ".join(inspect.getsource(func).split())  # type: ignore[arg-type]

    assert "except Exception as e: raise ResourceError(" in flat(chi.server.Server.refresh)
    assert "except BaseException" not in flat(chi.server.Server.refresh)
    finish = flat(invoke.runners.Runner._finish)
    assert finish.index("self.wait()") < finish.index("finally:") < finish.index("thread.join(")
    assert "except KeyboardInterrupt as e: self.send_interrupt(e)" in finish
    assert "self.channel.close()" in flat(fabric.runners.Remote.kill)
    assert "self.config.runners.remote(" in flat(fabric.connection.Connection._remote_runner)
    assert "with self.ssh_connection(**kwargs) as conn: return conn.run(command)" in \
        flat(chi.server.Server.execute)
    assert issubclass(Terminated, BaseException) and not issubclass(Terminated, Exception)


# ------------------------------------------------------------------------------- finding 1: the boot wait
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_inside_python_chis_refresh_stops_the_boot_wait(fake_chi, student, monkeypatch,
                                                                 sig: signal.Signals) -> None:
    """python-chi's ``refresh`` wraps every exception as ``ResourceError("Could not refresh server: ...")``,
    which the wait tries again: a SIGTERM that landed in a Nova read was swallowed, the wait went on to
    ACTIVE and the run to launch the node. The Nova read blocks here (a slow API) until the signal."""
    node = StandInNode()
    reads: list[float] = []

    def slow_nova(name: str) -> None:  # a Nova call that takes its time; the signal lands inside it
        reads.append(time.monotonic())
        node.blocked.set()
        time.sleep(1.0)

    use_chi_server(fake_chi, monkeypatch, node, hook=slow_nova, boot_s=30.0)
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    with Stopper(sig, node.blocked, delay=0.2) as stopper, signals_raise(), pytest.raises(Terminated) as stop:
        provisioning.launch(config(), chi=fake_chi.api, setup_node=False)
    assert stopper.sent_at is not None and time.monotonic() - stopper.sent_at < 3.0
    assert str(stop.value) == f"stopped by {sig.name}"
    names = fake_chi.rec.names()
    assert "neutron.update_floatingip" not in names and "Server.check_connectivity" not in names


# ------------------------------------------------------------------------ finding 2: a long remote command
def long_node() -> StandInNode:
    return StandInNode(slow={"long-command": LONG_S, "node_setup.sh": LONG_S, "./lab jupyter": LONG_S})


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_stop_during_a_remote_command_reaches_the_caller_at_once(sig: signal.Signals) -> None:
    """invoke's ``Runner._finish`` joins its reader threads with no timeout, and they return only at the
    remote command's end: a stop 0.3 s into a long command reached the caller when the command ended.
    ``FabricShell`` (the instructor's run and the fetch) closes the channel on a stop."""
    node = long_node()
    shell = FabricShell(StandInConnection("129.114.108.7", node=node, user="cc"))
    expected = Terminated if sig == signal.SIGTERM else KeyboardInterrupt
    with Stopper(sig, node.blocked) as stopper, signals_raise(), pytest.raises(expected):
        shell.capture("long-command", timeout=600)
    took = time.monotonic() - (stopper.sent_at or 0.0)
    assert took < 2.0, f"the stop reached the caller {took:.1f} s after it came"
    assert node.channels[0].closed and node.channels[0].closed_at is not None


@pytest.mark.parametrize("command", ["node_setup.sh", "./lab jupyter"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_stop_during_the_node_set_up_reaches_the_caller_at_once(fake_chi, student, monkeypatch,
                                                                  sig: signal.Signals, command: str) -> None:
    """Notebook 02's interrupt button, or SIGTERM in the instructor's run, during ``node_setup.sh`` or
    ``./lab jupyter`` (10-40 min of image builds): python-chi's own ``Server.execute`` over Fabric."""
    node = StandInNode(slow={command: LONG_S})
    use_chi_server(fake_chi, monkeypatch, node)
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    expected = Terminated if sig == signal.SIGTERM else KeyboardInterrupt
    with Stopper(sig, node.blocked) as stopper, signals_raise(), pytest.raises(expected):
        provisioning.launch(config(), chi=fake_chi.api)
    took = time.monotonic() - (stopper.sent_at or 0.0)
    assert took < 2.0, f"the stop reached the caller {took:.1f} s after it came"
    cut = next(c for c in node.channels if command in c.command)
    assert cut.closed_at is not None and cut.closed_at - (stopper.sent_at or 0.0) < 2.0  # closed by the stop
