"""A Ray cluster on this machine for Ray Serve, and what the notebook asks of it: deploy with a scaling
config, count replicas, kill one, and stop with every Ray process gone (checked).
Sizes and timings: docs/decisions/2026-11-23-ray-serve.md
"""

from __future__ import annotations

import logging
import os
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass, field
from typing import Any

from servelab.core.notices import SaidPlainly
from servelab.scaling.config import Scaling

APP = "food11"
ROUTE = "/food11"


# what Ray's raylet told this driver (a worker killed, a retried shutdown), kept out of the cells' output
RAYLET_MESSAGES: list[str] = []


def keep_raylet_messages() -> None:
    """Keep the raylet's messages to this driver in ``RAYLET_MESSAGES`` instead of the cell's output.

    Ray's driver prints them to stdout, coloured, from its error-listening thread, whatever
    ``log_to_driver`` says (that covers the workers' own logs): the thread calls the module function
    ``ray._private.worker.print_to_stdstream``, replaced here by one that keeps the raylet's lines and
    passes every other on. A private function of the pinned ray: tests/unit/scaling/test_raylet_messages.py
    fails if it moves."""
    from ray._private import worker

    shown = worker.print_to_stdstream
    if getattr(shown, "keeps_raylet", False):
        return

    def keep(data: dict[str, Any], ignore_prefix: bool) -> None:
        if data.get("pid") == "raylet":
            RAYLET_MESSAGES.extend(str(line) for line in data.get("lines", []))
            return
        shown(data, ignore_prefix)

    keep.keeps_raylet = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = keep


def raylet_said(since: int = 0) -> str:
    """The first sentence of each raylet message kept since index ``since``, plain, one line each."""
    import re

    lines = []
    for message in RAYLET_MESSAGES[since:]:
        plain = re.sub(r"\x1b\[[0-9;]*m", "", message).strip()
        lines.append(plain.split(". ")[0].rstrip(".") + ".")
    return "\n".join(dict.fromkeys(lines))


class ScalingError(SaidPlainly, RuntimeError):
    """Ray Serve did not do what was asked in time; the message says what was waited for."""



# Ray on Linux takes the machine's own address as its node's, and then binds its gRPC servers (GCS,
# raylet, every worker), its agents and metrics on every address; with a loopback node address it binds
# them all to 127.0.0.1. It takes loopback only with this setting (ray._private.services.
# get_node_ip_address), set before its processes start so they inherit it. The docker tier found them
# on every address of the host (the node's Jupyter shares its network): docs/decisions/2026-12-01-exposure.md
LOOPBACK_SETTING = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
REPLICA_HOOK = "servelab.scaling.cluster.replica_grpc_on_loopback"  # run in every worker of the lab's Ray


def loopback_only() -> None:
    """A Ray of this process's own: every server of it on loopback (not for joining a cluster)."""
    from ray._private import ray_constants

    os.environ[LOOPBACK_SETTING] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False  # read at each call; the environment for its processes


def replica_grpc_on_loopback() -> None:
    """Every Ray worker's set-up (``worker_process_setup_hook``): Serve 2.60's replica binds its
    inter-deployment gRPC server to ``[::]:0`` (every address) with no setting to change it; in a Ray of the
    lab's own that server is bound to loopback instead, where its callers, on this node, reach it."""
    from ray.serve._private import replica

    bind = replica.add_port_to_grpc_server
    if getattr(bind, "servelab_loopback", False):
        return

    def on_loopback(server: Any, address: str) -> int:
        return int(bind(server, address.replace("[::]:", "127.0.0.1:", 1)))

    on_loopback.servelab_loopback = True  # type: ignore[attr-defined]
    replica.add_port_to_grpc_server = on_loopback

