"""Reserve, set up and release the Chameleon GPU node with python-chi.

Notebooks (and the instructor's papermill run) call these functions with the
project, site and names as parameters or environment variables (see
``provisioning.config``); nothing here opens a widget or asks a question.
``plan_only=True`` prints what would be created and calls nothing — the mode
the local target's headless run uses.

    from provisioning import from_env, reserve, launch, teardown
    config = from_env(project="CHI-123456")
    reserve(config)                    # the lease, ACTIVE
    node = launch(config)              # server, floating IP, SSH, node set-up
    teardown(config)                   # server first, then the lease
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioning.chi_api import ChiApi, real_chi, use_context
from provisioning.config import ChameleonConfig, ProvisioningError, from_env
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

__all__ = [
    "ChameleonConfig", "Node", "ProvisioningError", "Step", "connect", "from_env", "launch",
    "provision", "provision_plan", "reserve", "teardown", "teardown_plan",
]


@dataclass
class Node:
    """The set-up node: its python-chi server and its floating IP."""

    server: Any
    address: str
    user: str = "cc"

    def ssh_connection(self) -> Any:
        """A Fabric ``Connection`` to the node (python-chi sets the key and host-key policy)."""
        return self.server.ssh_connection(user=self.user)


def _print_plan(steps: list[Step], plan_only: bool) -> None:
    title = "Provisioning plan (plan mode: nothing is created)" if plan_only else "Provisioning:"
    print(format_plan(steps, title))


def _start(config: ChameleonConfig, chi: ChiApi | None) -> ChiApi:
    project = config.require_project()  # before importing python-chi: fail fast, name the fix
    chi = chi or real_chi()
    use_context(project, config.site, chi)
    return chi


def reserve(config: ChameleonConfig, plan_only: bool = False, chi: ChiApi | None = None) -> Any:
    """Create or reuse the lease and return it ACTIVE (None in plan mode)."""
    steps = [s for s in provision_plan(config) if s.name in ("context", "lease")]
    _print_plan(steps, plan_only)
    if plan_only:
        return None
    chi = _start(config, chi)
    return ensure_lease(config, chi)


def launch(config: ChameleonConfig, plan_only: bool = False, chi: ChiApi | None = None,
           setup_node: bool = True, workdir: Path | None = None) -> Node | None:
    """Server on the (existing or new) lease, floating IP, SSH, node set-up; the Node (None in plan mode)."""
    _print_plan(provision_plan(config), plan_only)
    if plan_only:
        return None
    chi = _start(config, chi)
    lease = ensure_lease(config, chi)
    server = ensure_server(config, lease, chi)
    address = ensure_floating_ip(server)
    wait_for_ssh(server, address, config)
    if setup_node:
        with tempfile.TemporaryDirectory() as tmp:
            run_node_setup(server, config, Path(workdir or tmp))
    return Node(server=server, address=address, user=config.ssh_user)


def provision(config: ChameleonConfig, plan_only: bool = False, chi: ChiApi | None = None) -> Node | None:
    """The whole sequence in one call: lease, server, floating IP, SSH, node set-up."""
    return launch(config, plan_only=plan_only, chi=chi)


def connect(config: ChameleonConfig, chi: ChiApi | None = None) -> Node:
    """The already provisioned node (for the chameleon target); errors say which step to run first."""
    chi = _start(config, chi)
    server = find_server(config, chi)
    if server is None:
        raise ProvisioningError(
            f"no server named {config.server_name}: run the server set-up step (provisioning.launch) first")
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
    chi = _start(config, chi)
    delete_server(config, chi)
    if not keep_lease:
        delete_lease(config, chi)

