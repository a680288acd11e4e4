"""Nothing of the lab answers on a Docker host's public address but the allowlist (servelab.core.exposure):
every compose file publishes on 127.0.0.1 except GourmetGram, only the Jupyter server shares the host's
network, every container has a memory limit, and a listing of the host's sockets is read right. (The
docker tier lists the real sockets while the whole lab runs: tests/docker/test_lab_run.py.)"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from servelab.core.exposure import (
    DAEMON_DEFAULT_IP,
    LOOPBACK,
    PUBLIC,
    PUBLIC_SERVICES,
    Listener,
    allowlist_text,
    outside_allowlist,
    parse_ss,
)
from servelab.core.paths import REPO_ROOT

COMPOSE_FILES = sorted((REPO_ROOT / "docker").glob("docker-compose-*.yaml"))
_DEFAULT = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-([^}]*))?\}")


def defaults(text: str) -> str:
    """``${VAR:-default}`` as compose reads it with VAR unset (a bare ``${VAR}`` as empty)."""
    return _DEFAULT.sub(lambda m: m.group(1) or "", text)


def published(entry: Any) -> tuple[str, str, str]:
    """(host address, host port, container port) of a ``ports:`` entry, short or long syntax; no
    address is ""."""
    if isinstance(entry, dict):
        return str(entry.get("host_ip", "")), defaults(str(entry.get("published", ""))), str(entry["target"])
    parts = defaults(str(entry)).rsplit(":", 2)
    if len(parts) == 3:
        return parts[0].strip("[]"), parts[1], parts[2]
    return "", parts[0] if len(parts) == 2 else "", parts[-1]


def services() -> list[tuple[str, str, dict[str, Any]]]:
    return [(path.name, name, service) for path in COMPOSE_FILES
            for name, service in yaml.safe_load(path.read_text())["services"].items()]


def test_the_compose_files_are_all_read() -> None:
    names = {name for _, name, _ in services()}
    assert {"fastapi_server", "flask", "triton_server", "llm_server", "vllm_server", "jupyter"} <= names


@pytest.mark.parametrize(("entry", "expected"), [
    ("127.0.0.1:8000:8000", ("127.0.0.1", "8000", "8000")),
    ("0.0.0.0:${FLASK_PORT:-80}:5000", ("0.0.0.0", "80", "5000")),
    ("8000:8000", ("", "8000", "8000")),
    ("8000", ("", "", "8000")),
    ("[::1]:8001:8001", ("::1", "8001", "8001")),
    ({"target": 8000, "published": "8000", "host_ip": "127.0.0.1"}, ("127.0.0.1", "8000", "8000")),
])
def test_a_ports_entry_is_read_as_compose_reads_it(entry: Any, expected: tuple[str, str, str]) -> None:
    assert published(entry) == expected


def test_every_published_port_binds_loopback_but_the_allowlisted_ones() -> None:
    """A port published without an address is reachable from outside whatever the host's firewall says
    (Docker's own documentation, moby/moby#4737): each binds 127.0.0.1, but GourmetGram's, published on
    every address on purpose, on a port of the allowlist."""
    wrong = []
    for file, name, service in services():
        for entry in service.get("ports", []):
            address, port, _ = published(entry)
            if name in PUBLIC_SERVICES:
                if address != "0.0.0.0" or int(port) not in PUBLIC:
                    wrong.append(f"{file}: {name} publishes {entry!r} (allowed: 0.0.0.0 on {sorted(PUBLIC)})")
            elif address != LOOPBACK:
                wrong.append(f"{file}: {name} publishes {entry!r} beyond 127.0.0.1")
    assert wrong == []
    publishing = {name for _, name, service in services() if service.get("ports")}
    assert set(PUBLIC_SERVICES) <= publishing


def test_only_the_jupyter_server_shares_the_hosts_network_and_every_container_has_a_memory_limit() -> None:
    """A host-network container listens on the host's addresses itself: only the Jupyter server (port 8888,
    TLS and its token: the allowlist) may. A limit keeps one runaway container from taking the node."""
    host = {name for _, name, service in services() if service.get("network_mode") == "host"}
    assert host == {"jupyter"} and 8888 in PUBLIC
    unlimited = [f"{file}: {name}" for file, name, service in services()
                 if "mem_limit" not in service and not file.endswith(".gpu.yaml")]  # (the GPU overrides)
    assert unlimited == []


def test_the_tiers_engine_and_the_node_bind_unaddressed_ports_to_loopback() -> None:
    """Model Analyzer's Tritons (and whatever a student starts) publish ports without an address: the
    node's daemon.json and the docker tier's engine both bind those to loopback."""
    assert DAEMON_DEFAULT_IP == LOOPBACK
    script = (REPO_ROOT / "provisioning" / "node_setup.sh").read_text()
    assert f'DEFAULT_BIND_IP="{DAEMON_DEFAULT_IP}"' in script
    engine = (REPO_ROOT / "tests" / "docker" / "engine.py").read_text()
    assert '"--ip", DAEMON_DEFAULT_IP' in engine


SS = """\
LISTEN 0      4096         0.0.0.0:80         0.0.0.0:*
LISTEN 0      128          0.0.0.0:22         0.0.0.0:*
LISTEN 0      4096       127.0.0.1:8000       0.0.0.0:*
LISTEN 0      4096   127.0.0.53%lo:53         0.0.0.0:*
LISTEN 0      128                *:8888             *:*
LISTEN 0      4096            [::]:8002          [::]:*
LISTEN 0      4096           [::1]:8010          [::]:*
LISTEN 0      511     10.52.0.12:6379         0.0.0.0:*    users:(("redis-server",pid=812,fd=6))
"""


def test_a_listing_of_the_hosts_sockets_is_read_and_checked_against_the_allowlist() -> None:
    found = parse_ss(SS)
    assert [(item.address, item.port) for item in found] == [
        ("0.0.0.0", 80), ("0.0.0.0", 22), ("127.0.0.1", 8000), ("127.0.0.53%lo", 53), ("0.0.0.0", 8888),
        ("::", 8002), ("::1", 8010), ("10.52.0.12", 6379)]
    assert [item.loopback for item in found] == [False, False, True, True, False, False, True, False]
    extra = outside_allowlist(found)
    assert [str(item) for item in extra] == ["10.52.0.12:6379 (redis-server)", "[::]:8002"]
    assert "8888 (the node's Jupyter server" in allowlist_text() and "80 (GourmetGram)" in allowlist_text()
    assert outside_allowlist([Listener("0.0.0.0", 8888), Listener("::", 22)]) == []
    assert Listener("::ffff:127.0.0.1", 40063).loopback  # IPv4-mapped, as Ray's gRPC servers listen
    assert not Listener("::ffff:192.0.2.2", 40063).loopback


def test_the_allowlist_is_what_the_node_opens_in_its_firewall() -> None:
    script = (REPO_ROOT / "provisioning" / "node_setup.sh").read_text()
    opened = re.search(r'LAB_PORTS="\$\{LAB_PORTS:-([^}]*)\}"', script)
    assert opened is not None
    assert {int(p.split("/")[0]) for p in opened.group(1).split()} == set(PUBLIC) - {22}


def test_behind_the_jupyter_proxy_a_page_knows_its_prefix_and_the_notebook_says_where_to_open_it() -> None:
    from servelab.core.browser import in_browser, proxied_scope

    forwarded = {"type": "http", "path": "/docs", "headers": [(b"x-forwarded-prefix", b"/proxy/8000")]}
    assert proxied_scope(forwarded)["root_path"] == "/proxy/8000"
    for prefix in (b"/elsewhere", b"/proxy/8000/../../x", b"javascript:alert(1)"):  # only the proxy's form
        assert "root_path" not in proxied_scope({**forwarded, "headers": [(b"x-forwarded-prefix", prefix)]})
    on_node = {"SERVELAB_BROWSER_PROXY": "/proxy/"}
    assert in_browser("http://localhost:8000/docs", on_node) == "/proxy/8000/docs"
    assert in_browser("http://localhost:8002/metrics", on_node) == "/proxy/8002/metrics"
    assert in_browser("http://localhost:8000/docs", {}) == "http://localhost:8000/docs"  # the local target
