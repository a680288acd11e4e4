"""The server on the reserved node: launched once, reused after, reachable by SSH; its floating IP.

A server found by name is adopted (kept at teardown unless ``delete_adopted``); one launched
here is recorded as created in the state file as soon as it exists. The floating IP is
allocated for this run through python-chi's network API (recorded as created, released at
teardown) unless ``floating_ip`` names one of the project's (adopted, kept): a project's free
IPs are shared by everyone in it (python-chi's ``get_or_create_floating_ip`` would take the
first one, possibly another student's). It is recorded — with its id — before it is
associated, so teardown releases exactly the one this lab allocated
(docs/decisions/2026-11-25-class-day-provisioning.md). ``Server.delete`` is
called with ``delete_ips=False``: python-chi 1.2.10's own release does not release anything
(docs/decisions/2026-11-23-chameleon-lifecycle.md).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from provisioning import times
from provisioning.chi_api import ChiApi
from provisioning.config import ChameleonConfig, ProvisioningError
from provisioning.errors import HINTS, describe, gone, http_status, permanent, step, stop_in, transient
from provisioning.lease import node_reservation_id
from provisioning.state import ADOPTED, CREATED, State
from provisioning.times import show_span, show_time, to_utc
from servelab.core.procs import wait_until

T = TypeVar("T")
# kept from the lease when waiting for the server: deleting it (up to 10 min), its IP and the lease
TEARDOWN_MARGIN_S = 15 * 60
DEFAULT_SERVER_WAIT_S = 20 * 60.0  # python-chi's own default, when a lease's end is not known
WAIT_RETRY_S = 30.0  # between tries of the wait after a failure other than python-chi's own timeout
# python-chi 1.2.10's Server.wait at its timeout: ServiceError(f"Timeout waiting for server to reach ...")
BOOT_TIMEOUT_CLASS, BOOT_TIMEOUT_TEXT = "ServiceError", "Timeout waiting for server to reach "
IP_DESCRIPTION = "serve-system-lab:"  # the Neutron description of an IP this lab allocates, then the server
IP_ATTEMPTS, IP_RETRY_S = 4, 15.0  # allocate/associate a floating IP: tries, and seconds between them
FIP_HINT = ("check the project's floating IP quota in the GUI (Network → Floating IPs): release ones you no "
            "longer use, or name a free one with floating_ip / CHI_FLOATING_IP, and run this step again (the "
            "lease and server are reused)")


def find_server(config: ChameleonConfig, chi: ChiApi) -> Any | None:
    """The project's server named ``config.server_name``, or None (python-chi returns no id then)."""
    if chi.server.get_server_id(config.server_name) is None:
        return None
    return chi.server.get_server(config.server_name)


def create_server(config: ChameleonConfig, lease: Any, chi: ChiApi, state: State) -> Any:
    """Launch the server on the lease's node reservation with the lab's image; record it as created."""
    print(f"Launching server {config.server_name} ({config.image}) on lease {lease.name}")
    server = chi.server.Server(
        config.server_name,
        reservation_id=node_reservation_id(lease, config),
        image_name=config.image,
        key_name=config.key_name or None,
    )
    created = server.submit(wait_for_active=False, show=None, idempotent=True)
    # recorded before anything else can fail; its id once python-chi hands the server back
    state.record("server", config.server_name, None, CREATED, config)
    # python-chi 1.2 returns a Server only when one existed; on a fresh create it returns None
    created = created if created is not None else chi.server.get_server(config.server_name)
    state.record("server", config.server_name, created.id, CREATED, config)
    return created