@dataclass
class Cluster:
    """A local Ray head (``ray.init``) with Serve's HTTP proxy on ``host:port``; or, with ``address``
    ("auto", "10.52.0.5:6379"), a cluster already made with ``ray start`` on one or more nodes, which
    this notebook joins and leaves running (``ray stop`` on each node ends it)."""

    host: str = "127.0.0.1"
    port: int = 8210
    num_cpus: int | None = None
    address: str | None = None
    started: float = 0.0
    pids: set[int] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{ROUTE}"

    def start(self, timeout_s: float = 90.0) -> Cluster:
        import psutil
        import ray
        from ray import serve

        cpus = self.num_cpus or psutil.cpu_count() or 1
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        # Ray enables token authentication for a local cluster and says so on stderr: kept, not said
        logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
        # ray 2.60 pushes autoscaling metrics every config's metrics_interval_s (Scaling sets it); it
        # calls the field deprecated, for two variables a later release will read instead and 2.60
        # does not (docs/decisions/2026-11-28-lessons-third-pass.md; tests/unit/scaling/test_ray_windows.py)
        warnings.filterwarnings("ignore", message="The `metrics_interval_s` field",
                                category=DeprecationWarning)
        t0 = time.perf_counter()
        if self.address:
            # `ray start` makes a token-authenticated cluster; a driver sends ~/.ray/auth_token only in
            # token mode, which Ray reads once per process: switch it on where a token exists (Ray's own
            # helper for a local ray.init; pinned ray, tests/integration/scaling/test_ray_join.py)
            from ray._private.authentication.authentication_token_setup import (
                maybe_enable_token_auth_if_token_available,
            )

            maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
            try:
                _reachable(self.address)  # ray.init waits minutes for a GCS that is not there
                ray.init(address=self.address, log_to_driver=False, configure_logging=False)
            except ConnectionError as exc:
                raise ScalingError(f"no Ray cluster at address={self.address!r} ({exc}): start one with "
                                   "`ray start --head` (provisioning's plan says how), or leave ray_address "
                                   "None for a Ray of this notebook's own") from None
            except Exception as exc:  # e.g. ray.exceptions.AuthenticationError
                raise ScalingError(f"could not join the Ray cluster at {self.address!r}: {exc}. A cluster "
                                   "made with `ray start` on another machine or container needs its token "
                                   "here too: copy its ~/.ray/auth_token to this user's ~/.ray/") from None
        else:
            loopback_only()
            ray.init(address="local", num_cpus=cpus, include_dashboard=False, object_store_memory=80 * 2**20,
                     log_to_driver=False, configure_logging=False,
                     runtime_env={"worker_process_setup_hook": REPLICA_HOOK})
        keep_raylet_messages()
        logging.getLogger("ray.serve").setLevel(logging.WARNING)  # the driver's "Application ... ready" lines
        serve.start(http_options={"host": self.host, "port": self.port},
                    logging_config={"log_level": "WARNING"})
        self.started = time.perf_counter() - t0
        if self.started > timeout_s:
            raise ScalingError(f"Ray and Serve took {self.started:.0f} s to start (limit {timeout_s:.0f} s)")
        self._remember_pids()
        return self

    @property
    def gpus(self) -> float:
        return cluster_gpus()

    def deploy(self, scaling: Scaling, timeout_s: float = 60.0) -> float:
        """Deploy (or redeploy) the app with ``scaling``; returns the seconds until it answered."""
        from ray import serve

        from servelab.scaling.app import Food11

        t0 = time.perf_counter()
        deployment: Any = Food11  # @serve.deployment made the class a Deployment, which mypy cannot see
        handle = deployment.options(**scaling.deployment_options()).bind(**scaling.init_args())
        serve.run(handle, name=APP, route_prefix=ROUTE, blocking=False)
        want = scaling.fixed or scaling.min_replicas
        self.wait_replicas(lambda n: n == want, f"{want} running replica(s) of {APP}", timeout_s)
        self._remember_pids()
        return time.perf_counter() - t0

    def replicas(self) -> int:
        """Running replicas of the app's deployment now (0 while none is up)."""
        return self.replica_counts()[0]

    def replica_counts(self, app: Any = None) -> tuple[int, int]:
        """(running, starting) replicas of the app's deployment now (or in ``app``, a status read)."""
        app = app if app is not None else _app_status()
        deployment = app.deployments.get("food11") if app is not None else None
        states: dict[Any, int] = dict(deployment.replica_states) if deployment else {}
        return int(states.get("RUNNING", 0)), int(states.get("STARTING", 0))

    def wait_replicas(self, ok: Any, what: str, timeout_s: float) -> float:
        """Poll until ``ok(replicas)``; the seconds it took, or ScalingError naming ``what``."""
        t0 = time.perf_counter()
        while True:
            app = _app_status()  # one status read per poll: the count and whether the deploy failed
            n = self.replica_counts(app)[0]
            if ok(n):
                return time.perf_counter() - t0
            if app is not None and app.status == "DEPLOY_FAILED":  # a str enum; e.g. a constructor raised
                raise ScalingError(f"{APP} failed to deploy: {app.message.strip()[-600:]}")
            if time.perf_counter() - t0 > timeout_s:
                raise ScalingError(f"waited {timeout_s:.0f} s for {what}; {n} running")
            time.sleep(0.2)

    def kill_replica(self, answer: dict[str, Any]) -> str:
        """Kill the replica that sent ``answer`` (its "pid" and "actor"), as in a crash: SIGKILL when it
        is a process of this notebook's own Ray, else ``ray.kill`` (a joined cluster, another node).
        Returns how it was killed."""
        import signal

        import psutil
        import ray

        pid = int(answer["pid"])
        if pid in {p.pid for p in psutil.Process().children(recursive=True)}:
            os.kill(pid, signal.SIGKILL)
            return "SIGKILL"
        if not self.address:
            raise ScalingError(f"pid {pid} is not a process of this Ray cluster: not killed")
        ray.kill(ray.get_actor(answer["actor"], namespace="serve"), no_restart=True)
        return "ray.kill"

    def _remember_pids(self) -> None:
        """Ray's processes among this process's descendants (not the load generator's pool, nor a
        server something else in this process started)."""
        import psutil

        for child in psutil.Process().children(recursive=True):
            try:
                if is_ray_process(child.name(), " ".join(child.cmdline())):
                    self.pids.add(child.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue

    def stop(self, timeout_s: float = 60.0) -> list[Any]:
        """``serve.shutdown()`` and ``ray.shutdown()``, then wait until every process Ray started is
        gone; returns the pids still alive after ``timeout_s`` (empty: all gone). A joined cluster
        (``address``) keeps running: what must be gone then is Serve's actors (their names)."""
        import ray

        self._remember_pids() if ray.is_initialized() else None
        try:
            if ray.is_initialized():
                from ray import serve

                serve.shutdown()
                if self.address:
                    return self._serve_actors_left(timeout_s)
        finally:
            ray.shutdown()
        deadline = time.monotonic() + timeout_s
        alive = self.alive()
        while alive and time.monotonic() < deadline:
            time.sleep(0.3)
            alive = self.alive()
        return alive

    def _serve_actors_left(self, timeout_s: float) -> list[Any]:
        """Serve's named actors (controller, proxies, replicas) still in the joined cluster."""
        import ray

        deadline = time.monotonic() + timeout_s
        while True:
            named = ray.util.list_named_actors(all_namespaces=True)
            left = [a for a in named if a.get("namespace") == "serve"]
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.3)

    def alive(self) -> list[int]:
        """The processes this cluster started that are still running (zombies count as gone)."""
        import psutil

        left = []
        for pid in sorted(self.pids):
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    left.append(pid)
            except psutil.NoSuchProcess:
                pass
        return left


