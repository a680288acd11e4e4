"""What may answer on a Docker host's public addresses (the Chameleon node's floating IP), in one place.

The one allowlist (``PUBLIC``): SSH, the node's Jupyter server (over TLS, behind its token) and
GourmetGram (the lab's public web app). Everything else the lab starts listens on loopback only: the
compose files bind each published port to 127.0.0.1 (but the services in ``PUBLIC_SERVICES``), and
the node's Docker daemon does so by default for whatever else is started (``DAEMON_DEFAULT_IP``,
provisioning/node_setup.sh's daemon.json; Model Analyzer's Tritons publish ports of their own). Read
the listening sockets (``ss -Hltn``'s lines, or psutil's) with :func:`parse_ss`, and
:func:`outside_allowlist` names what should not be there. Why: docs/decisions/2026-12-01-exposure.md
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

# port -> what answers there, for whoever reads the refusal
PUBLIC = {22: "SSH", 80: "GourmetGram", 8888: "the node's Jupyter server (TLS, token)"}
PUBLIC_SERVICES = ("flask",)  # compose services published on every address, all others on 127.0.0.1
LOOPBACK = "127.0.0.1"
DAEMON_DEFAULT_IP = LOOPBACK  # Docker's "ip" in daemon.json: where a port published without an address binds
LISTENING_COMMAND = "ss -Hltn"  # TCP sockets listening, numeric, without the header


@dataclass(frozen=True)
class Listener:
    """A TCP socket listening on ``address:port`` (``what``: the process, where it is known)."""

    address: str
    port: int
    what: str = ""

    @property
    def loopback(self) -> bool:
        """127.0.0.0/8, ::1, or an IPv4-mapped IPv6 loopback (``::ffff:127.0.0.1``: Ray's gRPC servers)."""
        try:
            address = ipaddress.ip_address(self.address.split("%", 1)[0])
        except ValueError:
            return self.address == "localhost"
        mapped = getattr(address, "ipv4_mapped", None)
        return bool((mapped or address).is_loopback)

    def __str__(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.port}" + (f" ({self.what})" if self.what else "")


_SS_LINE = re.compile(r"^\s*LISTEN\s+\d+\s+\d+\s+(?P<local>\S+)\s+\S+(?P<rest>.*)$")


def parse_ss(text: str) -> list[Listener]:
    """The listeners in ``ss -Hltn`` (or ``-Hltnp``) output: ``*`` and ``0.0.0.0`` are every IPv4 address,
    ``[::]`` every address; an interface suffix (``%lo``) is kept on the address."""
    found = []
    for line in text.splitlines():
        match = _SS_LINE.match(line)
        if not match:
            continue
        host, _, port = match.group("local").rpartition(":")
        host = host.strip("[]")
        host = "0.0.0.0" if host == "*" else host
        users = re.search(r'users:\(\("([^"]+)"', match.group("rest"))
        if port.isdigit():
            found.append(Listener(host, int(port), users.group(1) if users else ""))
    return found


def outside_allowlist(listeners: list[Listener], allowed: dict[int, str] | None = None) -> list[Listener]:
    """The listeners on a non-loopback address whose port is not ``allowed`` (default ``PUBLIC``), once
    each and sorted."""
    allowed = PUBLIC if allowed is None else allowed
    return sorted({item for item in listeners if not item.loopback and item.port not in allowed},
                  key=lambda item: (item.port, item.address))


def allowlist_text(allowed: dict[int, str] | None = None) -> str:
    ports = PUBLIC if allowed is None else allowed
    return ", ".join(f"{port} ({what})" for port, what in sorted(ports.items()))

