"""What keeps GourmetGram answering under abuse: it is the one server of the lab on the node's public
address (servelab/core/exposure.py), so anyone may send it uploads.

- **A rate per client** (``UPLOADS_PER_MINUTE``, a token bucket per address: that many a minute, bursts of a
  tenth of it, at least 5): past it, 429 with ``Retry-After``.
- **Uploads at once** (``UPLOADS_AT_ONCE`` per worker process, default one less than gunicorn's threads):
  past it, 503 with ``Retry-After`` at once, before the body is read, so slow uploads never hold every
  thread and the page, ``/health`` and ``/metrics`` still answer.
- **A slow body** (``UPLOAD_READ_TIMEOUT`` seconds without a byte, on gunicorn's socket): 408, and the
  thread is free again.
- The decode itself waits for its share of the process's pixel budget (servelab/core/preprocess.py).

The first two spare the host itself and its containers (``TRUSTED``: loopback and Docker's address pools,
where the node's own notebooks upload from: GourmetGram sees the bridge's gateway), so the lab's own
measurements never meet them.

Per process, in memory: each gunicorn worker keeps its own counts. Why these defaults:
docs/decisions/2026-12-01-exposure.md
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

MAX_CLIENTS = 10_000  # addresses remembered; the least recently seen is forgotten past it
# this host and Docker's default address pools (172.17-31.x and 192.168.x: its bridges' gateways)
TRUSTED = tuple(ipaddress.ip_network(n)
                for n in ("127.0.0.0/8", "::1/128", "172.16.0.0/12", "192.168.0.0/16"))


def trusted(client: str) -> bool:
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return False
    return any(address in network for network in TRUSTED if address.version == network.version)


class Refused(Exception):
    """An upload turned away: the user-facing message, the HTTP status and when to try again."""

    def __init__(self, message: str, status: int, retry_after_s: int) -> None:
        super().__init__(message)
        self.message, self.status, self.retry_after_s = message, status, retry_after_s


class UploadGuard:
    """The three bounds above, for one worker process (thread-safe)."""

    def __init__(self, per_minute: float, at_once: int, read_timeout_s: float,
                 clock: Any = time.monotonic) -> None:
        self.per_minute, self.at_once, self.read_timeout_s = per_minute, at_once, read_timeout_s
        self.burst = max(5.0, per_minute / 10)
        self.clock = clock
        self.running = 0
        self._buckets: dict[str, tuple[float, float]] = {}  # address -> (tokens, when)
        self._lock = threading.Lock()

    def _take(self, client: str) -> float:
        """0 when ``client`` may send now (a token taken), else the seconds until it may."""
        now = self.clock()
        tokens, then = self._buckets.pop(client, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.per_minute / 60)
        if tokens < 1:
            self._buckets[client] = (tokens, now)
            return (1 - tokens) * 60 / self.per_minute
        self._buckets[client] = (tokens - 1, now)  # re-inserted: the dict's order is recency
        while len(self._buckets) > MAX_CLIENTS:
            del self._buckets[next(iter(self._buckets))]
        return 0.0

    @contextmanager
    def admit(self, client: str, environ: MutableMapping[str, Any]) -> Iterator[None]:
        """Hold one of the uploads at once for ``client`` while its upload is read and classified, or
        raise Refused; the body is then read with ``read_timeout_s`` on gunicorn's socket."""
        spared = trusted(client)
        with self._lock:
            wait = 0.0 if spared else self._take(client)
            if wait:
                raise Refused(f"Too many uploads from your address: at most {self.per_minute:g} a minute. "
                              f"Try again in {wait:.0f} s.", 429, max(1, round(wait)))
            if self.running >= self.at_once and not spared:
                raise Refused("The server is busy with other uploads: try again in a moment.", 503, 2)
            self.running += 1
        sock = environ.get("gunicorn.socket")
        previous = sock.gettimeout() if isinstance(sock, socket.socket) else None
        try:
            if isinstance(sock, socket.socket):
                sock.settimeout(self.read_timeout_s)
            yield
        finally:
            if isinstance(sock, socket.socket):
                sock.settimeout(previous)
            with self._lock:
                self.running -= 1
