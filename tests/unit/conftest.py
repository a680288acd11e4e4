"""Fixtures for the GPU-target tests: a recording stand-in of python-chi's API surface.

The stand-in has the same names and signatures that ``provisioning`` calls on
python-chi 1.2.x (``chi.context``, ``chi.lease``, ``chi.server``, ``chi.image``,
``chi.network``; ``test_provisioning`` compares them with the installed library,
and checks the behaviours below in its source) and records every call that would
reach Chameleon with its arguments (not ``context.get``, which only reads local
settings, nor a lease's ``status``, a Blazar read), so the tests assert the exact
sequence a real run would send. Its behaviour follows python-chi 1.2.10's source:
``Server.submit`` and ``Lease.submit`` return None (a fresh create), ``wait``
returns on ERROR, ``get_server_id`` returns None for an unknown name,
``get_keypair`` returns a key pair without public key for an unknown name,
``get_image`` raises a ValueError (CHIValueError) for an unknown name,
``associate_floating_ip`` returns the address it attached, ``Server.delete``
leaves the server's floating IPs allocated even with ``delete_ips=True``,
``Lease(start_date=..., duration=...)`` ends *now* + duration, a lease's dates are
naive UTC datetimes after ``submit``, ``get_or_create_floating_ip`` returns
``(ip, allocated)``, ``neutron().create_floatingip`` allocates a new IP, ``get_floating_ip``
raises a ValueError (CHIValueError) for an address not in the project, ``execute`` returns
Fabric's ``Result`` (and raises ``UnexpectedExit`` on a non-zero exit).

Knobs: ``fake_chi.rec.failures[call_name] = exc`` makes any recorded call raise;
``fake_chi.clock`` (provisioning's time; ``sleep`` advances it), ``fake_chi.lease.
status_at_start`` / ``.activation_lag``, ``fake_chi.network.floating_ips``,
``fake_chi.context.sites`` / ``.projects`` / ``.settings`` (``auth_type``: the kind of credentials) /
``.credential_project`` / ``.credential_restricted``, ``fake_chi.image.images``,
``fake_chi.server.keypairs``, ``fake_chi.server.outputs`` (command substring →
stdout), ``fake_chi.server.exit_codes`` (command substring → exit code) and
``fake_chi.server.upload_failures`` (exceptions the next uploads raise, one each), ``fake_chi.server.
wait_failures`` (the same for ``Server.wait``: a flaky API while the node boots).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from invoke.exceptions import UnexpectedExit
from invoke.runners import Result

from provisioning.chi_api import ChiApi

FLOATING_IP = "129.114.108.7"  # the first address the stand-in allocates
START = datetime(2026, 11, 23, 15, 0, tzinfo=timezone.utc)  # the fake clock's start: 09:00 at CHI@TACC
BLAZAR_FORMAT = "%Y-%m-%d %H:%M"  # python-chi 1.2.10 lease.BLAZAR_TIME_FORMAT
JUPYTER_TOKEN = "0123abcd"
JUPYTER_OUTPUT = f"[jupyter] building the model artefacts\njupyter: http://localhost:8888/lab?token={JUPYTER_TOKEN}\n"


@dataclass
class Recorder:
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    failures: dict[str, BaseException] = field(default_factory=dict)
    at: list[float] = field(default_factory=list)  # when each call came (time.monotonic, the real clock)

    def __call__(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.calls.append((name, args, kwargs))
        self.at.append(time.monotonic())
        if name in self.failures:
            raise self.failures[name]

    def names(self) -> list[str]:
        return [name for name, _, _ in self.calls]


class FakeClock:
    """Provisioning's time (``provisioning.times.utcnow``/``sleep`` are replaced); sleeping advances it."""

    def __init__(self, start: datetime = START) -> None:
        self.at = start
        self.slept: list[float] = []

    def now(self) -> datetime:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.at += timedelta(seconds=seconds)