def server_wait(config: ChameleonConfig, lease: Any = None) -> tuple[float, str]:
    """How long to wait for ACTIVE, and why, in words: ``server_timeout_s`` when set; else until the
    lease's end less ``TEARDOWN_MARGIN_S`` — a slow boot is waited for, not torn down with the boot
    time lost (docs/decisions/2026-11-25-chameleon-robustness.md)."""
    if config.server_timeout_s:
        return float(config.server_timeout_s), f"server_timeout_s={config.server_timeout_s}"
    end = to_utc(getattr(lease, "end_date", None))
    if end is None:
        return DEFAULT_SERVER_WAIT_S, "python-chi's usual limit: the lease's end is not known"
    until = end - timedelta(seconds=TEARDOWN_MARGIN_S)
    return (max(60.0, (until - times.utcnow()).total_seconds()),
            f"as long as the lease allows: until {show_time(until, config.site)}, its end less "
            f"{TEARDOWN_MARGIN_S // 60} min kept for the teardown")


def boot_timed_out(exc: BaseException) -> bool:
    """python-chi's own timeout in ``Server.wait``: 1.2.10 raises ``chi.exception.ServiceError("Timeout
    waiting for server to reach <status> status")`` there, and only there (a failed status read inside
    the wait is a ``ResourceError("Could not refresh server: ...")``); held by test_python_chi_contract."""
    return (any(cls.__name__ == BOOT_TIMEOUT_CLASS for cls in type(exc).__mro__)
            and str(exc).startswith(BOOT_TIMEOUT_TEXT))


def _permanent_wait_error(config: ChameleonConfig, exc: BaseException) -> str:
    """The one line that ends the boot wait at once: the server gone (404), the credentials refused."""
    if gone(exc):
        return (f"server {config.server_name} is gone ({describe(exc)}): it was deleted while the lab waited "
                "for it to boot; run this step again to launch a new one (the lease is reused)")
    hint = HINTS["Forbidden" if http_status(exc) == 403 else "Unauthorized"]
    return (f"Chameleon refused the credentials while waiting for server {config.server_name} "
            f"({describe(exc)}): {hint}; then run this step again (the server is reused)")


def wait_server_active(server: Any, config: ChameleonConfig, lease: Any = None) -> Any:
    """Wait for ACTIVE (a bare-metal boot is slow) as long as ``server_wait`` says, and check it:
    ``wait`` returns on ERROR too. python-chi's own timeout ends the wait (``boot_timed_out``), and so
    does, at once and in one line, a failure no retry mends (``errors.permanent``: the server deleted
    meanwhile, the credentials refused); any other (a connection reset while it reads the status) is
    tried again every ``WAIT_RETRY_S`` until the same deadline, each distinct one printed once: the boot
    goes on meanwhile. A stop (SIGTERM's ``Terminated``, Ctrl-C) is never tried again, even wrapped
    (docs/decisions/2026-11-25-chameleon-robustness.md, 2026-11-28-class-day-third-pass.md)."""
    limit, why = server_wait(config, lease)
    print(f"Waiting for server {config.server_name} to become ACTIVE (bare-metal boots take 10–20 min): "
          f"up to {show_span(limit)}, {why}", flush=True)
    deadline = times.utcnow() + timedelta(seconds=limit)
    seen: set[str] = set()
    left = limit
    while True:
        try:
            server.wait(status="ACTIVE", show="text", timeout=max(1, int(left)))
            break
        except Exception as exc:
            stop = stop_in(exc)
            if stop is not None:  # a library wrapped the stop: it is still a stop
                raise stop from None
            if boot_timed_out(exc):
                until_lease_end = (not config.server_timeout_s
                                   and to_utc(getattr(lease, "end_date", None)) is not None)
                again = ("the lease has no time left for it: delete it (teardown) and reserve a new lease"
                         if until_lease_end else "run this step again to keep waiting (the server is reused)")
                raise ProvisioningError(
                    f"server {config.server_name} did not become ACTIVE within {show_span(limit)} ({why}; "
                    f"{describe(exc)}): {again}") from exc
            if permanent(exc):
                raise ProvisioningError(_permanent_wait_error(config, exc)) from exc
            left = (deadline - times.utcnow()).total_seconds()
            if left <= WAIT_RETRY_S:
                raise ProvisioningError(
                    f"server {config.server_name}'s status could not be read until the wait's end "
                    f"({show_span(limit)}, {why}; the last error: {describe(exc)}): check the server in the "
                    "GUI (Compute → Instances) and run this step again (the server is reused)") from exc
            text = describe(exc)
            if text not in seen:
                seen.add(text)
                print(f"Reading server {config.server_name}'s status failed ({text}); trying again every "
                      f"{WAIT_RETRY_S:.0f} s for up to {show_span(left)} more: the boot goes on meanwhile",
                      flush=True)
            times.sleep(WAIT_RETRY_S)
            left = (deadline - times.utcnow()).total_seconds()
    status = server.status
    if status != "ACTIVE":
        raise ProvisioningError(
            f"server {config.server_name} is {status}, not ACTIVE: delete it (teardown with "
            "keep_lease=True, or the GUI: Compute → Instances) and launch it again")
    return server


