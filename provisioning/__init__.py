"""Reserve, set up and release the Chameleon GPU node with python-chi.

Notebooks (and the instructor's papermill run) call these functions with the
project, site and names as parameters or environment variables (see
``provisioning.config``); nothing here opens a widget or asks a question.
``plan_only=True`` prints what would be created and calls nothing — the mode
the local target's headless run uses.

    from provisioning import from_env, preflight, reserve, launch, teardown
    config = from_env(project="CHI-123456")
    preflight(config)                  # every check that creates nothing (reserve/launch run it too)
    reserve(config)                    # the lease, ACTIVE
    node = launch(config)              # server, floating IP, SSH, node set-up, the student's Jupyter
    node.jupyter_url                   # http://<floating IP>:8888/lab?token=...
    teardown(config)                   # server first, then the lease

Every failure is a ``ProvisioningError`` with one line that says what to do;
python-chi/keystoneauth exceptions are turned into one (the original is its
``__cause__``).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioning.checks import run_preflight, select_context, start_chi
from provisioning.chi_api import ChiApi
from provisioning.config import ChameleonConfig, ProvisioningError, from_env
from provisioning.errors import step
from provisioning.lease import delete_lease, ensure_lease
from provisioning.node import run_node_setup
from provisioning.plan import Step, format_plan, provision_plan, teardown_plan
from provisioning.server import (
    delete_server,
    ensure_floating_ip,
    ensure_server,
    find_server,
    wait_for_ssh,
)
from servelab.core.paths import REPO_ROOT

__all__ = [
    "ChameleonConfig", "Node", "ProvisioningError", "Step", "connect", "from_env", "launch", "preflight",
    "provision", "provision_plan", "reserve", "teardown", "teardown_plan",
]


@dataclass
class Node:
    """The set-up node: its python-chi server, its floating IP, and the student's Jupyter on it."""

    server: Any
    address: str
    user: str = "cc"
    jupyter_url: str = ""  # set by launch() after `./lab jupyter`; "" when not started by this call

    def ssh_connection(self) -> Any:
        """A Fabric ``Connection`` to the node (python-chi sets the key and host-key policy)."""
        return self.server.ssh_connection(user=self.user)


def _print_plan(steps: list[Step], plan_only: bool) -> None:
    title = "Provisioning plan (plan mode: nothing is created)" if plan_only else "Provisioning:"
    print(format_plan(steps, title))


def preflight(config: ChameleonConfig, chi: ChiApi | None = None, *, root: Path = REPO_ROOT) -> None:
    """Every check that needs nothing created; raises ProvisioningError with one line on the first failure.

    Credentials in the environment (only with the real python-chi, ``chi=None``), the project,
    the code source, then read-only python-chi calls: site, credentials and project, image,
    key pair. See ``provisioning.checks``. ``reserve`` and ``launch`` run it first.
    """
    run_preflight(config, chi, root)


def reserve(config: ChameleonConfig, plan_only: bool = False, chi: ChiApi | None = None, *,
            root: Path = REPO_ROOT) -> Any:
    """Create or reuse the lease and return it ACTIVE (None in plan mode)."""
    steps = [s for s in provision_plan(config) if s.name in ("context", "lease")]
    _print_plan(steps, plan_only)
    if plan_only:
        return None
    chi = run_preflight(config, chi, root)  # the lease is only worth making if launch can succeed
    with step(f"creating or reusing lease {config.lease_name}"):
        return ensure_lease(config, chi)


def launch(config: ChameleonConfig, plan_only: bool = False, chi: ChiApi | None = None,
           setup_node: bool = True, workdir: Path | None = None, *, root: Path = REPO_ROOT) -> Node | None:
    """Server on the (existing or new) lease, floating IP, SSH, node set-up and the student's Jupyter.

    Returns the Node (None in plan mode); its ``jupyter_url`` is set when ``setup_node``.
    """
    _print_plan(provision_plan(config), plan_only)
    if plan_only:
        return None
    chi = run_preflight(config, chi, root)
    with step(f"creating or reusing lease {config.lease_name}"):
        lease = ensure_lease(config, chi)
    with step(f"launching or reusing server {config.server_name}"):
        server = ensure_server(config, lease, chi)
    address = ensure_floating_ip(server)
    wait_for_ssh(server, address, config)
    node = Node(server=server, address=address, user=config.ssh_user)
    if setup_node:
        with tempfile.TemporaryDirectory() as tmp:
            node.jupyter_url = run_node_setup(server, config, Path(workdir or tmp), root, address)
        print(f"The lab's Jupyter server on the node: {node.jupyter_url}")
    return node


def provision(config: ChameleonConfig, plan_only: bool = False, chi: ChiApi | None = None) -> Node | None:
    """The whole sequence in one call: lease, server, floating IP, SSH, node set-up."""
    return launch(config, plan_only=plan_only, chi=chi)


def _select(config: ChameleonConfig, chi: ChiApi | None) -> ChiApi:
    chi = start_chi(config, chi)
    select_context(config, chi)
    return chi


def connect(config: ChameleonConfig, chi: ChiApi | None = None) -> Node:
    """The already provisioned node (for the chameleon target); errors say which step to run first."""
    chi = _select(config, chi)
    with step(f"looking up server {config.server_name}"):
        server = find_server(config, chi)
        if server is None:
            raise ProvisioningError(
                f"no server named {config.server_name}: run the server set-up step (provisioning.launch) "
                "first")
        address = server.get_floating_ip()
    if not address:
        raise ProvisioningError(
            f"server {config.server_name} has no floating IP: run provisioning.launch again")
    return Node(server=server, address=str(address), user=config.ssh_user)


def teardown(config: ChameleonConfig, plan_only: bool = False, keep_lease: bool = False,
             chi: ChiApi | None = None) -> None:
    """Delete the server (and its floating IP), then the lease unless ``keep_lease``."""
    _print_plan(teardown_plan(config, keep_lease), plan_only)
    if plan_only:
        return
    chi = _select(config, chi)
    with step(f"deleting server {config.server_name}"):
        delete_server(config, chi)
    if not keep_lease:
        with step(f"deleting lease {config.lease_name}"):
            delete_lease(config, chi)
