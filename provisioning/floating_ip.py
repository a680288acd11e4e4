"""The server's floating IP: allocated for this run, recorded, associated; released by its id at teardown.

The IP is allocated for this run through python-chi's network API (recorded as created, released at
teardown) unless ``floating_ip`` names one of the project's (adopted, kept): a project's free IPs are shared
by everyone in it (python-chi's ``get_or_create_floating_ip`` would take the first one, possibly another
student's). A record is written before the allocation is sent (``State.begin``, named ``pending_ip_name``:
a stop during the request or its retry pause leaves it, and the teardown releases the unbound IPs the lab
described for the server), then with the IP's id, before it is associated
(docs/decisions/2026-11-25-class-day-provisioning.md). The association is neutronclient's
``update_floatingip`` per port of the server, as python-chi 1.2.10's ``associate_floating_ip`` does it
through openstacksdk, but with Neutron's errors as Neutron raised them: python-chi swallows them per port
and raises one ``ResourceError`` without a cause, so a 503 could not be told from a port that cannot route.
An IP is released by its id only; a record without one is resolved by its address first and refused when
that address is bound or described for another server (docs/decisions/2026-12-01-class-day-fourth-pass.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from provisioning import messages as msg
from provisioning import times
from provisioning.chi_api import ChiApi
from provisioning.config import ChameleonConfig, ProvisioningError
from provisioning.errors import describe, gone, step, stop_in, transient
from provisioning.state import ADOPTED, State

T = TypeVar("T")
IP_DESCRIPTION = "serve-system-lab:"  # the Neutron description of an IP this lab allocates, then the server
IP_ATTEMPTS, IP_RETRY_S = 4, 15.0  # allocate/associate a floating IP: tries, and seconds between them
FIP_HINT = msg.FIP_HINT


class NotOurs(ProvisioningError):
    """An IP found by the address of a record without an id is not the one recorded: not released."""


def pending_ip_name(server_name: str) -> str:
    """The state file's name for an IP whose allocation was sent and not answered (no address yet)."""
    return f"for server {server_name}"


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
        return msg.RELEASE_IP_HELD(address=address, reservation=reservation)
    if for_server(ip, config.server_name):
        return ""
    about = str(ip.get("description") or "")
    whose = (f"for server {about[len(IP_DESCRIPTION):].strip()}" if about.startswith(IP_DESCRIPTION)
             else f"described {about!r}" if about else "with no description")
    return msg.RELEASE_IP_NOT_YOURS(address=address, server=config.server_name, whose=whose)


def given_floating_ip(config: ChameleonConfig, chi: ChiApi) -> dict[str, Any]:
    """The project's floating IP ``config.floating_ip``; refused when it is bound to another port."""
    hint = msg.GIVEN_IP_HINT(project=config.project)
    with step(f"looking up floating IP {config.floating_ip} in project {config.project}", hint):
        fip = chi.network.get_floating_ip(config.floating_ip)
    if fip.get("port_id"):
        raise ProvisioningError(msg.GIVEN_IP_BOUND(address=config.floating_ip, port=fip["port_id"],
                                                   hint=hint))
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
            print(msg.FIP_RETRY(What=f"{what[0].upper()}{what[1:]}", error=describe(cause),
                                every=f"{IP_RETRY_S:.0f}", attempt=attempt, attempts=IP_ATTEMPTS), flush=True)
            times.sleep(IP_RETRY_S)
    raise AssertionError("unreachable")  # the loop returns or raises


def _allocate(chi: ChiApi, server_name: str, look_first: bool = False) -> dict[str, Any]:
    """``allocate_floating_ip``, tried again on a transient failure; a try whose answer was lost may have
    allocated the IP all the same: a later try takes that one (unbound, described for this server), and so
    does the first when ``look_first`` (a run cut during its allocation left a pending record)."""
    tries: list[int] = [1] if look_first else []

    def attempt() -> dict[str, Any]:
        lost = [ip for ip in unbound_floating_ips(chi) if for_server(ip, server_name)] if tries else []
        if lost:
            print(msg.FIP_LOST_ANSWER(address=lost[0].get("floating_ip_address")), flush=True)
            return lost[0]
        tries.append(1)
        return allocate_floating_ip(chi, server_name)

    return _tried_again("allocating a floating IP for this run", attempt, FIP_HINT)