def _naive_utc(at: datetime) -> datetime:
    """As python-chi 1.2.10 holds a lease's dates after ``_populate_from_json``: naive, in UTC."""
    return at.astimezone(timezone.utc).replace(tzinfo=None)


class FakeLease:
    """A python-chi ``Lease``: ``id``/``start_date``/``end_date`` as after ``submit`` (naive UTC datetimes);
    ``status`` — a Blazar read in python-chi, not recorded here — turns from PENDING to
    ``status_at_start`` ``activation_lag`` after the start time."""

    def __init__(self, rec: Recorder, module: FakeLeaseModule, name: str, status: str | None = "PENDING",
                 status_at_start: str = "ACTIVE", start: datetime | None = None,
                 end: datetime | None = None) -> None:
        self._rec = rec
        self._module = module
        self.name = name
        self.id: str | None = None
        self._status = status
        self.status_at_start = status_at_start
        now = module.clock.now()
        self.start_date: Any = _naive_utc(start or now)
        self.end_date: Any = _naive_utc(end or (start or now) + timedelta(hours=3))
        self.node_reservations: list[dict[str, str]] = []

    @property
    def status(self) -> str | None:
        start = self.start_date if isinstance(self.start_date, datetime) else None
        if self._status == "PENDING" and start is not None and \
                _naive_utc(self._module.clock.now()) >= start + self._module.activation_lag:
            self._status = self.status_at_start
        return self._status

    @status.setter
    def status(self, value: str | None) -> None:
        self._status = value

    def add_node_reservation(self, amount: int | None = None, node_type: str | None = None,
                             node_name: str | None = None, nodes: Any = None) -> None:
        self._rec("Lease.add_node_reservation", amount=amount, node_type=node_type)
        self.node_reservations.append({"id": f"res-{self.name}"})

    def submit(self, wait_for_active: bool = True, wait_timeout: int = 300, show: str | None = None,
               idempotent: bool = False, retry_on_error: bool = False) -> None:
        self._rec("Lease.submit", wait_for_active=wait_for_active, show=show, idempotent=idempotent)
        context = self._module.context
        if context is not None and context._restricted_credential():
            # Blazar creates a Keystone trust with the caller's token; Keystone refuses it (HTTP 403),
            # python-chi logs that and raises ResourceError
            raise ResourceError("Unable to make lease: Using method 'application_credential' is not allowed "
                                "for managing trusts.")
        now = _naive_utc(self._module.clock.now())
        start = self.start_date
        self.start_date = now if start == "now" else datetime.strptime(start, BLAZAR_FORMAT)
        self.end_date = datetime.strptime(self.end_date, BLAZAR_FORMAT)
        self.id = self._module.new_id()
        self._status = "PENDING"
        self._module.leases.append(self)
        return None  # python-chi 1.2.10: always None

    def delete(self) -> None:
        self._rec("Lease.delete", self.name)
        self.id = None
        self._status = "DELETED"


