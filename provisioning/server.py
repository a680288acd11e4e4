"""The server on the reserved node: launched once, reused after, reachable by SSH.

A server found by name is adopted (kept at teardown unless ``delete_adopted``); one launched
here is recorded as created in the state file before Nova is asked, and with its id after.
Its floating IP: ``provisioning.floating_ip``. ``Server.delete`` is called with
``delete_ips=False``: python-chi 1.2.10's own release does not release anything
(docs/decisions/2026-11-23-chameleon-lifecycle.md).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from provisioning import messages as msg
from provisioning import times
from provisioning.chi_api import ChiApi
from provisioning.config import ChameleonConfig, ProvisioningError
from provisioning.errors import HINTS, describe, gone, http_status, permanent, stop_in, transient
from provisioning.lease import node_reservation_id
from provisioning.state import ADOPTED, State
from provisioning.times import show_span, show_time, to_utc
from servelab.core.procs import wait_until

# kept from the lease when waiting for the server: deleting it (up to 10 min), its IP and the lease
TEARDOWN_MARGIN_S = 15 * 60
DEFAULT_SERVER_WAIT_S = 20 * 60.0  # python-chi's own default, when a lease's end is not known
WAIT_RETRY_S = 30.0  # between tries of the wait after a failure other than python-chi's own timeout
# python-chi 1.2.10's Server.wait at its timeout: ServiceError(f"Timeout waiting for server to reach ...")
BOOT_TIMEOUT_CLASS, BOOT_TIMEOUT_TEXT = "ServiceError", "Timeout waiting for server to reach "


def find_server(config: ChameleonConfig, chi: ChiApi) -> Any | None:
    """The project's server named ``config.server_name``, or None (python-chi returns no id then)."""
    if chi.server.get_server_id(config.server_name) is None:
        return None
    return chi.server.get_server(config.server_name)


def create_server(config: ChameleonConfig, lease: Any, chi: ChiApi, state: State) -> Any:
    """Launch the server on the lease's node reservation with the lab's image; record it as created, before
    Nova is asked (``State.begin``: a stop while the request is in flight leaves a record that teardown
    matches by the server's name), then with its id."""
    print(f"Launching server {config.server_name} ({config.image}) on lease {lease.name}")
    server = chi.server.Server(
        config.server_name,
        reservation_id=node_reservation_id(lease, config),
        image_name=config.image,
        key_name=config.key_name or None,
    )
    entry = state.begin("server", config.server_name, config)
    created = server.submit(wait_for_active=False, show=None, idempotent=True)
    # python-chi 1.2 returns a Server only when one existed; on a fresh create it returns None
    created = created if created is not None else chi.server.get_server(config.server_name)
    state.settle(entry, config.server_name, created.id)
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
        return msg.SERVER_GONE_DURING_BOOT(server=config.server_name, error=describe(exc))
    hint = HINTS["Forbidden" if http_status(exc) == 403 else "Unauthorized"]
    return msg.SERVER_WAIT_REFUSED(server=config.server_name, error=describe(exc), hint=hint)


def wait_server_active(server: Any, config: ChameleonConfig, lease: Any = None) -> Any:
    """Wait for ACTIVE (a bare-metal boot is slow) as long as ``server_wait`` says, and check it:
    ``wait`` returns on ERROR too. python-chi's own timeout ends the wait (``boot_timed_out``), and so
    does, at once and in one line, any failure ``errors.transient`` does not call passing (the server
    deleted meanwhile, the credentials refused, python-chi's "Multiple matching servers"); a transient one
    (a connection reset, a 503 while it reads the status) is tried again every ``WAIT_RETRY_S`` until the
    same deadline, each distinct one printed once: the boot goes on meanwhile. A stop (SIGTERM's
    ``Terminated``, Ctrl-C) is never tried again, even wrapped (docs/decisions/2026-11-25-chameleon-
    robustness.md, 2026-11-28-class-day-third-pass.md, 2026-12-01-class-day-fourth-pass.md)."""
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
                raise ProvisioningError(msg.BOOT_TIMED_OUT(
                    server=config.server_name, limit=show_span(limit), why=why, error=describe(exc),
                    again=again)) from exc
            if permanent(exc):
                raise ProvisioningError(_permanent_wait_error(config, exc)) from exc
            if not transient(exc):  # python-chi's "Multiple matching servers", a bug: no retry mends it
                raise ProvisioningError(msg.BOOT_WAIT_HOPELESS(server=config.server_name,
                                                               error=describe(exc))) from exc
            left = (deadline - times.utcnow()).total_seconds()
            if left <= WAIT_RETRY_S:
                raise ProvisioningError(msg.SERVER_STATUS_UNREADABLE(
                    server=config.server_name, limit=show_span(limit), why=why, error=describe(exc))) from exc
            text = describe(exc)
            if text not in seen:
                seen.add(text)
                print(msg.SERVER_STATUS_RETRY(server=config.server_name, error=text,
                                              every=f"{WAIT_RETRY_S:.0f}", left=show_span(left)), flush=True)
            times.sleep(WAIT_RETRY_S)
            left = (deadline - times.utcnow()).total_seconds()
    status = server.status
    if status != "ACTIVE":
        raise ProvisioningError(msg.SERVER_NOT_ACTIVE(server=config.server_name, status=status))
    return server


def ensure_server(config: ChameleonConfig, lease: Any, chi: ChiApi, state: State) -> Any:
    """Reuse (adopt) the server with this name unless it is in ERROR, else launch it; return it ACTIVE."""
    server = find_server(config, chi)
    if server is None:
        server = create_server(config, lease, chi, state)
    else:
        status = server.status
        if status == "ERROR":
            raise ProvisioningError(msg.SERVER_IN_ERROR(server=config.server_name))
        origin = state.record("server", config.server_name, server.id, ADOPTED, config).origin
        print(f"Reusing server {config.server_name} ({status}; {origin} by this lab)")
    return wait_server_active(server, config, lease)


def wait_for_ssh(server: Any, address: str, config: ChameleonConfig) -> None:
    """Wait until port 22 answers; python-chi raises on timeout, re-raised with what to check."""
    try:
        server.check_connectivity(host=address, port=22, timeout=config.ssh_timeout_s, show="text")
    except Exception as exc:
        raise ProvisioningError(msg.NO_SSH(address=address, limit=config.ssh_timeout_s,
                                           error=describe(exc))) from exc


def delete_server(server: Any, config: ChameleonConfig, chi: ChiApi, timeout: float = 600.0) -> None:
    """Delete the server without python-chi's floating IP release (see the module); wait until it is gone."""
    server.delete(delete_ips=False)
    wait_until(lambda: chi.server.get_server_id(config.server_name) is None,
               f"server {config.server_name} to be deleted", timeout, interval=5.0)