def _app_status() -> Any:
    """Serve's status of the app (None before it is deployed)."""
    from ray import serve

    return serve.status().applications.get(APP)


def cluster_gpus() -> float:
    """GPUs in the running Ray cluster (Ray counts them when it starts: 0 on a CPU host, 2 on the P100
    node); 0 when Ray is not running in this process."""
    import ray

    return float(ray.cluster_resources().get("GPU", 0)) if ray.is_initialized() else 0.0


def _reachable(address: str, timeout_s: float = 5.0) -> None:
    """ConnectionError unless ``host:port`` accepts a TCP connection ("auto" passes)."""
    import socket

    host, _, port = address.rpartition(":")
    if address == "auto" or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers on {address}: {exc}") from None


def is_ray_process(name: str, cmdline: str) -> bool:
    """raylet, gcs_server, a ``ray::`` worker, or a Python process running a script of Ray's package."""
    return name in ("raylet", "gcs_server") or cmdline.startswith("ray::") or "/site-packages/ray/" in cmdline


def ray_processes() -> list[str]:
    """Ray processes of this user on this machine (raylet, gcs_server, ray:: workers), as 'pid name'."""
    import psutil

    me = psutil.Process().username()
    found = []
    for p in psutil.process_iter(["pid", "name", "cmdline", "username"]):
        try:
            if p.info["username"] != me or p.status() == psutil.STATUS_ZOMBIE:
                continue
            if is_ray_process(p.info["name"], " ".join(p.info["cmdline"] or [])):
                found.append(f"{p.pid} {p.info['name']}")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def post(url: str, body: bytes, request_id: str = "", timeout_s: float = 30.0) -> tuple[int, dict[str, Any]]:
    """One request: (HTTP status, the JSON answer or ``{"error": text}``)."""
    import json

    request = urllib.request.Request(url, data=body, method="POST", headers={"X-Request-Id": request_id})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        text = exc.read().decode(errors="replace")
        try:
            return exc.code, json.loads(text)
        except ValueError:
            return exc.code, {"error": text.strip()}
