"""The network under python-chi and Fabric, stood in, so that their own code runs in the tests.

The recording stand-in of ``tests/unit/conftest.py`` replaces python-chi's API surface. Where the lab's
behaviour depends on what the libraries do *inside* a call (issue 42: python-chi 1.2.10's
``Server.refresh`` wraps every exception, invoke 2.2.1's ``Runner._finish`` joins its reader threads with
no timeout), the library's own code has to run. Here only the network is stood in, held to the real
signatures (``test_stand_ins_keep_the_libraries_signatures``):

* ``StandInNova`` for ``novaclient``'s client (``servers.get``/``servers.list``) and ``StandInOpenStack``
  for openstacksdk's connection (``compute.get_server``), under python-chi's ``Server.wait``/``refresh``/
  ``status`` (``ChiServer``: the conftest's ``FakeServer`` with those methods taken from python-chi);
* ``StandInLeases`` for blazarclient's ``LeaseClientManager`` (``blazar().lease``: create/get/delete/list),
  under python-chi's own ``Lease``, ``Lease.submit``/``status``/``delete`` and ``list_leases``
  (``use_chi_leases``); a failure is blazarclient's own ``BlazarClientException(..., code=<status>)``, as its
  ``SessionClient.request`` raises it for an HTTP error;
* ``StandInChannel`` for paramiko's ``Channel`` and ``StandInSFTP`` for its ``SFTPClient``, under Fabric's
  real ``Connection``, ``Remote`` runner and ``Transfer`` and python-chi's real ``Server.execute``/
  ``upload``/``ssh_connection`` (``StandInConnection``: a Fabric ``Connection`` whose ``open`` makes no TCP
  or SSH handshake).

``StandInNode`` is the node: what each command prints and how long it runs (``NodeCommand``), its files.
"""

from __future__ import annotations

import io
import stat
import tarfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import chi.lease as chi_lease
import chi.server as chi_server
from blazarclient.exception import BlazarClientException
from fabric import Connection

from tests.unit.conftest import JUPYTER_OUTPUT, FakeServer

HOME = "/home/cc"


@dataclass
class NodeCommand:
    """What a command does on the stand-in node: runs ``seconds``, then prints ``stdout`` and exits."""

    stdout: str = ""
    seconds: float = 0.0
    exit_code: int = 0


