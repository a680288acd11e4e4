"""What the lab's containers listen on, on this host, sampled while the whole lab runs (the docker tier's
``test_the_lab_runs_in_the_jupyter_container``): every stack comes up in turn and notebook 11's Model
Analyzer starts Tritons of its own, so a check after the run alone would miss them.

A listener is the lab's when its process is Docker's port proxy (what publishes a container's port on the
host: the tier's engine runs without iptables, so every published port is one) or runs in a container's
cgroup (the Jupyter container and Model Analyzer's share the host's network). Others on this shared
machine are not looked at. ``servelab.core.exposure`` decides what may listen beyond loopback.
"""

from __future__ import annotations

import ipaddress
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from servelab.core.exposure import Listener, outside_allowlist

_CONTAINER = re.compile(r"/docker[/-]([0-9a-f]{64})")


def _owner(pid: int | None) -> str:
    """'docker-proxy <its arguments>' or 'container <id> <command>' for the lab's, '' for another's."""
    if pid is None:
        return ""
    try:
        process = psutil.Process(pid)
        name, cmdline = process.name(), " ".join(process.cmdline())
        cgroup = Path(f"/proc/{pid}/cgroup").read_text()
    except (psutil.Error, OSError):
        return ""
    if name == "docker-proxy":
        return f"docker-proxy {cmdline}"
    found = _CONTAINER.search(cgroup)
    return f"container {found.group(1)[:12]} {cmdline[:80]}" if found else ""


def _address(hexed: str) -> str:
    """/proc/net/tcp's address (IPv4: one little-endian word; IPv6: four) as text."""
    raw = bytes.fromhex(hexed)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def listening_sockets() -> dict[int, tuple[str, int]]:
    """Every TCP socket listening in this network namespace: inode -> (address, port). Reads
    /proc/net/tcp{,6} alone (a few KB): cheap enough to do every second beside a measurement."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A":  # TCP_LISTEN
                address, port = fields[1].rsplit(":", 1)
                found[int(fields[9])] = (_address(address), int(port, 16))
    return found


def _pid_of(inode: int) -> int | None:
    """The process holding socket ``inode`` (a walk over /proc/*/fd: only for a socket not seen before)."""
    target = f"socket:[{inode}]"
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) == target for fd in fd_dir.iterdir()):
                return int(fd_dir.parent.name)
        except OSError:
            continue
    return None


class Owners:
    """Who holds each listening socket, looked up once per socket."""

    def __init__(self) -> None:
        self.known: dict[int, str] = {}

    def listeners(self) -> list[Listener]:
        """This host's listening TCP sockets that belong to the lab's containers (the module's text)."""
        found = []
        for inode, (address, port) in listening_sockets().items():
            if inode not in self.known:
                self.known[inode] = _owner(_pid_of(inode))
            if self.known[inode]:
                found.append(Listener(address, port, self.known[inode]))
        return found


def lab_listeners() -> list[Listener]:
    return Owners().listeners()


@dataclass
class Sampler:
    """Samples the lab's listeners every ``interval_s`` in a thread, from ``start`` to ``stop``."""

    interval_s: float = 2.0  # a Triton of the search lives for tens of seconds; a sample costs ~20 ms
    seen: set[Listener] = field(default_factory=set)
    samples: int = 0
    seconds: float = 0.0  # spent sampling
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _owners: Owners = field(default_factory=Owners)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.seen.update(self._owners.listeners())
            self.samples += 1
            self.seconds += time.monotonic() - started
            self._stop.wait(self.interval_s)

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, name="listening-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.seen.update(self._owners.listeners())  # and once more, with every stack the run left up

    @property
    def public(self) -> list[Listener]:
        return outside_allowlist(sorted(self.seen, key=lambda item: (item.port, item.address)))
