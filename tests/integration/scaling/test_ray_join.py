"""Notebook 10 joining a Ray cluster made with ``ray start`` (as on the node, and across nodes), on
127.0.0.1: it deploys there, answers (a 400 with the reason for a body that is not an image), kills a
replica it did not start through Ray (``ray.kill``) and sees it replaced, and on stop leaves none of
Serve's actors while the cluster itself keeps running. The test then stops the processes ``ray start``
made, and only those."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from servelab.core.procs import free_port
from servelab.lab.step10_scaling_out import bodies
from servelab.scaling.cluster import Cluster, _reachable, is_ray_process, post
from servelab.scaling.config import Scaling

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def head() -> Iterator[str]:
    """``ray start --head`` on a free port (the node's step, with the CPU for GPUs); its address."""
    port = free_port()
    ray = Path(sys.executable).parent / "ray"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run([str(ray), "start", "--head", f"--port={port}", "--num-cpus=2",
                           "--include-dashboard=false", "--disable-usage-stats"],
                          capture_output=True, text=True, timeout=120, env=env)
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        yield f"127.0.0.1:{port}"
    finally:  # this cluster's processes, which name its port, and everything they started (`ray stop`
        # would stop every Ray of this user; killing the raylet alone leaves its agents to init)
        roots = [p for p in psutil.process_iter(["cmdline"])
                 if is_ray_process(p.name(), line := " ".join(p.info["cmdline"] or []))
                 and (f":{port} " in f"{line} " or f"port={port} " in f"{line} ")]
        procs = {p.pid: p for p in roots}
        for root in roots:
            with contextlib.suppress(psutil.NoSuchProcess):
                procs.update({c.pid: c for c in root.children(recursive=True)})
        for proc in procs.values():
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.terminate()
        _, alive = psutil.wait_procs(list(procs.values()), timeout=5)
        for proc in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        _, alive = psutil.wait_procs(alive, timeout=20)
        assert not alive, f"processes of `ray start` left: {alive}"


def test_joins_deploys_kills_through_ray_and_leaves_the_cluster_running(head: str) -> None:
    photos = bodies(1)
    cluster = Cluster(address=head, port=8222)
    try:
        cluster.start()
        assert cluster.gpus == 0
        cluster.deploy(Scaling(fixed=1))
        status, answer = post(cluster.url, photos[0][0], "first")
        assert status == 200 and answer["label"] == photos[0][1] and answer["device"] == "CPU"
        status, bad = post(cluster.url, b"not an image", "bad")
        assert status == 400 and "image" in bad["error"] and bad["request_id"] == "bad"
        assert cluster.kill_replica(answer) == "ray.kill", "the replica is no process of this test's"
        deadline = time.monotonic() + 60
        while True:
            try:  # a request routed to the killed replica may hang until Serve notices
                status, again = post(cluster.url, photos[0][0], "after", timeout_s=10)
            except OSError as exc:  # a timeout or a dropped connection: no answer yet
                status, again = 0, {"error": repr(exc)}
            if status == 200 and again["replica"] != answer["replica"]:
                break
            assert time.monotonic() < deadline, f"no new replica within 60 s of the kill: {status} {again}"
            time.sleep(0.3)
    finally:
        left = cluster.stop()
    assert left == [], f"Serve's actors left in the joined cluster: {left}"
    _reachable(head)  # the cluster made with `ray start` keeps running after the notebook (raises if not)


def test_no_cluster_at_the_address_says_what_to_do() -> None:
    from servelab.scaling.cluster import ScalingError

    with pytest.raises(ScalingError, match="ray start --head"):
        Cluster(address=f"127.0.0.1:{free_port()}", port=8223).start()