def run_folder_tarball(run_name: str) -> bytes:
    """What the node's run folder packs to: one measurement and the node's run.json."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for rel, text in (("run.json", '{"notebooks": []}'), ("partial.csv", "measured before the stop\n")):
            data = text.encode()
            info = tarfile.TarInfo(f"{run_name}/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@dataclass
class StandInNode:
    """The node behind the stand-in network. ``slow`` maps a command substring to how long that command
    runs (the first matching, once each unless ``slow_every``); ``blocked`` is set when a slow command or
    a slow copy starts (the moment a test stops the run); every channel and connection is kept."""

    slow: dict[str, float] = field(default_factory=dict)
    slow_every: bool = False
    slow_get_s: float = 0.0  # the first SFTP get hangs this long (a cut copy)
    files: dict[str, bytes] = field(default_factory=dict)
    channels: list[StandInChannel] = field(default_factory=list)
    connections: list[StandInConnection] = field(default_factory=list)
    blocked: threading.Event = field(default_factory=threading.Event)
    gets: list[tuple[int, str]] = field(default_factory=list)  # (connection number, remote path)

    def plan(self, command: str) -> NodeCommand:
        seconds = 0.0
        for key, slow in list(self.slow.items()):
            if key in command:
                seconds = slow
                if not self.slow_every:
                    del self.slow[key]
                self.blocked.set()
                break
        if "./lab jupyter" in command:
            return NodeCommand(JUPYTER_OUTPUT, seconds)
        if "setsid nohup" in command:  # RemoteRun.start_command
            return NodeCommand("started\n", seconds)
        if "base64" in command:  # RemoteRun.poll_command: the run ended well, nothing logged
            return NodeCommand("0\n\n", seconds)
        if "tar -czf" in command:  # the pack of the run folder
            run_name = command.split("test -d ", 1)[1].split()[0]
            tarball = command.split("tar -czf ", 1)[1].split()[0]
            self.files[f"{HOME}/serve-system-lab/results/{tarball}"] = run_folder_tarball(run_name)
        return NodeCommand("", seconds)


class StandInChannel:
    """paramiko ``Channel`` as Fabric's ``Remote`` runner drives it: ``recv`` blocks as a socket read does,
    until the command's output, its end, or ``close()`` (which makes every read return ``b""`` at once,
    as paramiko's closed ``BufferedPipe`` does)."""

    def __init__(self, node: StandInNode) -> None:
        self._node = node
        self._cond = threading.Condition()
        self._plan = NodeCommand()
        self._started = 0.0
        self._sent = False
        self.command = ""
        self.closed = False
        self.closed_at: float | None = None
        node.channels.append(self)

    def _ended(self) -> bool:
        return time.monotonic() - self._started >= self._plan.seconds

    def exec_command(self, command: str) -> None:
        self.command = command
        self._plan = self._node.plan(command)
        self._started = time.monotonic()

    def recv(self, nbytes: int) -> bytes:
        with self._cond:
            while not self.closed:
                if self._ended():
                    if self._sent:
                        return b""
                    self._sent = True
                    return self._plan.stdout.encode()[:nbytes] if self._plan.stdout else b""
                self._cond.wait(0.02)
            return b""

    def recv_stderr(self, nbytes: int) -> bytes:
        with self._cond:
            while not self.closed and not self._ended():
                self._cond.wait(0.02)
            return b""

    def exit_status_ready(self) -> bool:
        return self.closed or self._ended()

    def recv_exit_status(self) -> int:
        with self._cond:
            while not self.exit_status_ready():
                self._cond.wait(0.02)
            return -1 if self.closed and not self._ended() else self._plan.exit_code

    def close(self) -> None:
        with self._cond:
            if not self.closed:
                self.closed, self.closed_at = True, time.monotonic()
            self._cond.notify_all()

    def sendall(self, s: bytes) -> None:
        pass

    def send(self, s: bytes) -> int:
        return len(s)

    def shutdown_write(self) -> None:
        pass

    def get_pty(self, term: str = "vt100", width: int = 80, height: int = 24, width_pixels: int = 0,
                height_pixels: int = 0) -> None:
        pass

    def update_environment(self, environment: dict[str, str]) -> None:
        pass

    def resize_pty(self, width: int = 80, height: int = 24, width_pixels: int = 0,
                   height_pixels: int = 0) -> None:
        pass


class StandInSFTP:
    """paramiko ``SFTPClient`` on the node's files (absolute paths under ``HOME``)."""

    def __init__(self, node: StandInNode, number: int) -> None:
        self._node, self._number = node, number

    def getcwd(self) -> str | None:
        return None

    def normalize(self, path: str) -> str:
        return HOME if path == "." else path

    def stat(self, path: str) -> SimpleNamespace:
        if path in self._node.files:
            return SimpleNamespace(st_mode=stat.S_IFREG | 0o644, st_size=len(self._node.files[path]))
        if any(name.startswith(path.rstrip("/") + "/") for name in self._node.files) or path == HOME:
            return SimpleNamespace(st_mode=stat.S_IFDIR | 0o755, st_size=0)
        raise FileNotFoundError(2, "No such file", path)

    def chmod(self, path: str, mode: int) -> None:
        pass

    def put(self, localpath: str, remotepath: str, callback: Any = None, confirm: bool = True) -> None:
        self._node.files[remotepath] = Path(localpath).read_bytes()

    def get(self, remotepath: str, localpath: str, callback: Any = None, prefetch: bool = True,
            max_concurrent_prefetch_requests: int | None = None) -> None:
        self._node.gets.append((self._number, remotepath))
        if self._node.slow_get_s:
            hang, self._node.slow_get_s = self._node.slow_get_s, 0.0
            self._node.blocked.set()
            time.sleep(hang)  # a copy that hangs on a dead connection
        Path(localpath).write_bytes(self._node.files[remotepath])

    def close(self) -> None:
        pass


