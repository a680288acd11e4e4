"""Reserve, set up and release the Chameleon GPU node with python-chi.

Notebooks (and the instructor's papermill run) call these functions with the
project, site and names as parameters or environment variables (see
``provisioning.config``); nothing here opens a widget or asks a question.
``plan_only=True`` prints what would be created and calls nothing — the mode
the local target's headless run uses.

    from provisioning import configure, preflight, reserve, launch, fetch_work, teardown
    config = configure(project="CHI-123456")  # lease_start="2026-11-24 09:00" reserves ahead
    preflight(config)                  # every check that creates nothing (reserve/launch run it too)
    reserve(config)                    # the lease: ACTIVE, or reserved ahead when it starts later
    node = launch(config)              # server, floating IP, SSH, node set-up, the student's Jupyter
    node.jupyter_url                   # http://<floating IP>:8888/lab?token=...
    fetch_work(config)                 # the node's results/ and saved notebooks → results/from-node/
    teardown(config)                   # what these calls created; adopted things stay

What each call creates or adopts (finds and reuses) is recorded in a state file
(``state=``; default ``results/chameleon-state.json``, see ``provisioning.state``);
``teardown`` deletes exactly what it records as created, and adopted resources
too only with ``delete_adopted=True``.

Every failure is a ``ProvisioningError`` with one line that says what to do;
python-chi/keystoneauth exceptions are turned into one (the original is its
``__cause__``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioning import messages as msg
from provisioning.checks import run_preflight, select_context, start_chi
from provisioning.chi_api import ChiApi
from provisioning.config import ChameleonConfig, ProvisioningError, from_env
from provisioning.errors import SignalGuard, describe, step
from provisioning.fetch import (
    FETCH_LIMIT_S,
    FETCH_LINE,
    Fetched,
    ShellFor,
    default_folder,
    fetch_line,
    fetch_node_work,
)
from provisioning.floating_ip import (
    ensure_floating_ip,
    for_server,
    releasable,
    release_by_id,
    unbound_floating_ips,
    unbound_text,
)
from provisioning.lease import LeaseNotStarted, ensure_lease
from provisioning.node import run_node_setup
from provisioning.plan import Step, format_plan, provision_plan, teardown_plan
from provisioning.server import ensure_server, find_server, wait_for_ssh
from provisioning.state import LIVE, STATE_NAME, State, default_state_path
from provisioning.teardown import TeardownError, TeardownResult, delete_command, run_teardown
from servelab.core.paths import REPO_ROOT, shown

__all__ = [
    "FETCH_LINE", "STATE_NAME", "ChameleonConfig", "Fetched", "LeaseNotStarted", "Node", "ProvisioningError",
    "Step", "TeardownError", "TeardownResult", "configure", "connect", "default_state_path", "fetch_line",
    "fetch_work", "from_env", "launch", "live_records_refusal", "not_in_the_nodes_jupyter", "preflight",
    "provision", "provision_plan",
    "release_ip", "reserve",
    "teardown", "teardown_plan", "unbound_ips",
]
StatePath = Path | str | None  # the state file; None: default_state_path()


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


def configure(state: StatePath = None, env: Mapping[str, str] | None = None, show: bool = True,
              **params: object) -> ChameleonConfig:
    """Notebooks 01, 02 and 08's settings: ``from_env``, and for the project — without a ``project``
    parameter or ``$CHI_PROJECT`` — the one the state file's live records were made in (what 01
    reserved), before ``$OS_PROJECT_NAME`` (the hub sets it to the first of the user's projects, not
    necessarily the class's). Prints (``show``) the project it will charge and where that came from.
    Reasons: docs/decisions/2026-11-25-class-day-provisioning.md.
    """
    environ = dict(os.environ if env is None else env)
    records = State(state)
    recorded = records.projects()
    if params.get("project"):
        source = "the project parameter"
    elif environ.get("CHI_PROJECT"):
        source = "$CHI_PROJECT"
    elif recorded:
        params["project"] = recorded[-1]
        source = f"{shown(str(records.path))}: the project this lab's lease and server were made in"
    elif environ.get("OS_PROJECT_NAME"):
        source = ("$OS_PROJECT_NAME: the hub's default, the first of your projects; if the class uses "
                  "another, set project")
    else:
        source = ""
    config = from_env(env=environ, **params)
    if not show:
        return config
    if config.project:
        print(f"Project charged: {config.project} (from {source})")
    else:
        print("Project charged: none given yet: set project (e.g. \"CHI-123456\") or $CHI_PROJECT; plan mode "
              "needs none")
    others = [p for p in recorded if p != config.project]
    if others:
        print(f"Note: {shown(str(records.path))} records live resources in project {', '.join(others)}; "
              f"this run does not see them, nor does its teardown: set project to {others[-1]} to work on "
              "them")
    return config


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
            root: Path = REPO_ROOT, state: StatePath = None, require_active: bool = False) -> Any:
    """Adopt or create the lease (recorded in ``state``) and return it (None in plan mode).

    It is returned ACTIVE, or — starting more than ``lease_wait_minutes`` from now — as it is
    (PENDING, kept reserved, with the one command that deletes it printed: a class slot outlives the
    students' 08, which keep a lease they adopted; ``require_active=True`` raises ``LeaseNotStarted``
    instead).
    """
    steps = [s for s in provision_plan(config, state) if s.name in ("context", "lease")]
    _print_plan(steps, plan_only)
    if plan_only:
        return None
    chi = run_preflight(config, chi, root)  # the lease is only worth making if launch can succeed
    records = State(state)
    with step(f"creating or reusing lease {config.lease_id or config.lease_name}"):
        lease = ensure_lease(config, chi, records, require_active)
    entry = records.find("lease", config, str(lease.id))
    if entry is not None and entry.keep:  # reserved for a later start, e.g. a class slot a student will adopt
        print(f"To delete it (after the class, or to cancel it), from the lab's folder: "
              f"{delete_command(config, records.path, str(lease.id), lease_only=True)}", flush=True)
    return lease


def launch(config: ChameleonConfig, plan_only: bool = False, chi: ChiApi | None = None,
           setup_node: bool = True, workdir: Path | None = None, *, root: Path = REPO_ROOT,
           state: StatePath = None) -> Node | None:
    """Server on the (adopted or new, ACTIVE) lease, floating IP, SSH, node set-up and the student's Jupyter.

    Returns the Node (None in plan mode); its ``jupyter_url`` is set when ``setup_node``. What it
    creates or adopts is recorded in ``state``. A lease that starts later raises ``LeaseNotStarted``.
    """
    _print_plan(provision_plan(config, state), plan_only)
    if plan_only:
        return None
    chi = run_preflight(config, chi, root)
    records = State(state)
    with step(f"creating or reusing lease {config.lease_id or config.lease_name}"):
        lease = ensure_lease(config, chi, records, require_active=True)
    with step(f"launching or reusing server {config.server_name}"):
        server = ensure_server(config, lease, chi, records)
    address = ensure_floating_ip(server, config, chi, records)
    wait_for_ssh(server, address, config)
    node = Node(server=server, address=address, user=config.ssh_user)
    if setup_node:
        with tempfile.TemporaryDirectory() as tmp:
            node.jupyter_url = run_node_setup(server, config, Path(workdir or tmp), root, address)
        print(f"The lab's Jupyter server on the node: {node.jupyter_url}")
    return node


def provision(config: ChameleonConfig, plan_only: bool = False, chi: ChiApi | None = None, *,
              state: StatePath = None) -> Node | None:
    """The whole sequence in one call: lease, server, floating IP, SSH, node set-up."""
    return launch(config, plan_only=plan_only, chi=chi, state=state)


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
            raise ProvisioningError(msg.NO_SERVER_TO_CONNECT(server=config.server_name))
        address = server.get_floating_ip()
    if not address:
        raise ProvisioningError(msg.NO_IP_TO_CONNECT(server=config.server_name))
    return Node(server=server, address=str(address), user=config.ssh_user)


# servelab.lab.params' target_from for a None target in the node's Jupyter (its container sets the variable)
NODE_TARGET_FROM = "$SERVELAB_TARGET"


def not_in_the_nodes_jupyter(target: str, target_from: str) -> None:
    """08 in the node's Jupyter, ``target`` left unset (the container's ``$SERVELAB_TARGET``: docker): the
    hub's state file is not there, so 08 would copy and delete nothing, stop the node's stacks and pass while
    the node stays reserved. Raises ProvisioningError in one line naming the hub's notebook, before anything
    is done (docs/decisions/2026-12-01-class-day-fourth-pass.md). A target given (a headless run, a Docker
    host of one's own) passes."""
    if target == "docker" and target_from == NODE_TARGET_FROM:
        raise ProvisioningError(msg.IN_THE_NODES_JUPYTER())


def live_records_refusal(state: StatePath = None) -> None:
    """Plan mode (a target other than chameleon) while the state file records a live lease or server:
    08 would copy and delete nothing and pass, and the student would believe the node gone. Raises
    ProvisioningError naming them, in one line (docs/decisions/2026-11-28-class-day-third-pass.md)."""
    records = State(state)
    live = [e for e in records.resources if e.fate == LIVE and e.kind in ("lease", "server")]
    if live:
        named = ", ".join(f"{e.label} (project {e.project}, {e.origin} by this lab)" for e in live)
        raise ProvisioningError(msg.PLAN_MODE_WITH_LIVE_NODE(path=shown(str(records.path)), named=named))


def fetch_work(config: ChameleonConfig | None = None, plan_only: bool = False, chi: ChiApi | None = None, *,
               folder: Path | None = None, limit_s: float = FETCH_LIMIT_S, shell_for: ShellFor | None = None,
               state: StatePath = None, skip: bool = False) -> Fetched | None:
    """Copy the node's ``results/`` and what is saved under ``notebooks/`` to ``results/from-node/`` here,
    within ``limit_s`` (see ``provisioning.fetch``); deletes nothing. 08 runs it before the teardown (plan
    mode refused while ``state`` records a live lease or server: ``live_records_refusal``; ``skip``: 08's
    ``fetch_first = False``, for a node that cannot be reached); any of the lab's notebooks here can run
    ``FETCH_LINE`` while the lease runs. ``config`` defaults to ``configure()``'s (the state file's
    project). Returns what it brought (None: plan mode, skipped, no server).
    """
    config = config if config is not None else configure(show=False)
    folder = Path(folder) if folder is not None else default_folder()
    if plan_only:
        live_records_refusal(state)
        print("Plan mode: on Chameleon this copies the node's results/ and its saved notebooks to "
              f"{shown(str(folder))} "
              f"(up to {limit_s / 60:.0f} min) before anything is deleted")
        return None
    if skip:
        print(f"fetch_first = False: nothing is copied from server {config.server_name}; its results/ and "
              "notebooks go with it at the teardown", flush=True)
        return None
    return fetch_node_work(config, _select(config, chi), folder, limit_s, shell_for)


def release_ip(config: ChameleonConfig, address: str, chi: ChiApi | None = None, force: bool = False) -> bool:
    """Release the project's floating IP ``address`` (``python -m provisioning release-ip --floating-ip
    ADDRESS``, the line 08 prints), at the config's site and project as every other action selects them.
    Refused while it is bound to a server; refused without ``force`` when a reservation holds it or this
    lab did not allocate it for the config's server (``provisioning.floating_ip.releasable``). False (said)
    when the project has no such IP."""
    chi = _select(config, chi)
    with step(f"looking up floating IP {address} in project {config.project}"):
        match = [ip for ip in chi.network.list_floating_ips() if ip.get("floating_ip_address") == address]
    if match and match[0].get("port_id"):
        raise ProvisioningError(msg.RELEASE_IP_BOUND(address=address, port=match[0]["port_id"]))
    refusal = releasable(match[0], config) if match else ""
    if refusal and not force:
        raise ProvisioningError(msg.RELEASE_IP_REFUSED(why=refusal))
    if match:
        with step(f"releasing floating IP {address}"):
            release_by_id(chi, match[0])  # the IP looked at above, by its id
    print(f"Released floating IP {address}" if match
          else f"Project {config.project} at {config.site} has no floating IP {address}: nothing to release")
    return bool(match)


def unbound_ips(config: ChameleonConfig, plan_only: bool = False, chi: ChiApi | None = None) -> list[str]:
    """08, after its teardown: the floating IPs this lab allocated for the config's server and bound to no
    server (a cut run's leak counts against the project's quota until released), with how to release one;
    the project's other unbound IPs only as a count. Returns this lab's addresses. A listing that fails is
    one line, no error."""
    if plan_only:
        print("Plan mode: on Chameleon this lists the floating IPs this lab allocated for your server and "
              "bound to no server (each counts against the project's quota)")
        return []
    try:
        ips = unbound_floating_ips(_select(config, chi))
    except ProvisioningError:
        raise
    except Exception as exc:  # only information: whatever had to be deleted is deleted
        print(msg.UNBOUND_NOT_LISTED(project=config.project, error=describe(exc)))
        return []
    print(unbound_text(ips, config))
    return [str(ip.get("floating_ip_address")) for ip in ips if for_server(ip, config.server_name)]


def teardown(config: ChameleonConfig, plan_only: bool = False, keep_lease: bool = False,
             chi: ChiApi | None = None, *, delete_adopted: bool = False,
             state: StatePath = None, lease_only: bool = False) -> TeardownResult | None:
    """Delete what ``state`` records as created: server (without python-chi's IP release), the floating
    IP it allocated (released through python-chi's network API), then the lease unless ``keep_lease``.

    ``lease_only``: only the lease the config names, no server or floating IP (a class slot's delete line).
    Adopted resources are kept unless ``delete_adopted``; what is kept is printed with until when
    it stays reserved and the command that deletes it. Each is tried whatever happened to the
    others; when any failed, ``TeardownError`` (a ProvisioningError, with ``.result``) names them
    all in one line. Returns what was deleted and kept (None in plan mode).
    """
    if plan_only:
        live_records_refusal(state)
    _print_plan(teardown_plan(config, keep_lease, delete_adopted, state, lease_only), plan_only)
    if plan_only:
        return None
    chi = _select(config, chi)
    with SignalGuard().deferred("the teardown"):  # Ctrl-C (a kernel interrupt in 08) waits for it
        result = run_teardown(config, chi, State(state), keep_lease=keep_lease,
                              delete_adopted=delete_adopted, lease_only=lease_only)
    if result.still_there:  # a lease kept running or reserved must never go unmentioned
        print(result.reserved_text(), flush=True)
    if result.errors:
        raise TeardownError(result)
    return result
