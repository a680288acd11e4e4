"""The lease: one gpu_p100 node, named after the student, created once (now or ahead) and reused after.

A lease is adopted (found and reused, kept at teardown) when one with ``lease_name`` is live,
or when ``lease_id`` names it; otherwise it is created — starting now, or at ``lease_start``
(an advance reservation) — and recorded as created in the state file *before* Blazar is asked
(``State.begin``: a stop while the request is in flight leaves a record the teardown resolves by the
lease's name), with its ``keep`` when it starts beyond the wait. Waiting follows the lease's start
time, not a fixed timeout: a lease starting within ``lease_wait_minutes`` is waited for until its
start plus ``lease_timeout_s``, with the time left printed; one starting later is left reserved
(nothing deleted) after one status read, with one line saying when.
Reasons: docs/decisions/2026-11-23-chameleon-lifecycle.md, 2026-12-01-class-day-fourth-pass.md.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from provisioning import messages as msg
from provisioning import times
from provisioning.chi_api import ChiApi
from provisioning.config import ChameleonConfig, ProvisioningError
from provisioning.errors import describe, gone, hint_for, permanent, stop_in, transient
from provisioning.state import ADOPTED, CREATED, GONE, State

# a lease in one of these states is gone: a new one with the same name is needed
ENDED = ("TERMINATED", "DELETED")
POLL_S = 30.0  # between status reads (each is one Blazar call in python-chi)
START_NOW_WITHIN = timedelta(minutes=1)  # a start closer than this is sent as "now"
READ_ATTEMPTS, READ_RETRY_S = 3, 10.0  # one status read outside a wait: tries on a transient failure, apart


class LeaseNotStarted(ProvisioningError):
    """The lease starts later than this call waits for; it is kept."""


def lease_label(lease: Any) -> str:
    return f"lease {lease.name}"


def read_status(lease: Any, attempts: int = READ_ATTEMPTS) -> str | None:
    """``lease.status`` (a Blazar read in python-chi), tried again ``READ_RETRY_S`` apart up to ``attempts``
    times when it fails in a way that may pass (``errors.transient``: a 503 when a class's 40 teardowns come
    at once); the last failure is raised, a stop at once."""
    for attempt in range(1, attempts + 1):
        try:
            status: str | None = lease.status
            return status
        except Exception as exc:
            stop = stop_in(exc)
            if stop is not None:
                raise stop from None
            if attempt == attempts or not transient(exc):
                raise
            times.sleep(READ_RETRY_S)
    raise AssertionError("unreachable")  # the loop returns or raises


def find_lease(config: ChameleonConfig, chi: ChiApi, leases: list[Any] | None = None,
               status: Callable[[Any], str | None] = read_status) -> Any | None:
    """The live lease ``lease_id`` names, else the project's live lease named ``lease_name``; or None.

    Ended leases are skipped (Blazar keeps them listed); two live leases with one name are
    refused because every later look-up by name would be ambiguous. Status is read (``status``) only
    for the matching leases (each read is a Blazar call).
    """
    leases = list(chi.lease.list_leases()) if leases is None else leases
    if config.lease_id:
        by_id = [lease for lease in leases if str(lease.id) == config.lease_id]
        ended = status(by_id[0]) if by_id else None
        if ended in ENDED:
            raise ProvisioningError(msg.LEASE_ENDED_BY_ID(lease_id=config.lease_id, name=by_id[0].name,
                                                          status=ended))
        return by_id[0] if by_id else None
    matches = [lease for lease in leases if lease.name == config.lease_name and status(lease) not in ENDED]
    if len(matches) > 1:
        raise ProvisioningError(msg.TWO_LEASES_ONE_NAME(count=len(matches), name=config.lease_name))
    return matches[0] if matches else None


def start_and_end(config: ChameleonConfig) -> tuple[Any, Any]:
    """The new lease's (start, end) as aware UTC; (None, None) to start now for ``duration``."""
    start = config.start_at
    if start is None:
        return None, None
    now = times.utcnow()
    if start <= now + START_NOW_WITHIN:
        if now - start > timedelta(seconds=config.lease_timeout_s):
            raise ProvisioningError(msg.LEASE_START_PAST(start=times.show_time(start, config.site)))
        return None, None
    return start, start + config.duration


def later_than_the_wait(start: Any, config: ChameleonConfig) -> str:
    """The ``keep`` of a lease starting beyond ``lease_wait_minutes`` (reserved for a later run: teardown
    keeps it until it starts), else ""."""
    if start is None or start - times.utcnow() <= timedelta(minutes=config.lease_wait_minutes):
        return ""
    return f"starts {start:%Y-%m-%d %H:%M} UTC"