def ensure_server(config: ChameleonConfig, lease: Any, chi: ChiApi, state: State) -> Any:
    """Reuse (adopt) the server with this name unless it is in ERROR, else launch it; return it ACTIVE."""
    server = find_server(config, chi)
    if server is None:
        server = create_server(config, lease, chi, state)
    else:
        status = server.status
        if status == "ERROR":
            raise ProvisioningError(
                f"server {config.server_name} exists but is in ERROR; it is not reused. Delete it "
                "(the GUI: Compute → Instances → Delete, or provisioning teardown with keep_lease=True, "
                "and delete_adopted=True when this lab did not create it) and run this step again")
        origin = state.record("server", config.server_name, server.id, ADOPTED, config).origin
        print(f"Reusing server {config.server_name} ({status}; {origin} by this lab)")
    return wait_server_active(server, config, lease)


def ip_description(server_name: str) -> str:
    """The Neutron description of a floating IP this lab allocates for ``server_name``."""
    return f"{IP_DESCRIPTION} {server_name}"


def allocate_floating_ip(chi: ChiApi, server_name: str = "") -> dict[str, Any]:
    """A new floating IP from the public network, as python-chi 1.2.10's own allocation makes it
    (``get_or_create_floating_ip`` when no IP is free: neutron ``create_floatingip`` on the network
    ``get_network_id(PUBLIC_NETWORK)``); python-chi has no call that always allocates. Its Neutron
    ``description`` names the lab and the server, so a leaked one is recognised (``unbound_floating_ips``)."""
    network_id = chi.network.get_network_id(chi.network.PUBLIC_NETWORK)
    body: dict[str, Any] = {"floatingip": {"floating_network_id": network_id}}
    if server_name:
        body["floatingip"]["description"] = ip_description(server_name)
    return dict(chi.network.neutron().create_floatingip(body)["floatingip"])


def for_server(ip: dict[str, Any], server_name: str) -> bool:
    """This lab allocated ``ip`` for ``server_name`` (its description), and no reservation holds it."""
    return str(ip.get("description") or "") == ip_description(server_name) and not reservation_of(ip)


def reservation_of(ip: dict[str, Any]) -> str:
    """The Blazar reservation holding ``ip`` (its Neutron tag ``reservation:<id>``), else ""."""
    tags = [str(tag) for tag in ip.get("tags") or []]
    return next((tag.split(":", 1)[1] for tag in tags if tag.startswith("reservation:")), "")


def unbound_floating_ips(chi: ChiApi) -> list[dict[str, Any]]:
    """The project's floating IPs bound to no port: each counts against the project's quota until it is
    released. Some may be kept on purpose (an instructor's, a classmate's between two runs)."""
    return [dict(ip) for ip in chi.network.list_floating_ips() if not ip.get("port_id")]


def release_line(config: ChameleonConfig) -> str:
    """The command that releases one of this lab's unbound IPs for ``config``'s server (08 prints it)."""
    return (f"python -m provisioning release-ip --project {config.project} --site {config.site} "
            f"--server-name {config.server_name} --floating-ip ADDRESS")