class FakeLeaseModule:
    def __init__(self, rec: Recorder, clock: FakeClock) -> None:
        self._rec = rec
        self.clock = clock
        self.leases: list[FakeLease] = []
        self.context: FakeContext | None = None  # whose credentials submit a lease (Blazar's trust)
        self.status_at_start = "ACTIVE"
        self.activation_lag = timedelta(seconds=60)  # Blazar starts a lease within about a minute
        self._ids = 0

    def new_id(self) -> str:
        self._ids += 1
        return f"lease-{self._ids}"

    def Lease(self, name: str | None = None, start_date: Any = None, end_date: Any = None,  # noqa: N802
              duration: Any = None, lease_json: Any = None) -> FakeLease:
        """python-chi 1.2.10's constructor: dates formatted as given (no time zone conversion); with
        ``duration`` the end is *now* + duration even when ``start_date`` is given."""
        given = {k: v for k, v in (("start_date", start_date), ("end_date", end_date), ("duration", duration))
                 if v is not None}
        self._rec("lease.Lease", name, **given)
        if end_date and duration:
            raise ValueError("Specify either end_date or duration, not both")
        if not (end_date or duration):
            raise ValueError("Either end_date or duration must be specified")
        lease = FakeLease(self._rec, self, name or "", status=None, status_at_start=self.status_at_start)
        lease.start_date = start_date.strftime(BLAZAR_FORMAT) if start_date else "now"
        lease.end_date = (end_date or self.clock.now() + duration).strftime(BLAZAR_FORMAT)
        return lease

    def list_leases(self) -> list[FakeLease]:
        self._rec("lease.list_leases")
        return list(self.leases)

    def add_existing(self, name: str, status: str, status_at_start: str = "ACTIVE",
                     starts_in: timedelta | None = None) -> FakeLease:
        """A lease made before this run (e.g. in the GUI); ``starts_in`` from now (default: started)."""
        start = self.clock.now() + (starts_in if starts_in is not None else timedelta(hours=-1))
        lease = FakeLease(self._rec, self, name, status=status, status_at_start=status_at_start, start=start)
        lease.id = self.new_id()
        lease.node_reservations.append({"id": f"res-{name}"})
        self.leases.append(lease)
        return lease