def create_lease(config: ChameleonConfig, chi: ChiApi, state: State) -> Any:
    """Submit a new lease for ``node_count`` nodes of ``node_type``, now or at ``lease_start``; record it.

    Recorded before Blazar is asked (``State.begin``), with its ``keep`` when it starts beyond the wait,
    and completed with the id after. A request that failed may still have made the lease (an answer lost
    on the way back): one look-up by name finds it, and it is used. python-chi 1.2.10's
    ``Lease(duration=...)`` ends ``duration`` after *now* even with a ``start_date``, so an advance
    reservation passes ``end_date`` instead.
    """
    start, end = start_and_end(config)
    when = (f"from {times.show_time(start, config.site)} to {times.show_time(end, config.site)}"
            if start is not None else f"from now for {config.duration_text}")
    print(f"Creating lease {config.lease_name}: {config.node_count} × {config.node_type} at "
          f"{config.site}, {when}")
    if start is None:
        lease = chi.lease.Lease(config.lease_name, duration=config.duration)
    else:
        lease = chi.lease.Lease(config.lease_name, start_date=start, end_date=end)
    lease.add_node_reservation(amount=config.node_count, node_type=config.node_type)
    entry = state.begin("lease", config.lease_name, config, keep=later_than_the_wait(start, config))
    # wait ourselves (progress with the time left, a deadline from the start time, a status check)
    try:
        lease.submit(wait_for_active=False, show=None, idempotent=False)
    except Exception as exc:  # python-chi raises ResourceError("Unable to make lease") and logs why
        try:
            made = find_lease(config, chi)
        except Exception:  # not known: the record stays pending, and the teardown looks again
            made = None
        else:
            if made is None:
                state.set_fate(entry, GONE, f"not created ({describe(exc)})")
        if made is not None:
            print(msg.LEASE_MADE_ANYWAY(name=config.lease_name, error=describe(exc)), flush=True)
            state.settle(entry, made.name, str(made.id))
            return made
        raise ProvisioningError(msg.LEASE_NOT_MADE(name=config.lease_name, error=describe(exc),
                                                   node_type=config.node_type, site=config.site,
                                                   when=when)) from exc
    state.settle(entry, lease.name, lease.id)
    return lease


def _status_line(lease: Any, status: str, start: Any, deadline: Any, config: ChameleonConfig) -> str:
    now = times.utcnow()
    if start is not None and start > now:
        left = times.show_span((start - now).total_seconds())
        return f"Lease {lease.name} is {status}: starts in {left} ({times.show_time(start, config.site)})"
    return (f"Lease {lease.name} is {status}, waiting for ACTIVE (up to "
            f"{times.show_span((deadline - now).total_seconds())} more)")


def _read_status(lease: Any, config: ChameleonConfig, deadline: Any, seen: set[str]) -> Any:
    """``lease.status`` (a Blazar read in python-chi). A failure that may pass (a connection reset, a 503)
    is printed once and tried again every ``POLL_S`` until ``deadline`` (``None``: it is not tried again,
    and None is returned); a stop is raised as it is, and a failure no retry mends (``errors.permanent``:
    401/403/404) ends the wait at once, in one line."""
    while True:
        try:
            return lease.status
        except Exception as exc:
            stop = stop_in(exc)
            if stop is not None:
                raise stop from None
            if gone(exc):
                raise ProvisioningError(msg.LEASE_GONE(name=lease.name, error=describe(exc))) from exc
            if permanent(exc):
                advice = hint_for(exc) or "check it in the GUI (Reservations → Leases)"
                raise ProvisioningError(msg.LEASE_STATUS_REFUSED(name=lease.name, error=describe(exc),
                                                                 advice=advice)) from exc
            if deadline is None:
                print(msg.LEASE_STATUS_NOT_READ_AHEAD(name=lease.name, error=describe(exc)), flush=True)
                return None
            if times.utcnow() >= deadline:
                raise ProvisioningError(msg.LEASE_STATUS_UNREADABLE(name=lease.name,
                                                                    error=describe(exc))) from exc
            text = describe(exc)
            if text not in seen:
                seen.add(text)
                print(msg.LEASE_STATUS_RETRY(name=lease.name, error=text, every=f"{POLL_S:.0f}"), flush=True)
            times.sleep(POLL_S)


def _not_active(lease: Any, status: str) -> ProvisioningError:
    return ProvisioningError(msg.LEASE_NOT_ACTIVE(name=lease.name, status=status))