def unbound_text(ips: list[dict[str, Any]], config: ChameleonConfig) -> str:
    """What 08 prints about the project's unbound IPs (``unbound_floating_ips``): those this lab allocated
    for ``config``'s server (``for_server``), with how to release one; every other one only as a count (a
    classmate's between two steps, an instructor's, one a reservation holds: not the student's to release)."""
    ours = [str(ip.get("floating_ip_address")) for ip in ips if for_server(ip, config.server_name)]
    others = len(ips) - len(ours)
    lines = []
    if ours:
        lines.append(f"Floating IPs this lab allocated for server {config.server_name} and bound to no "
                     f"server ({len(ours)}; each counts against project {config.project}'s floating IP quota "
                     f"until released): {', '.join(ours)}. Release one, from the lab's folder: "
                     f"{release_line(config)}")
    else:
        lines.append(f"No floating IP this lab allocated for server {config.server_name} is left unbound.")
    if others:
        many = others > 1
        lines.append(f"{others} other floating IP{'s' if many else ''} of project {config.project} "
                     f"{'are' if many else 'is'} bound to no server: not listed, and not yours to release (a "
                     "classmate's between two steps, an instructor's, or held by a reservation)")
    return "\n".join(lines)


def releasable(ip: dict[str, Any], config: ChameleonConfig) -> str:
    """Why ``release-ip`` refuses ``ip`` without ``--force`` ("" when it does not): a reservation holds it,
    or this lab did not allocate it for ``config``'s server (its Neutron description says for whom)."""
    address = ip.get("floating_ip_address")
    reservation = reservation_of(ip)
    if reservation:
        return (f"floating IP {address} is held by reservation {reservation} (a lease's floating IP "
                "reservation): releasing it takes it from that lease")
    if for_server(ip, config.server_name):
        return ""
    about = str(ip.get("description") or "")
    whose = (f"for server {about[len(IP_DESCRIPTION):].strip()}" if about.startswith(IP_DESCRIPTION)
             else f"described {about!r}" if about else "with no description")
    return (f"floating IP {address} was not allocated by this lab for server {config.server_name} ({whose}): "
            "it may be a classmate's between two steps or one an instructor keeps")


def given_floating_ip(config: ChameleonConfig, chi: ChiApi) -> dict[str, Any]:
    """The project's floating IP ``config.floating_ip``; refused when it is bound to another port."""
    hint = (f"give a free floating IP of project {config.project} (GUI: Network → Floating IPs) or leave "
            "floating_ip / CHI_FLOATING_IP empty to allocate one for this run")
    with step(f"looking up floating IP {config.floating_ip} in project {config.project}", hint):
        fip = chi.network.get_floating_ip(config.floating_ip)
    if fip.get("port_id"):
        raise ProvisioningError(
            f"floating IP {config.floating_ip} is already in use (bound to port {fip['port_id']}, another "
            f"server's, possibly another student's): {hint}")
    return dict(fip)


def _tried_again(what: str, action: Callable[[], T], hint: str) -> T:
    """``action()`` as one ``step``, tried again up to ``IP_ATTEMPTS`` times, ``IP_RETRY_S`` apart, when it
    fails in a way that may pass (``errors.transient``: a connection reset, a 503): right after a 10-20 min
    boot, one such error must not tear the run down. Anything else fails at once, in one line."""
    for attempt in range(1, IP_ATTEMPTS + 1):
        try:
            with step(what, hint):
                return action()
        except ProvisioningError as exc:
            cause = exc.__cause__
            if cause is None or not transient(cause) or attempt == IP_ATTEMPTS:
                raise
            print(f"{what[0].upper()}{what[1:]} failed ({describe(cause)}); trying again in "
                  f"{IP_RETRY_S:.0f} s (attempt {attempt} of {IP_ATTEMPTS})", flush=True)
            times.sleep(IP_RETRY_S)
    raise AssertionError("unreachable")  # the loop returns or raises