class StandInConnection(Connection):  # type: ignore[misc]  # Fabric ships no type information
    """Fabric's ``Connection`` with the network stood in: ``open`` makes no TCP or SSH handshake,
    ``create_session`` opens a ``StandInChannel`` on ``node``, ``sftp`` a ``StandInSFTP``. Its ``run`` is
    Fabric's own (the configured ``Remote`` runner, invoke's ``Runner``)."""

    def __init__(self, host: str, *args: Any, node: StandInNode, **kwargs: Any) -> None:
        super().__init__(host, *args, **kwargs)
        # plain attributes: a Connection's own setattr files values into its config, as (deep) copies
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "closed", False)
        node.connections.append(self)

    def open(self) -> None:
        return None

    def create_session(self) -> StandInChannel:
        return StandInChannel(self.node)

    def sftp(self) -> StandInSFTP:
        if self._sftp is None:
            number = next(i for i, c in enumerate(self.node.connections) if c is self)  # == is by host
            self._sftp = StandInSFTP(self.node, number)
        return self._sftp

    def close(self) -> None:
        object.__setattr__(self, "closed", True)
        super().close()


# ------------------------------------------------------------------------------ Nova under python-chi
class StandInServerManager:
    """novaclient's ``ServerManager`` over the stand-in module's servers; ``hook(name)`` runs in each
    read (a test blocks there, as a slow Nova call blocks)."""

    def __init__(self, module: Any, hook: Callable[[str], None]) -> None:
        self._module, self._hook = module, hook

    def _nova(self, server: FakeServer) -> SimpleNamespace:
        status = self._module.nova_status(server)
        return SimpleNamespace(id=server.id, name=server.name, status=status, addresses={},
                               created="2026-11-23T15:00:00Z", hostId="host-1")

    def get(self, server: Any) -> SimpleNamespace:
        match = [s for s in self._module.servers.values() if s.id == server]
        self._hook(match[0].name if match else str(server))
        if not match:
            from novaclient.exceptions import NotFound

            raise NotFound(404, f"No server with a name or ID of '{server}' exists.")
        return self._nova(match[0])

    def list(self, detailed: bool = True, search_opts: Any = None, marker: Any = None, limit: Any = None,
             sort_keys: Any = None, sort_dirs: Any = None) -> list[SimpleNamespace]:
        return [self._nova(s) for s in self._module.servers.values()]


class StandInNova:
    """novaclient's ``Client``: what python-chi's ``refresh`` and ``get_server_id`` read (``servers``)."""

    def __init__(self, module: Any, hook: Callable[[str], None]) -> None:
        self.servers = StandInServerManager(module, hook)


class StandInCompute:
    """openstacksdk's compute proxy: ``get_server`` (what ``refresh`` reads besides Nova)."""

    def get_server(self, server: Any) -> SimpleNamespace:
        return SimpleNamespace(host_status="UP", hypervisor_hostname="P100-node", is_locked=False)


class StandInOpenStack:
    """openstacksdk's ``Connection`` as python-chi's ``Server`` holds it (``self.conn``)."""

    compute = StandInCompute()


def _set_status(server: Any, value: str | None) -> None:
    server._status = value


class ChiServer(FakeServer):
    """The conftest's ``FakeServer`` with python-chi 1.2.10's own ``wait``, ``refresh``, ``status`` (a
    Nova read each time), ``execute``, ``upload`` and ``ssh_connection``; below them, ``StandInNova`` and
    ``StandInConnection`` (``use_chi_server`` puts them in place)."""

    wait = chi_server.Server.wait
    refresh = chi_server.Server.refresh
    status = property(chi_server.Server.status.fget, _set_status)  # type: ignore[assignment]
    execute = chi_server.Server.execute
    upload = chi_server.Server.upload
    ssh_connection = chi_server.Server.ssh_connection

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = StandInOpenStack()