class FakeNeutron:
    """The neutronclient ``Client`` that ``chi.network.neutron()`` returns, over the project's floating IPs:
    the calls provisioning makes itself (allocation, association, release by id) and those python-chi's
    network functions make (``test_the_neutron_stand_in_keeps_neutronclients_signatures``). Each call is
    recorded as ``neutron.<method>``; ``network.neutron_failures[method]`` holds exceptions the next calls
    raise, one each (neutronclient's own classes in the tests)."""

    def __init__(self, network: FakeNetworkModule) -> None:
        self._network = network

    def _call(self, name: str, *args: Any) -> None:
        self._network._rec(f"neutron.{name}", *args)
        failures = self._network.neutron_failures.get(name)
        if failures:
            raise failures.pop(0)

    def _ip(self, floatingip: str) -> dict[str, Any]:
        match = next((ip for ip in self._network.floating_ips if ip["id"] == floatingip), None)
        if match is None:
            from neutronclient.common.exceptions import NotFound

            raise NotFound(message=f"Floating IP {floatingip} could not be found")
        return match

    def list_networks(self, retrieve_all: bool = True, **_params: Any) -> dict[str, Any]:
        self._call("list_networks")
        return {"networks": [{"id": "net-public", "name": self._network.PUBLIC_NETWORK}]}

    def list_floatingips(self, retrieve_all: bool = True, **_params: Any) -> dict[str, Any]:
        self._call("list_floatingips")
        return {"floatingips": [dict(ip) for ip in self._network.floating_ips]}

    def create_floatingip(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        self._call("create_floatingip", body)
        fip = self._network.allocate()
        fip["description"] = (body or {})["floatingip"].get("description", "")
        self._network.after_create(fip)  # a test's hook: Neutron has made it, the answer may not arrive
        return {"floatingip": dict(fip)}

    def update_floatingip(self, floatingip: str, body: dict[str, Any] | None = None,
                          revision_number: Any = None) -> dict[str, Any]:
        self._call("update_floatingip", floatingip, body)
        ip = self._ip(floatingip)
        ip.update((body or {}).get("floatingip", {}))
        return {"floatingip": dict(ip)}

    def delete_floatingip(self, floatingip: str) -> None:
        self._call("delete_floatingip", floatingip)
        self._network.floating_ips.remove(self._ip(floatingip))

    def list_ports(self, retrieve_all: bool = True, **_params: Any) -> dict[str, Any]:
        """A bare-metal server has one port on sharednet1 (``FakeServer._port``)."""
        self._call("list_ports", _params)
        device = _params.get("device_id")
        return {"ports": [{"id": f"port-{device}", "device_id": device}] if device else []}


class FakeNetworkModule:
    """python-chi's ``chi.network`` floating IP functions over a list of the project's floating IPs."""

    PUBLIC_NETWORK = "public"  # python-chi 1.2.10's name of the network floating IPs come from

    def __init__(self, rec: Recorder) -> None:
        self._rec = rec
        self.floating_ips: list[dict[str, Any]] = []
        self.neutron_failures: dict[str, list[BaseException]] = {}
        self.after_create: Any = lambda fip: None
        self._next = 7  # the first allocation is FLOATING_IP

    def get_network_id(self, name: str) -> str:
        self._rec("network.get_network_id", name)
        return f"net-{name}"

    def neutron(self, session: Any = None) -> FakeNeutron:  # not recorded: the client's calls are
        return FakeNeutron(self)

    def allocate(self, port_id: str | None = None) -> dict[str, Any]:
        address = f"129.114.108.{self._next}"
        self._next += 1
        fip = {"id": f"fip-{address}", "floating_ip_address": address, "port_id": port_id,
               "fixed_ip_address": None, "tags": []}
        self.floating_ips.append(fip)
        return fip

    def free(self) -> dict[str, Any] | None:
        return next((ip for ip in self.floating_ips if ip["port_id"] is None), None)

    def get_or_create_floating_ip(self) -> tuple[dict[str, Any], bool]:
        self._rec("network.get_or_create_floating_ip")
        fip = self.free()
        return (fip, False) if fip is not None else (self.allocate(), True)

    def list_floating_ips(self) -> list[dict[str, Any]]:
        self._rec("network.list_floating_ips")
        return [dict(ip) for ip in self.floating_ips]

    def get_floating_ip(self, ip_address: str) -> dict[str, Any]:
        self._rec("network.get_floating_ip", ip_address)
        for ip in self.floating_ips:
            if ip["floating_ip_address"] == ip_address:
                return ip
        raise ValueError(f"Floating IP {ip_address} not found")  # python-chi: CHIValueError

    def deallocate_floating_ip(self, address: str) -> None:
        self._rec("network.deallocate_floating_ip", address)
        fip = next((ip for ip in self.floating_ips if ip["floating_ip_address"] == address), None)
        if fip is None:
            raise ValueError(f"Floating IP {address} not found")  # python-chi's get_floating_ip
        self.floating_ips.remove(fip)

    def add_existing(self, port_id: str | None = None) -> dict[str, Any]:
        """A floating IP already in the project (bound to ``port_id``, or free)."""
        return self.allocate(port_id)


class FakeServer:
    def __init__(self, rec: Recorder, module: FakeServerModule, name: str, status: str = "BUILD",
                 status_after_wait: str = "ACTIVE") -> None:
        self._rec = rec
        self._module = module
        self.name = name
        self.id = module.new_id()
        self.status = status
        self.status_after_wait = status_after_wait

    @property
    def _port(self) -> str:  # the port its floating IPs are bound to
        return f"port-{self.id}"

    def submit(self, wait_for_active: bool = True, show: str = "widget", idempotent: bool = False,
               retry_on_error: bool = False, wait_timeout: int = 1200, **kwargs: Any) -> None:
        self._rec("Server.submit", wait_for_active=wait_for_active, show=show, idempotent=idempotent)
        self._module.servers[self.name] = self
        return None  # python-chi 1.2: nothing returned on a fresh create

    def wait(self, status: str = "ACTIVE", show: str = "widget", timeout: int = 1200) -> None:
        self._rec("Server.wait", status=status, show=show, timeout=timeout)
        if self._module.wait_failures:  # a flaky API: this wait fails; the boot goes on meanwhile
            raise self._module.wait_failures.pop(0)
        self.status = self.status_after_wait

    def get_floating_ip(self) -> str | None:
        self._rec("Server.get_floating_ip")
        bound = [ip for ip in self._module.network.floating_ips if ip["port_id"] == self._port]
        return str(bound[0]["floating_ip_address"]) if bound else None

    def associate_floating_ip(self, fip: str | None = None, port_id: str | None = None) -> str:
        """python-chi 1.2.10: the given address (else a free one, else a new allocation) bound to the
        server's port; returns the address it attached."""
        self._rec("Server.associate_floating_ip", *([fip] if fip else []))
        network = self._module.network
        ip = (next(i for i in network.floating_ips if i["floating_ip_address"] == fip) if fip
              else network.free() or network.allocate())
        ip["port_id"] = self._port
        return str(ip["floating_ip_address"])

    def check_connectivity(self, wait: bool = True, host: str | None = None, port: int = 22,
                           timeout: int = 500, show: str = "widget") -> None:
        self._rec("Server.check_connectivity", host=host, port=port, timeout=timeout, show=show)
        if self._module.ssh_fails:
            raise RuntimeError(f"Waited too long for the port {port} on host {host}")

    def upload(self, file: str, remote_path: str = "", **kwargs: Any) -> None:
        self._rec("Server.upload", file, remote_path)
        if self._module.upload_failures:
            raise self._module.upload_failures.pop(0)

    def execute(self, command: str, **kwargs: Any) -> Result:
        self._rec("Server.execute", command)
        self._module.execute_kwargs.append(kwargs)
        stdout = next((out for key, out in self._module.outputs.items() if key in command), "")
        code = next((code for key, code in self._module.exit_codes.items() if key in command), 0)
        result = Result(stdout=stdout, command=command, exited=code)
        if any(key in command for key in self._module.hangs):
            from invoke.exceptions import CommandTimedOut

            raise CommandTimedOut(result, timeout=kwargs["config"].timeouts.command)
        if code:
            raise UnexpectedExit(result)
        return result

    def ssh_connection(self, user: str = "cc", **kwargs: Any) -> Any:
        self._rec("Server.ssh_connection", user=user)
        return SimpleNamespace(host=self.get_floating_ip(), user=user)

    def delete(self, idempotent: bool = False, delete_ips: bool = True) -> None:
        """python-chi 1.2.10: the server goes and its floating IPs come off its port, but stay
        allocated to the project even with ``delete_ips=True`` (its release sends a DELETE that 404s)."""
        self._rec("Server.delete", self.name, delete_ips=delete_ips)
        self._module.servers.pop(self.name, None)
        for ip in self._module.network.floating_ips:
            if ip["port_id"] == self._port:
                ip["port_id"] = None


class FakeServerModule:
    def __init__(self, rec: Recorder, network: FakeNetworkModule) -> None:
        self._rec = rec
        self.network = network
        self.servers: dict[str, FakeServer] = {}
        self.ssh_fails = False
        self.keypairs: dict[str, str] = {"alice-key": "ssh-ed25519 AAAAC3Nza alice"}
        self.outputs: dict[str, str] = {"./lab jupyter": JUPYTER_OUTPUT}
        self.exit_codes: dict[str, int] = {}
        self.hangs: set[str] = set()  # command substrings that run past the command timeout
        self.upload_failures: list[BaseException] = []  # raised by the next uploads, one each
        self.wait_failures: list[BaseException] = []  # raised by the next Server.wait calls, one each
        self.execute_kwargs: list[dict[str, Any]] = []
        self._ids = 0

    def new_id(self) -> str:
        self._ids += 1
        return f"server-{self._ids}"

    def Server(self, name: str, reservation_id: str | None = None,  # noqa: N802
               image_name: str | None = "CC-Ubuntu22.04", image: Any = None,
               flavor_name: str = "baremetal", key_name: str | None = None, keypair: Any = None,
               network_name: str = "sharednet1") -> FakeServer:
        self._rec("server.Server", name, reservation_id=reservation_id, image_name=image_name,
                  key_name=key_name)
        return FakeServer(self._rec, self, name)

    def get_server_id(self, name: str) -> str | None:
        self._rec("server.get_server_id", name)
        return self.servers[name].id if name in self.servers else None

    def get_server(self, name: str) -> FakeServer:
        self._rec("server.get_server", name)
        return self.servers[name]

    def get_keypair(self, name: str | None = None) -> SimpleNamespace:
        self._rec("server.get_keypair", name)
        return SimpleNamespace(name=name, public_key=self.keypairs.get(name or ""))

    def list_keypair(self) -> list[SimpleNamespace]:
        self._rec("server.list_keypair")
        return [SimpleNamespace(name=name, public_key=key) for name, key in self.keypairs.items()]

    def add_existing(self, name: str, status: str, fip: bool = False) -> FakeServer:
        """A server made before this run; ``fip``: with a floating IP of the project bound to it."""
        server = FakeServer(self._rec, self, name, status=status, status_after_wait=status)
        self.servers[name] = server
        if fip:
            self.network.add_existing(port_id=server._port)
        return server


class FakeImageModule:
    def __init__(self, rec: Recorder) -> None:
        self._rec = rec
        self.images = {"CC-Ubuntu24.04-CUDA", "CC-Ubuntu22.04-CUDA", "CC-Ubuntu24.04"}

    def get_image(self, name: str) -> SimpleNamespace:
        self._rec("image.get_image", name)
        if name not in self.images:
            raise ValueError(f'No images found matching name "{name}"')  # python-chi: CHIValueError
        return SimpleNamespace(name=name, uuid=f"img-{name}")


class Unauthorized(Exception):
    """keystoneauth1.exceptions.http.Unauthorized, by name (provisioning chooses its hint by class name)."""


class ResourceError(Exception):
    """python-chi's chi.exception.ResourceError, by name (what a failed status read raises in ``wait``)."""


class ServiceError(Exception):
    """python-chi's chi.exception.ServiceError, by name (``Server.wait`` raises it at its own timeout)."""


class FakeContext:
    """``chi.context``. Its ``auth_type`` setting is the keystoneauth plugin (``OS_AUTH_TYPE``): the hub's
    ``v3oidcaccesstoken`` by default; with ``v3applicationcredential`` the token's project is the
    credential's (``credential_project``: name, id; ``credential_restricted``: the token's
    ``application_credential.restricted``, which makes Blazar's lease fail), and after ``use_project``
    — python-chi then sets ``project_name`` on the plugin — every Keystone call is refused as Keystone
    refuses it."""

    def __init__(self, rec: Recorder, public_key: Path | None = None) -> None:
        self._rec = rec
        self.sites: list[str] = ["CHI@TACC", "CHI@UC", "KVM@TACC", "CHI@NCAR"]
        self.projects: list[str] | None = None  # None: whichever project was selected is yours
        self.project: str | None = None
        self.credential_project = ("CHI-231095", "0a1b2c3d231095")  # an application credential's
        self.credential_restricted = False  # the GUI's default is True; the lab needs an unrestricted one
        # python-chi's context settings as on Chameleon's Jupyter (its default key pair)
        self.settings: dict[str, Any] = {
            "auth_type": "v3oidcaccesstoken",
            "keypair_name": "alice-jupyter",
            "keypair_public_key": str(public_key) if public_key else None,
            "keypair_private_key": None,
        }

    def _keystone(self, name: str) -> None:
        """A call that authenticates: recorded; refused as Keystone refuses a scoped application credential"""
        self._rec(name)
        if self.settings.get("auth_type") == "v3applicationcredential" and self.project is not None:
            raise Unauthorized("The request you have made requires authentication. (HTTP 401) "
                               "Application credentials cannot request a scope.")

    def _token_project(self) -> tuple[str, str]:
        if self.settings.get("auth_type") == "v3applicationcredential":
            return self.credential_project
        name = self.project or ""
        return name, f"id-{name}" if name else ""

    def session(self) -> SimpleNamespace:
        """python-chi's keystoneauth ``Adapter``: ``.session.auth.get_access(session)`` is the token."""
        def get_access(session: Any) -> SimpleNamespace:
            self._keystone("context.session.get_access")
            name, project_id = self._token_project()
            access = SimpleNamespace(project_name=name or None, project_id=project_id or None)
            if self.settings.get("auth_type") == "v3applicationcredential":  # as Keystone renders it
                access.application_credential = {"id": "ac-1", "name": "serve-lab",
                                                  "restricted": self.credential_restricted}
            return access

        auth = SimpleNamespace(get_access=get_access)
        return SimpleNamespace(session=SimpleNamespace(auth=auth))

    def _restricted_credential(self) -> bool:
        return self.settings.get("auth_type") == "v3applicationcredential" and self.credential_restricted

    def list_sites(self, show: str | None = None) -> dict[str, dict[str, str]]:
        self._rec("context.list_sites")
        return {name: {"name": name} for name in self.sites}

    def use_project(self, project: str) -> None:
        self._rec("context.use_project", project)
        self.project = project

    def use_site(self, site_name: str) -> None:
        self._rec("context.use_site", site_name)

    def list_projects(self, show: str | None = None) -> list[str]:
        self._keystone("context.list_projects")
        if self.projects is None:
            if self.settings.get("auth_type") == "v3applicationcredential":
                return [self.credential_project[0]]
            return [self.project] if self.project else []
        return list(self.projects)

    def get(self, key: str) -> Any:  # local settings only: not recorded
        return self.settings.get(key)

    def choose_project(self) -> None:  # present in python-chi; must never be called headless
        raise AssertionError("interactive chooser called")

    def choose_site(self, default: str | None = None) -> None:
        raise AssertionError("interactive chooser called")


@dataclass
class FakeChi:
    rec: Recorder
    api: ChiApi
    lease: FakeLeaseModule
    server: FakeServerModule
    context: FakeContext
    image: FakeImageModule
    network: FakeNetworkModule
    clock: FakeClock


@pytest.fixture
def fake_chi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeChi:
    """The stand-in, with provisioning's clock replaced (waits take no time) and Berlin as the local zone."""
    from zoneinfo import ZoneInfo

    from provisioning import times

    rec, clock = Recorder(), FakeClock()
    monkeypatch.setattr(times, "utcnow", clock.now)
    monkeypatch.setattr(times, "sleep", clock.sleep)
    monkeypatch.setattr(times, "local_zone", lambda: ZoneInfo("Europe/Berlin"))
    public_key = tmp_path / "id_rsa.pub"  # Chameleon's Jupyter: OS_KEYPAIR_PUBLIC_KEY
    public_key.write_text("ssh-rsa AAAAB3Nza alice@jupyter\n")
    network = FakeNetworkModule(rec)
    leases, servers = FakeLeaseModule(rec, clock), FakeServerModule(rec, network)
    context, images = FakeContext(rec, public_key), FakeImageModule(rec)
    leases.context = context
    api = ChiApi(context=context, lease=leases, server=servers, image=images, network=network)
    return FakeChi(rec, api, leases, servers, context, images, network, clock)


@pytest.fixture
def student(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """A fixed user id, no stray CHI_*/OS_* settings (credentials) from the machine running the tests,
    and results (the default state file) under the test's folder."""
    import os

    for var in list(os.environ):
        if var.startswith(("CHI_", "OS_", "SERVELAB_REPO", "SERVELAB_CODE", "SERVELAB_REMOTE")):
            monkeypatch.delenv(var)
    monkeypatch.setenv("USER", "alice")
    monkeypatch.setenv("SERVELAB_RESULTS", str(tmp_path / "results"))
    return "alice"