def _allocate(chi: ChiApi, server_name: str) -> dict[str, Any]:
    """``allocate_floating_ip``, tried again on a transient failure; a try whose answer was lost may have
    allocated the IP all the same: a later try takes that one (unbound, described for this server)."""
    tries: list[int] = []

    def attempt() -> dict[str, Any]:
        lost = [ip for ip in unbound_floating_ips(chi) if for_server(ip, server_name)] if tries else []
        if lost:
            print(f"Floating IP {lost[0].get('floating_ip_address')} was allocated by a try that failed: "
                  "using it", flush=True)
            return lost[0]
        tries.append(1)
        return allocate_floating_ip(chi, server_name)

    return _tried_again("allocating a floating IP for this run", attempt, FIP_HINT)


def ensure_floating_ip(server: Any, config: ChameleonConfig, chi: ChiApi, state: State) -> str:
    """The server's floating IP; when it has none, ``config.floating_ip`` or a new one, associated.

    The IP is recorded (address, id; created when allocated here, adopted when given) before it
    is associated, so a failed association still leaves a record for teardown. python-chi's
    ``associate_floating_ip(fip)`` returns the address it attached (1.2.x: the
    ``floating_ip_address`` of the updated IP) and raises when no port can take it. The allocation
    and the association are tried again when they fail in a way that may pass (``_tried_again``).
    """
    address = server.get_floating_ip()
    if address:
        state.record("floating_ip", str(address), None, ADOPTED, config)  # created if recorded so
        print(f"Server already has floating IP {address}")
        return str(address)
    if config.floating_ip:
        fip, origin, how = given_floating_ip(config, chi), ADOPTED, "given by floating_ip; kept at teardown"
    else:
        fip = _allocate(chi, config.server_name)
        origin, how = CREATED, "allocated for this run; released at teardown"
    wanted = str(fip["floating_ip_address"])
    state.record("floating_ip", wanted, str(fip["id"]), origin, config)
    address = _tried_again(f"associating floating IP {wanted} with server {server.name}",
                           lambda: server.associate_floating_ip(wanted), FIP_HINT)
    if not address:
        raise ProvisioningError(f"no floating IP was attached to server {server.name}: {FIP_HINT}")
    print(f"Associated floating IP {address} ({how})")
    return str(address)


def wait_for_ssh(server: Any, address: str, config: ChameleonConfig) -> None:
    """Wait until port 22 answers; python-chi raises on timeout, re-raised with what to check."""
    try:
        server.check_connectivity(host=address, port=22, timeout=config.ssh_timeout_s, show="text")
    except Exception as exc:
        raise ProvisioningError(
            f"SSH on {address}:22 did not answer within {config.ssh_timeout_s} s ({describe(exc)}); "
            "check that the project's security groups allow SSH and that the server booted (GUI console)"
        ) from exc


def delete_server(server: Any, config: ChameleonConfig, chi: ChiApi, timeout: float = 600.0) -> None:
    """Delete the server without python-chi's floating IP release (see the module); wait until it is gone."""
    server.delete(delete_ips=False)
    wait_until(lambda: chi.server.get_server_id(config.server_name) is None,
               f"server {config.server_name} to be deleted", timeout, interval=5.0)


def release_floating_ip(address: str, fip_id: str | None, chi: ChiApi) -> bool:
    """Release (deallocate) the project's floating IP with this id (else address); False when it is gone.

    Through python-chi's network API (neutron ``delete_floatingip`` by the IP's id), never
    ``Server.delete(delete_ips=True)``.
    """
    ips = list(chi.network.list_floating_ips())
    match = [ip for ip in ips if (fip_id and ip.get("id") == fip_id)
             or (not fip_id and ip.get("floating_ip_address") == address)]
    if not match:
        return False
    chi.network.deallocate_floating_ip(str(match[0]["floating_ip_address"]))
    return True