def use_chi_server(fake_chi: Any, monkeypatch: Any, node: StandInNode,
                   hook: Callable[[str], None] = lambda name: None, boot_s: float = 0.0) -> None:
    """Make ``fake_chi``'s servers ``ChiServer``s: python-chi's own code over ``StandInNova`` (which says
    BUILD until ``boot_s`` seconds after its first read, then the server's ``status_after_wait``) and SSH
    over ``node``. ``hook(server name)`` runs in every Nova read."""
    module = fake_chi.server
    first: list[float] = []

    def nova_status(server: FakeServer) -> str:
        first.append(time.monotonic())
        return "BUILD" if time.monotonic() - first[0] < boot_s else server.status_after_wait

    module.nova_status = nova_status
    nova = StandInNova(module, hook)
    monkeypatch.setattr(chi_server, "nova", lambda session=None: nova)
    monkeypatch.setattr(chi_server, "Connection",
                        lambda host, **kwargs: StandInConnection(host, node=node, **kwargs))
    # Fabric's run() mirrors this process's stdin into the command; pytest's refuses reads
    monkeypatch.setattr("sys.stdin", io.StringIO())
    # python-chi's local settings (what the hub sets as OS_KEYPAIR_PRIVATE_KEY): no network
    monkeypatch.setattr(chi_server, "get_from_context",
                        lambda key: "/home/jovyan/.ssh/id_rsa" if key == "keypair_private_key" else None)
    original = type(module).Server

    def make(self: Any, name: str, *args: Any, **kwargs: Any) -> ChiServer:
        original(self, name, *args, **kwargs)  # recorded as before
        return ChiServer(self._rec, self, name)

    monkeypatch.setattr(type(module), "Server", make)


# --------------------------------------------------------------------------- Blazar under python-chi's Lease
BLAZAR_DATE = "%Y-%m-%dT%H:%M:%S.%f"  # how Blazar's API gives a lease's dates (python-chi parses them so)


class StandInLeases:
    """blazarclient's ``LeaseClientManager`` over the leases Blazar holds (``leases``: id → its JSON). A lease
    is PENDING until ``activation_lag`` after its start on ``clock`` (the tests' fake clock), then ACTIVE;
    ``failures[method]`` holds exceptions the next calls raise, one each; ``after_create(lease)`` runs once
    Blazar has made a lease and before its answer leaves (the worst instant for a stop)."""

    def __init__(self, clock: Any, rec: Any) -> None:
        self.clock, self.rec = clock, rec
        self.leases: dict[str, dict[str, Any]] = {}
        self.failures: dict[str, list[BaseException]] = {}
        self.after_create: Callable[[dict[str, Any]], None] = lambda lease: None
        self.activation_lag = timedelta(seconds=60)
        self._ids = 0

    def _call(self, name: str, *args: Any) -> None:
        self.rec(f"blazar.lease.{name}", *args)
        if self.failures.get(name):
            raise self.failures[name].pop(0)

    def _now(self) -> datetime:
        return self.clock.now().astimezone(timezone.utc).replace(tzinfo=None)

    def _current(self, lease: dict[str, Any]) -> dict[str, Any]:
        start = datetime.strptime(lease["start_date"], BLAZAR_DATE)
        if lease["status"] == "PENDING" and self._now() >= start + self.activation_lag:
            lease["status"] = "ACTIVE"
        return dict(lease)

    def _missing(self, lease_id: str) -> BlazarClientException:
        return BlazarClientException(f"ERROR: Object with {{'lease_id': '{lease_id}'}} not found", code=404)

    def create(self, name: Any, start: Any, end: Any, reservations: Any, events: Any,
               before_end: Any = None) -> dict[str, Any]:
        self._call("create", name)
        now = self._now()
        begins = now if start == "now" else datetime.strptime(start, "%Y-%m-%d %H:%M")
        self._ids += 1
        lease = {"id": f"lease-{self._ids}", "name": name, "status": "PENDING", "user_id": "u-alice",
                 "project_id": "p-231095", "created_at": now.strftime("%Y-%m-%d %H:%M:%S"),
                 "start_date": begins.strftime(BLAZAR_DATE),
                 "end_date": datetime.strptime(end, "%Y-%m-%d %H:%M").strftime(BLAZAR_DATE),
                 "reservations": [{**r, "id": f"res-{name}"} for r in reservations]}
        self.leases[lease["id"]] = lease
        self.after_create(lease)
        return dict(lease)

    def get(self, lease_id: Any) -> dict[str, Any]:
        self._call("get", lease_id)
        if lease_id not in self.leases:
            raise self._missing(lease_id)
        return self._current(self.leases[lease_id])

    def delete(self, lease_id: Any) -> None:
        self._call("delete", lease_id)
        if self.leases.pop(lease_id, None) is None:
            raise self._missing(lease_id)

    def list(self, sort_by: Any = None) -> list[dict[str, Any]]:
        self._call("list")
        return [self._current(lease) for lease in self.leases.values()]

    def add_existing(self, name: str, starts_in: timedelta = timedelta(hours=-1),
                     hours: float = 3.0) -> dict[str, Any]:
        """A lease made before this run (in the GUI, an instructor's slot)."""
        self._ids += 1
        begins = self._now() + starts_in
        lease = {"id": f"lease-{self._ids}", "name": name, "status": "PENDING", "user_id": "u-alice",
                 "project_id": "p-231095", "created_at": self._now().strftime("%Y-%m-%d %H:%M:%S"),
                 "start_date": begins.strftime(BLAZAR_DATE),
                 "end_date": (begins + timedelta(hours=hours)).strftime(BLAZAR_DATE),
                 "reservations": [{"id": f"res-{name}", "resource_type": "physical:host"}]}
        self.leases[lease["id"]] = lease
        return lease