def wait_lease_active(lease: Any, config: ChameleonConfig, state: State, require_active: bool = True) -> Any:
    """Wait until ACTIVE, up to ``lease_timeout_s`` after its start; return it ACTIVE.

    A lease starting more than ``lease_wait_minutes`` from now is marked kept in the state file
    (reserved for a later run) *before* its status is read once, and returned as it is, or —
    ``require_active`` — stops with a ``LeaseNotStarted`` that says when to run again: a read that fails
    is not tried again until its start. ERROR is an error (python-chi's own ``wait`` returns on ERROR
    too, so it is never relied on). Within the wait a status read that fails is tried again
    (``_read_status``) until the wait's end.
    """
    start = times.to_utc(getattr(lease, "start_date", None))
    now = times.utcnow()
    deadline = max(start or now, now) + timedelta(seconds=config.lease_timeout_s)
    seen: set[str] = set()
    later = later_than_the_wait(start, config)
    if later:  # recorded kept before anything can fail: a stop in the read below leaves it kept
        state.record("lease", lease.name, lease.id, ADOPTED, config, keep=later)
    status = _read_status(lease, config, None if later else deadline, seen)
    if later and start is not None and status != "ACTIVE":
        if status == "ERROR" or status in ENDED:
            raise _not_active(lease, str(status))
        left = times.show_span((start - now).total_seconds())
        line = msg.LEASE_LATER(name=lease.name, start=times.show_time(start, config.site), left=left,
                               minutes=config.lease_wait_minutes)
        if require_active:
            raise LeaseNotStarted(line)
        print(line, flush=True)
        return lease
    last_print = None
    while status != "ACTIVE":
        if status == "ERROR" or status in ENDED:
            raise _not_active(lease, str(status))
        now = times.utcnow()
        if now >= deadline:
            raise ProvisioningError(msg.LEASE_STILL_PENDING(name=lease.name, status=status,
                                                            wait=times.show_span(config.lease_timeout_s)))
        remaining = ((start - now) if start is not None and start > now else (deadline - now)).total_seconds()
        every = 60.0 if remaining <= 600 else 300.0  # the time left: each minute in the last ten
        if last_print is None or (now - last_print).total_seconds() >= every:
            print(_status_line(lease, status, start, deadline, config), flush=True)
            last_print = now
        times.sleep(min(POLL_S, max(1.0, remaining)))
        status = _read_status(lease, config, deadline, seen)
    print(f"Lease {lease.name} is ACTIVE", flush=True)
    state.record("lease", lease.name, lease.id, ADOPTED, config, keep="")  # used now: teardown may delete it
    return lease


def ensure_lease(config: ChameleonConfig, chi: ChiApi, state: State, require_active: bool = True) -> Any:
    """Adopt the live lease (``lease_id``, else ``lease_name``) or create it; return it once ACTIVE.

    ``require_active=False`` (``reserve``) returns a lease that starts later as it is.
    """
    lease = find_lease(config, chi)
    if lease is None:
        if config.lease_id:
            raise ProvisioningError(msg.NO_LEASE_WITH_ID(lease_id=config.lease_id, project=config.project,
                                                         site=config.site))
        print(f"No live lease named {config.lease_name!r} (lease_name) in project {config.project} at "
              f"{config.site}: creating it. If you meant a lease made another way (the original lab names it "
              "serve_system_<netID> in the GUI), set lease_name or lease_id to that one and delete this one "
              "(notebook 08)", flush=True)
        lease = create_lease(config, chi, state)
    else:
        status = read_status(lease)
        if status == "ERROR":
            raise ProvisioningError(msg.LEASE_IN_ERROR(name=lease.name))
        earlier = state.reserved_earlier("lease", config, lease.id)
        if earlier is not None:
            print(f"{lease_label(lease)} was created by the lab for a later run ({earlier}): this run's "
                  "teardown deletes it")
        origin = state.record("lease", lease.name, lease.id, CREATED if earlier else ADOPTED, config,
                              keep="" if earlier else None).origin
        print(f"Reusing {lease_label(lease)} ({status}; {origin} by this lab"
              f"{'' if origin == CREATED else ': kept at teardown unless delete_adopted'})")
    return wait_lease_active(lease, config, state, require_active)


def node_reservation_id(lease: Any, config: ChameleonConfig) -> str:
    """The id of the lease's node reservation, which the server launch needs."""
    reservations = list(lease.node_reservations)
    if not reservations:
        raise ProvisioningError(msg.NO_NODE_RESERVATION(name=lease.name))
    return str(reservations[0]["id"])
