"""The lease: one gpu_p100 node, named after the student, created once and reused after."""

from __future__ import annotations

from typing import Any

from provisioning.chi_api import ChiApi
from provisioning.config import ChameleonConfig, ProvisioningError
from provisioning.errors import describe

# a lease in one of these states is gone: a new one with the same name is needed
ENDED = ("TERMINATED", "DELETED")


def find_lease(config: ChameleonConfig, chi: ChiApi) -> Any | None:
    """The project's live lease named ``config.lease_name``, or None.

    Ended leases are skipped (Blazar keeps them listed); two live leases with
    one name are refused because every later look-up by name would be ambiguous.
    """
    matches = [lease for lease in chi.lease.list_leases()
               if lease.name == config.lease_name and lease.status not in ENDED]
    if len(matches) > 1:
        raise ProvisioningError(
            f"{len(matches)} live leases are named {config.lease_name!r}: delete the extra ones "
            "in the GUI (Reservations → Leases) or choose another lease_name / CHI_LEASE_NAME")
    return matches[0] if matches else None


def create_lease(config: ChameleonConfig, chi: ChiApi) -> Any:
    """Submit a new lease for ``node_count`` nodes of ``node_type``, starting now."""
    print(f"Creating lease {config.lease_name}: {config.node_count} × {config.node_type} at "
          f"{config.site} for {config.duration_text}")
    lease = chi.lease.Lease(config.lease_name, duration=config.duration)
    lease.add_node_reservation(amount=config.node_count, node_type=config.node_type)
    # wait ourselves (text progress, our timeout, a status check after it)
    try:
        lease.submit(wait_for_active=False, show=None, idempotent=False)
    except Exception as exc:  # python-chi raises ResourceError("Unable to make lease") and logs why
        raise ProvisioningError(
            f"could not create lease {config.lease_name} ({describe(exc)}): most often no "
            f"{config.node_type} node is free at {config.site} for {config.duration_text}; check the host "
            "calendar in the GUI (Reservations → Leases → Host Calendar), then try a shorter duration, "
            "later, or another site"
        ) from exc
    return lease


def wait_lease_active(lease: Any, config: ChameleonConfig) -> Any:
    """Wait for ACTIVE and check it: python-chi's ``wait`` also returns when the lease hit ERROR."""
    try:
        lease.wait(status="active", show="text", timeout=config.lease_timeout_s)
    except Exception as exc:  # python-chi raises ServiceError when the status never came
        raise ProvisioningError(
            f"lease {config.lease_name} did not become ACTIVE within {config.lease_timeout_s} s "
            f"({describe(exc)}): "
            "a PENDING lease starts at its start time; run this step again then") from exc
    status = lease.status
    if status != "ACTIVE":
        raise ProvisioningError(
            f"lease {config.lease_name} is {status}, not ACTIVE, after waiting up to "
            f"{config.lease_timeout_s} s: if it is ERROR, delete it (teardown, or the GUI) and create "
            "it again, possibly at another time or site; if it is PENDING, its start time is later")
    return lease


def ensure_lease(config: ChameleonConfig, chi: ChiApi) -> Any:
    """Reuse the live lease with this name or create it; return it once ACTIVE."""
    lease = find_lease(config, chi)
    if lease is None:
        lease = create_lease(config, chi)
    else:
        status = lease.status
        if status == "ERROR":
            raise ProvisioningError(
                f"lease {config.lease_name} exists and is in ERROR: delete it (provisioning teardown "
                "or the GUI) and run this step again, or choose another lease_name / CHI_LEASE_NAME")
        print(f"Reusing lease {config.lease_name} ({status})")
    return wait_lease_active(lease, config)


def node_reservation_id(lease: Any, config: ChameleonConfig) -> str:
    """The id of the lease's node reservation, which the server launch needs."""
    reservations = list(lease.node_reservations)
    if not reservations:
        raise ProvisioningError(
            f"lease {config.lease_name} has no node reservation: delete it and create it again")
    return str(reservations[0]["id"])


def delete_lease(config: ChameleonConfig, chi: ChiApi) -> bool:
    """Delete the live lease with this name; False when there was none."""
    lease = find_lease(config, chi)
    if lease is None:
        print(f"No live lease named {config.lease_name}")
        return False
    lease.delete()
    print(f"Deleted lease {config.lease_name}")
    return True