def use_chi_leases(fake_chi: Any, monkeypatch: Any) -> StandInLeases:
    """python-chi's own lease module (``Lease``, its ``submit``/``status``/``delete``, ``list_leases``) in
    ``fake_chi.api`` over ``StandInLeases`` (python-chi's ``blazar()`` client), its clock the tests'."""
    leases = StandInLeases(fake_chi.clock, fake_chi.rec)
    monkeypatch.setattr(chi_lease, "blazar", lambda *args, **kwargs: SimpleNamespace(lease=leases))
    monkeypatch.setattr(chi_lease, "utcnow", lambda: fake_chi.clock.now())
    monkeypatch.setattr(fake_chi.api, "lease", chi_lease)
    return leases


def refresh_failed(cause: BaseException) -> Exception:
    """What python-chi 1.2.10's ``Server.refresh`` raises when a Nova read fails: ``ResourceError`` raised
    inside its ``except Exception``, the failure chained as its ``__context__``."""
    from chi.exception import ResourceError

    try:
        try:
            raise cause
        except Exception as exc:
            raise ResourceError(f"Could not refresh server: {exc}")  # noqa: B904  # as python-chi does
    except ResourceError as wrapped:
        return wrapped


def blazar_error(status: int, text: str = "") -> BlazarClientException:
    """What blazarclient's ``SessionClient.request`` raises for an HTTP error: its one class, the status in
    ``kwargs["code"]`` (the class's own ``code`` stays 500)."""
    return BlazarClientException(f"ERROR: {text or status}", code=status)


# ------------------------------------------------------------------------------------------------- stopping
class Stopper:
    """Sends ``sig`` to this process once ``event`` is set (and ``delay`` more seconds: the caller is then
    inside the blocking call), noting when (``sent_at``, monotonic). While it is active, SIGTERM and SIGHUP
    have a harmless handler of their own and SIGINT Python's own (a test run may inherit either ignored):
    the code under test installs its handlers over them, and a signal that arrives after it restored them
    cannot end the test run."""

    def __init__(self, sig: int, event: threading.Event, delay: float = 0.3, wait_s: float = 60.0) -> None:
        self.sig, self.event, self.delay, self.wait_s = sig, event, delay, wait_s
        self.sent_at: float | None = None
        self.stray: list[int] = []
        self._previous: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._cancelled = False
        self._thread = threading.Thread(target=self._send, name="stopper", daemon=True)

    def _send(self) -> None:
        if not self.event.wait(self.wait_s):
            return
        time.sleep(self.delay)
        with self._lock:
            if self._cancelled:
                return
            self.sent_at = time.monotonic()
            import os

            os.kill(os.getpid(), self.sig)

    def __enter__(self) -> Stopper:
        import signal

        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._previous[sig] = signal.signal(sig, lambda signum, frame: self.stray.append(signum))
        self._previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        with self._lock:
            self._cancelled = True  # never sent: never sent now either
        self.event.set()
        self._thread.join(self.wait_s)
        time.sleep(0.05)  # let a signal just sent be handled here, not after the handlers are restored
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