def associate_floating_ip(chi: ChiApi, server: Any, fip: dict[str, Any]) -> str:
    """Bind ``fip`` to the first of the server's ports that takes it (neutronclient's ``update_floatingip``;
    python-chi's own tries each port the same way); the address bound. A transient failure is raised at
    once, for ``_tried_again``; a port that refuses it is passed over, and the last refusal raised."""
    neutron = chi.network.neutron()
    ports = list(neutron.list_ports(device_id=server.id)["ports"])
    refused: Exception | None = None
    for port in ports:
        try:
            updated = neutron.update_floatingip(fip["id"], {"floatingip": {"port_id": port["id"]}})
            return str(updated["floatingip"]["floating_ip_address"])
        except Exception as exc:
            if stop_in(exc) is not None or transient(exc):
                raise
            refused = exc  # this port cannot route to it: the next one may
    if refused is not None:
        raise refused
    raise ProvisioningError(msg.NO_PORT_FOR_IP(server=server.name, address=fip["floating_ip_address"]))


def ensure_floating_ip(server: Any, config: ChameleonConfig, chi: ChiApi, state: State) -> str:
    """The server's floating IP; when it has none, ``config.floating_ip`` or a new one, associated.

    A new IP is recorded before its allocation is sent (pending, then with its address and id), a given
    one (adopted) before it is associated, so a stop or a failed association still leaves a record for
    teardown. The allocation and the association are tried again when they fail in a way that may pass
    (``_tried_again``).
    """
    address = server.get_floating_ip()
    if address:
        state.record("floating_ip", str(address), None, ADOPTED, config)  # created if recorded so
        print(f"Server already has floating IP {address}")
        return str(address)
    if config.floating_ip:
        fip, how = given_floating_ip(config, chi), "given by floating_ip; kept at teardown"
        state.record("floating_ip", str(fip["floating_ip_address"]), str(fip["id"]), ADOPTED, config)
    else:
        name = pending_ip_name(config.server_name)
        cut = any(e.pending and e.name == name for e in state.live("floating_ip", config))
        entry = state.begin("floating_ip", name, config)
        fip = _allocate(chi, config.server_name, look_first=cut)
        state.settle(entry, str(fip["floating_ip_address"]), str(fip["id"]))
        how = "allocated for this run; released at teardown"
    wanted = str(fip["floating_ip_address"])
    address = _tried_again(f"associating floating IP {wanted} with server {server.name}",
                           lambda: associate_floating_ip(chi, server, fip), FIP_HINT)
    if not address:
        raise ProvisioningError(msg.NO_IP_ATTACHED(server=server.name))
    print(f"Associated floating IP {address} ({how})")
    return str(address)


def release_by_id(chi: ChiApi, ip: dict[str, Any]) -> bool:
    """Release ``ip`` by its id (neutronclient's ``delete_floatingip``, what python-chi's
    ``deallocate_floating_ip`` calls after looking the address up); False when Neutron says it is gone."""
    try:
        chi.network.neutron().delete_floatingip(str(ip["id"]))
    except Exception as exc:
        if gone(exc):
            return False
        raise
    return True


def _unrecorded_refusal(ip: dict[str, Any], server_name: str) -> str:
    """Why an IP found only by the address of a record without an id is not released ("" when it is)."""
    address = ip.get("floating_ip_address")
    if ip.get("port_id"):
        return msg.IP_RECORD_BOUND_ELSEWHERE(address=address, port=ip["port_id"])
    about = str(ip.get("description") or "")
    if about.startswith(IP_DESCRIPTION) and about != ip_description(server_name):
        return msg.IP_RECORD_FOR_OTHER_SERVER(address=address, other=about[len(IP_DESCRIPTION):].strip())
    return ""


def release_floating_ip(address: str, fip_id: str | None, chi: ChiApi, server_name: str = "") -> bool:
    """Release the project's floating IP with this id; False when it is gone. A record without an id (the
    IP of a server the lab adopted) is resolved by ``address`` first and refused (a ProvisioningError) when
    the address is bound or described for another server than ``server_name`` (``NotOurs``). Never through
    ``Server.delete(delete_ips=True)``."""
    ips = [dict(ip) for ip in chi.network.list_floating_ips()]
    if fip_id:
        match = next((ip for ip in ips if ip.get("id") == fip_id), None)
    else:
        match = next((ip for ip in ips if ip.get("floating_ip_address") == address), None)
        refusal = _unrecorded_refusal(match, server_name) if match is not None else ""
        if refusal:
            raise NotOurs(refusal)
    return release_by_id(chi, match) if match is not None else False


def release_pending(chi: ChiApi, server_name: str) -> list[dict[str, Any]]:
    """For a record whose allocation was never answered: release the unbound IPs this lab described for
    ``server_name`` (the one that allocation made, if it did); the IPs released."""
    found = [ip for ip in unbound_floating_ips(chi) if for_server(ip, server_name)]
    return [ip for ip in found if release_by_id(chi, ip)]
