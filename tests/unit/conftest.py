"""Fixtures for the GPU-target tests: a recording stand-in of python-chi's API surface.

The stand-in has the same names and signatures that ``provisioning`` calls on
python-chi 1.2.x (``chi.context``, ``chi.lease``, ``chi.server``, ``chi.image``;
``test_provisioning`` compares them with the installed library) and records
every call that would reach Chameleon with its arguments (not ``context.get``,
which only reads local settings), so the tests assert the exact sequence a real
run would send. Its behaviour follows python-chi 1.2.10's source:
``Server.submit`` returns None on a fresh create, ``wait`` returns on ERROR,
``get_server_id`` returns None for an unknown name, ``get_keypair`` returns a
key pair without public key for an unknown name, ``get_image`` raises a
ValueError (CHIValueError) for an unknown name, ``associate_floating_ip``
returns the address, ``execute`` returns Fabric's ``Result`` (and raises
``UnexpectedExit`` on a non-zero exit).

Knobs: ``fake_chi.rec.failures[call_name] = exc`` makes any recorded call raise;
``fake_chi.context.sites`` / ``.projects`` / ``.settings``, ``fake_chi.image.images``,
``fake_chi.server.keypairs``, ``fake_chi.server.outputs`` (command substring →
stdout) and ``fake_chi.server.exit_codes`` (command substring → exit code).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from invoke.exceptions import UnexpectedExit
from invoke.runners import Result

from provisioning.chi_api import ChiApi

FLOATING_IP = "129.114.108.7"
JUPYTER_TOKEN = "0123abcd"
JUPYTER_OUTPUT = f"[jupyter] building the model artefacts\njupyter: http://localhost:8888/lab?token={JUPYTER_TOKEN}\n"


@dataclass
class Recorder:
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    failures: dict[str, BaseException] = field(default_factory=dict)

    def __call__(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.calls.append((name, args, kwargs))
        if name in self.failures:
            raise self.failures[name]

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

    def associate_floating_ip(self, fip: str | None = None, port_id: str | None = None) -> str:
        self._rec("Server.associate_floating_ip")
        self.fip = FLOATING_IP
        return self.fip  # python-chi 1.2: the address it attached

    def check_connectivity(self, wait: bool = True, host: str | None = None, port: int = 22,
                           timeout: int = 500, show: str = "widget") -> None:
        self._rec("Server.check_connectivity", host=host, port=port, timeout=timeout, show=show)
        if self._module.ssh_fails:
            raise RuntimeError(f"Waited too long for the port {port} on host {host}")

    def upload(self, file: str, remote_path: str = "", **kwargs: Any) -> None:
        self._rec("Server.upload", file, remote_path)

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
        return SimpleNamespace(host=self.fip, user=user)

    def delete(self, idempotent: bool = False, delete_ips: bool = True) -> None:
        self._rec("Server.delete", self.name)
        self._module.servers.pop(self.name, None)


class FakeServerModule:
    def __init__(self, rec: Recorder) -> None:
        self._rec = rec
        self.servers: dict[str, FakeServer] = {}
        self.ssh_fails = False
        self.keypairs: dict[str, str] = {"alice-key": "ssh-ed25519 AAAAC3Nza alice"}
        self.outputs: dict[str, str] = {"./lab jupyter": JUPYTER_OUTPUT}
        self.exit_codes: dict[str, int] = {}
        self.hangs: set[str] = set()  # command substrings that run past the command timeout
        self.execute_kwargs: list[dict[str, Any]] = []

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

    def get_keypair(self, name: str | None = None) -> SimpleNamespace:
        self._rec("server.get_keypair", name)
        return SimpleNamespace(name=name, public_key=self.keypairs.get(name or ""))

    def list_keypair(self) -> list[SimpleNamespace]:
        self._rec("server.list_keypair")
        return [SimpleNamespace(name=name, public_key=key) for name, key in self.keypairs.items()]

    def add_existing(self, name: str, status: str, fip: str | None = None) -> FakeServer:
        server = FakeServer(self._rec, self, name, status=status, status_after_wait=status, fip=fip)
        self.servers[name] = server
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


class FakeContext:
    def __init__(self, rec: Recorder, public_key: Path | None = None) -> None:
        self._rec = rec
        self.sites: list[str] = ["CHI@TACC", "CHI@UC", "KVM@TACC", "CHI@NCAR"]
        self.projects: list[str] | None = None  # None: whichever project was selected is yours
        self.project: str | None = None
        # python-chi's context settings as on Chameleon's Jupyter (its default key pair)
        self.settings: dict[str, Any] = {
            "keypair_name": "alice-jupyter",
            "keypair_public_key": str(public_key) if public_key else None,
            "keypair_private_key": None,
        }

    def list_sites(self, show: str | None = None) -> dict[str, dict[str, str]]:
        self._rec("context.list_sites")
        return {name: {"name": name} for name in self.sites}

    def use_project(self, project: str) -> None:
        self._rec("context.use_project", project)
        self.project = project

    def use_site(self, site_name: str) -> None:
        self._rec("context.use_site", site_name)

    def list_projects(self, show: str | None = None) -> list[str]:
        self._rec("context.list_projects")
        if self.projects is None:
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


@pytest.fixture
def fake_chi(tmp_path: Path) -> FakeChi:
    rec = Recorder()
    public_key = tmp_path / "id_rsa.pub"  # Chameleon's Jupyter: OS_KEYPAIR_PUBLIC_KEY
    public_key.write_text("ssh-rsa AAAAB3Nza alice@jupyter\n")
    leases, servers = FakeLeaseModule(rec), FakeServerModule(rec)
    context, images = FakeContext(rec, public_key), FakeImageModule(rec)
    api = ChiApi(context=context, lease=leases, server=servers, image=images)
    return FakeChi(rec, api, leases, servers, context, images)


@pytest.fixture
def student(monkeypatch: pytest.MonkeyPatch) -> str:
    """A fixed user id and no stray CHI_*/OS_* settings (credentials) from the machine running the tests."""
    import os

    for var in list(os.environ):
        if var.startswith(("CHI_", "OS_", "SERVELAB_REPO", "SERVELAB_CODE", "SERVELAB_REMOTE")):
            monkeypatch.delenv(var)
    monkeypatch.setenv("USER", "alice")
    return "alice"
