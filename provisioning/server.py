"""The server on the reserved node: launched once, reused after, reachable by SSH."""

from __future__ import annotations

from typing import Any

from provisioning.chi_api import ChiApi
from provisioning.config import ChameleonConfig, ProvisioningError
from provisioning.errors import describe, step
from provisioning.lease import node_reservation_id
from servelab.core.procs import wait_until

FIP_HINT = ("check the project's floating IP quota in the GUI (Network → Floating IPs), release unused "
            "ones and run this step again (the lease and server are reused)")


def find_server(config: ChameleonConfig, chi: ChiApi) -> Any | None:
    """The project's server named ``config.server_name``, or None (python-chi returns no id then)."""
    if chi.server.get_server_id(config.server_name) is None:
        return None
    return chi.server.get_server(config.server_name)


def create_server(config: ChameleonConfig, lease: Any, chi: ChiApi) -> Any:
    """Launch the server on the lease's node reservation with the lab's image."""
    print(f"Launching server {config.server_name} ({config.image}) on lease {config.lease_name}")
    server = chi.server.Server(
        config.server_name,
        reservation_id=node_reservation_id(lease, config),
        image_name=config.image,
        key_name=config.key_name or None,
    )
    created = server.submit(wait_for_active=False, show=None, idempotent=True)
    # python-chi 1.2 returns a Server only when one existed; on a fresh create it returns None
    return created if created is not None else chi.server.get_server(config.server_name)


def wait_server_active(server: Any, config: ChameleonConfig) -> Any:
    """Wait for ACTIVE (bare metal takes ~10 min) and check it: ``wait`` returns on ERROR too."""
    try:
        server.wait(status="ACTIVE", show="text", timeout=config.server_timeout_s)
    except Exception as exc:  # python-chi raises ServiceError on its timeout
        raise ProvisioningError(
            f"server {config.server_name} did not become ACTIVE within {config.server_timeout_s} s "
            f"({describe(exc)}); "
            "bare-metal boots take 10–20 min: run this step again to keep waiting (the server is reused)"
        ) from exc
    status = server.status
    if status != "ACTIVE":
        raise ProvisioningError(
            f"server {config.server_name} is {status}, not ACTIVE: delete it (teardown with "
            "keep_lease=True, or the GUI: Compute → Instances) and launch it again")
    return server


def ensure_server(config: ChameleonConfig, lease: Any, chi: ChiApi) -> Any:
    """Reuse the server with this name unless it is in ERROR; otherwise launch it. Return it ACTIVE."""
    server = find_server(config, chi)
    if server is None:
        server = create_server(config, lease, chi)
    else:
        status = server.status
        if status == "ERROR":
            raise ProvisioningError(
                f"server {config.server_name} exists but is in ERROR; it is not reused. Delete it "
                "(provisioning teardown with keep_lease=True, or the GUI: Compute → Instances → "
                "Delete) and run this step again")
        print(f"Reusing server {config.server_name} ({status})")
    return wait_server_active(server, config)


def ensure_floating_ip(server: Any) -> str:
    """The server's floating IP, associating a free one from the project only when it has none.

    python-chi's ``associate_floating_ip()`` returns the address it attached (1.2.x: the
    ``floating_ip_address`` of the updated IP) and raises when no port can take it.
    """
    address = server.get_floating_ip()
    if address:
        print(f"Server already has floating IP {address}")
        return str(address)
    with step(f"associating a floating IP with server {server.name}", FIP_HINT):
        address = server.associate_floating_ip()
    if not address:
        raise ProvisioningError(f"no floating IP was attached to server {server.name}: {FIP_HINT}")
    print(f"Associated floating IP {address}")
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


def delete_server(config: ChameleonConfig, chi: ChiApi, timeout: float = 600.0) -> bool:
    """Delete the server (and its floating IP) and wait until it is gone; False when there was none."""
    server = find_server(config, chi)
    if server is None:
        print(f"No server named {config.server_name}")
        return False
    server.delete()
    wait_until(lambda: chi.server.get_server_id(config.server_name) is None,
               f"server {config.server_name} to be deleted", timeout, interval=5.0)
    print(f"Deleted server {config.server_name}")
    return True
