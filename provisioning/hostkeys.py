"""The node's SSH host key: recorded at first contact, verified after (python-chi itself accepts any key,
paramiko's ``WarningPolicy``).

``remember`` runs once SSH answers (``launch``): it reads the key the node presents (a key exchange, which
proves the node holds it) and records it for that server in ``known-hosts.json`` beside the state file;
a later contact with the same server must present the same key, or the step stops in one line
(``HOST_KEY_CHANGED``: someone may be in between). A new server behind a reused floating IP is recorded
anew. ``pin`` makes a Fabric connection of the lab (the controller's shell) refuse any other key.
Why: docs/decisions/2026-12-01-exposure.md
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
from pathlib import Path
from typing import Any

from provisioning import messages as msg
from provisioning.config import ProvisioningError

KNOWN_HOSTS = "known-hosts.json"  # beside the state file
PROBE_TIMEOUT_S = 30.0


def fetch_host_key(address: str, port: int = 22, timeout: float = PROBE_TIMEOUT_S) -> tuple[str, str]:
    """(key type, base64 key) the SSH server at ``address`` presents, read by a key exchange (no login)."""
    import paramiko

    with socket.create_connection((address, port), timeout=timeout) as sock:
        transport = paramiko.Transport(sock)
        try:
            transport.start_client(timeout=timeout)
            key = transport.get_remote_server_key()
            return key.get_name(), key.get_base64()
        finally:
            transport.close()


def fingerprint(key_b64: str) -> str:
    """OpenSSH's ``SHA256:...`` fingerprint of a base64 public key."""
    digest = hashlib.sha256(base64.b64decode(key_b64)).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _read(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def remember(address: str, server_id: str, path: Path) -> str:
    """Record the key ``address`` presents for ``server_id`` (first contact) or check it against the one
    recorded; its fingerprint. Raises ProvisioningError when the same server presents another key."""
    kind, key = fetch_host_key(address)
    known = _read(path)
    entry = known.get(address)
    if entry and entry.get("server") == server_id and (entry.get("type"), entry.get("key")) != (kind, key):
        raise ProvisioningError(msg.HOST_KEY_CHANGED(address=address, was=entry.get("sha256", "?"),
                                                     now=fingerprint(key), path=path))
    if not entry or entry.get("server") != server_id:
        known[address] = {"server": server_id, "type": kind, "key": key, "sha256": fingerprint(key)}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(known, indent=1))
        print(f"SSH host key of {address} recorded at first contact: {fingerprint(key)} ({kind})", flush=True)
    return fingerprint(key)


def pin(connection: Any, address: str, path: Path) -> Any:
    """A Fabric ``Connection`` that accepts only the key recorded for ``address`` (RejectPolicy for any
    other); as it is when nothing is recorded or it is not a Fabric connection."""
    entry = _read(path).get(address)
    client = getattr(connection, "client", None)
    if not entry or client is None:
        return connection
    import paramiko

    key = paramiko.PKey.from_type_string(entry["type"], base64.b64decode(entry["key"]))
    client.get_host_keys().add(address, entry["type"], key)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    return connection
