"""Fixtures for the GPU-target tests: a recording stand-in of python-chi's API surface.

The stand-in has the same names and signatures that ``provisioning`` calls on
python-chi 1.2.x (``chi.context``, ``chi.lease``, ``chi.server``) and records
every call with its arguments, so the tests assert the exact sequence a real
run would send to Chameleon. Its behaviour follows python-chi 1.2.10's source:
``Server.submit`` returns None on a fresh create, ``wait`` returns on ERROR,
``get_server_id`` returns None for an unknown name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from provisioning.chi_api import ChiApi


@dataclass
class Recorder:
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)

    def __call__(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.calls.append((name, args, kwargs))

    def names(self) -> list[str]:
        return [name for name, _, _ in self.calls]


class FakeLease:
    def __init__(self, rec: Recorder, name: str, status: str = "PENDING",
                 status_after_wait: str = "ACTIVE") -> None:
        self._rec = rec
        self.name = name
        self.status = status
        self.status_after_wait = status_after_wait
        self.node_reservations: list[dict[str, str]] = []

    def add_node_reservation(self, amount: int | None = None, node_type: str | None = None,
                             node_name: str | None = None, nodes: Any = None) -> None:
        self._rec("Lease.add_node_reservation", amount=amount, node_type=node_type)
        self.node_reservations.append({"id": f"res-{self.name}"})

    def submit(self, wait_for_active: bool = True, wait_timeout: int = 300, show: str | None = None,
               idempotent: bool = False, retry_on_error: bool = False) -> None:
        self._rec("Lease.submit", wait_for_active=wait_for_active, show=show, idempotent=idempotent)
        return None

    def wait(self, status: str = "active", show: str = "widget", timeout: int = 500) -> None:
        self._rec("Lease.wait", status=status, show=show, timeout=timeout)
        self.status = self.status_after_wait

    def delete(self) -> None:
        self._rec("Lease.delete", self.name)
        self.status = "DELETED"


class FakeLeaseModule:
    def __init__(self, rec: Recorder, status_after_wait: str = "ACTIVE") -> None:
        self._rec = rec
        self.leases: list[FakeLease] = []
        self.status_after_wait = status_after_wait

    def Lease(self, name: str | None = None, start_date: Any = None, end_date: Any = None,  # noqa: N802
              duration: Any = None, lease_json: Any = None) -> FakeLease:
        self._rec("lease.Lease", name, duration=duration)
        lease = FakeLease(self._rec, name or "", status_after_wait=self.status_after_wait)
        self.leases.append(lease)
        return lease

    def list_leases(self) -> list[FakeLease]:
        self._rec("lease.list_leases")
        return list(self.leases)

    def add_existing(self, name: str, status: str, status_after_wait: str = "ACTIVE") -> FakeLease:
        lease = FakeLease(self._rec, name, status=status, status_after_wait=status_after_wait)
        lease.node_reservations.append({"id": f"res-{name}"})
        self.leases.append(lease)
        return lease


class FakeServer:
    def __init__(self, rec: Recorder, module: FakeServerModule, name: str, status: str = "BUILD",
                 status_after_wait: str = "ACTIVE", fip: str | None = None) -> None:
        self._rec = rec
        self._module = module
        self.name = name
        self.status = status
        self.status_after_wait = status_after_wait
        self.fip = fip

    def submit(self, wait_for_active: bool = True, show: str = "widget", idempotent: bool = False,
               retry_on_error: bool = False, wait_timeout: int = 1200, **kwargs: Any) -> None:
        self._rec("Server.submit", wait_for_active=wait_for_active, show=show, idempotent=idempotent)
        self._module.servers[self.name] = self
        return None  # python-chi 1.2: nothing returned on a fresh create

    def wait(self, status: str = "ACTIVE", show: str = "widget", timeout: int = 1200) -> None:
        self._rec("Server.wait", status=status, show=show, timeout=timeout)
        self.status = self.status_after_wait

    def get_floating_ip(self) -> str | None:
        self._rec("Server.get_floating_ip")
        return self.fip

    def associate_floating_ip(self, fip: str | None = None, port_id: str | None = None) -> None:
        self._rec("Server.associate_floating_ip")
        self.fip = "129.114.108.7"

    def check_connectivity(self, wait: bool = True, host: str | None = None, port: int = 22,
                           timeout: int = 500, show: str = "widget") -> None:
        self._rec("Server.check_connectivity", host=host, port=port, timeout=timeout, show=show)
        if self._module.ssh_fails:
            raise RuntimeError(f"Waited too long for the port {port} on host {host}")

    def upload(self, file: str, remote_path: str = "", **kwargs: Any) -> None:
        self._rec("Server.upload", file, remote_path)

    def execute(self, command: str, **kwargs: Any) -> None:
        self._rec("Server.execute", command)

    def ssh_connection(self, user: str = "cc", **kwargs: Any) -> Any:
        self._rec("Server.ssh_connection", user=user)
        return SimpleNamespace(host=self.fip, user=user)

    def delete(self, idempotent: bool = False, delete_ips: bool = True) -> None:
        self._rec("Server.delete", self.name)
        self._module.servers.pop(self.name, None)


class FakeServerModule:
    def __init__(self, rec: Recorder) -> None:
        self._rec = rec
        self.servers: dict[str, FakeServer] = {}
        self.ssh_fails = False

    def Server(self, name: str, reservation_id: str | None = None,  # noqa: N802
               image_name: str | None = "CC-Ubuntu22.04", image: Any = None,
               flavor_name: str = "baremetal", key_name: str | None = None, keypair: Any = None,
               network_name: str = "sharednet1") -> FakeServer:
        self._rec("server.Server", name, reservation_id=reservation_id, image_name=image_name,
                  key_name=key_name)
        return FakeServer(self._rec, self, name)

    def get_server_id(self, name: str) -> str | None:
        self._rec("server.get_server_id", name)
        return f"id-{name}" if name in self.servers else None

    def get_server(self, name: str) -> FakeServer:
        self._rec("server.get_server", name)
        return self.servers[name]

    def add_existing(self, name: str, status: str, fip: str | None = None) -> FakeServer:
        server = FakeServer(self._rec, self, name, status=status, status_after_wait=status, fip=fip)
        self.servers[name] = server
        return server


class FakeContext:
    def __init__(self, rec: Recorder) -> None:
        self._rec = rec

    def use_project(self, project: str) -> None:
        self._rec("context.use_project", project)

    def use_site(self, site_name: str) -> None:
        self._rec("context.use_site", site_name)

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


@pytest.fixture
def fake_chi() -> FakeChi:
    rec = Recorder()
    leases = FakeLeaseModule(rec)
    servers = FakeServerModule(rec)
    return FakeChi(rec, ChiApi(context=FakeContext(rec), lease=leases, server=servers), leases, servers)


@pytest.fixture
def student(monkeypatch: pytest.MonkeyPatch) -> str:
    """A fixed user id and no stray CHI_* settings from the machine running the tests."""
    import os

    for var in list(os.environ):
        if var.startswith(("CHI_", "SERVELAB_REPO", "SERVELAB_CODE", "SERVELAB_REMOTE")):
            monkeypatch.delenv(var)
    monkeypatch.setenv("USER", "alice")
    return "alice"
