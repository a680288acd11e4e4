"""The real Ray Serve on 127.0.0.1 with the lab's Food-11 deployment: it scales up under a bounded
load and back down after it, sheds with a 503 and a message past ``max_queued_requests``, matches
every answer to its request across replicas, and leaves no Ray process behind (a body that is not an
image: test_ray_join.py). One cluster for the module (Ray takes ~10-20 s to start here)."""

from __future__ import annotations

from collections.abc import Iterator

import psutil
import pytest

from servelab.core.exposure import Listener
from servelab.lab.step10_scaling_out import bodies
from servelab.scaling.cluster import Cluster, is_ray_process
from servelab.scaling.config import Scaling
from servelab.scaling.load import Phase, closed_loop, run_schedule, scale_events, stop_sender

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def photos() -> list[tuple[bytes, str]]:
    return bodies()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster(port=8221)
    try:
        c.start()
        yield c
    finally:
        stop_sender()
        left = c.stop()
        assert not left, f"Ray processes left after shutdown: {left}"
        mine = [p.pid for p in psutil.Process().children(recursive=True)
                if is_ray_process(p.name(), " ".join(p.cmdline()))]
        assert not mine, f"Ray processes of this test left: {mine}"


def ray_listeners() -> list[tuple[str, int, str]]:
    """Every TCP socket listening in one of this process's Ray processes: (address, port, process)."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if not is_ray_process(process.name(), " ".join(process.cmdline())):
                continue
            found += [(c.laddr.ip, c.laddr.port, process.name()) for c in process.net_connections(kind="tcp")
                      if c.status == psutil.CONN_LISTEN]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def test_answers_match_requests_across_replicas(cluster: Cluster, photos: list[tuple[bytes, str]]) -> None:
    cluster.deploy(Scaling(fixed=2))
    # Ray's own servers (GCS, raylet, workers, agents) listen on loopback only: on the node this Jupyter
    # shares the host's network, whose public address answers SSH, Jupyter and GourmetGram alone
    listening = ray_listeners()
    assert listening and all(Listener(address, port).loopback for address, port, _ in listening), listening
    run = run_schedule(cluster.url, photos, [Phase(3, 30)], "match", cluster.replicas)
    ok = [r for r in run.requests if r["status"] == 200]
    assert len(ok) == len(run.requests) > 30
    assert not [r for r in ok if r["mismatch"]], "an answer carried another request's id or label"
    assert len({r["replica"] for r in ok}) == 2, "both replicas should have served"


def test_sheds_with_503_and_a_message_never_a_hang(cluster: Cluster, photos: list[tuple[bytes, str]]) -> None:
    cluster.deploy(Scaling(fixed=1, max_ongoing_requests=1, max_queued_requests=2))
    run = run_schedule(cluster.url, photos, [Phase(3, 150)], "shed", cluster.replicas, timeout_s=10)
    shed = [r for r in run.requests if r["status"] == 503]
    assert shed, "150/s on one replica with a queue of 2 should shed"
    assert "max_queued_requests" in shed[0]["message"]
    assert not [r for r in run.requests if r["status"] == "timeout"]
    assert max(r["latency_ms"] for r in shed) < 2000, "a shed request is answered at once"


def test_scales_up_under_load_and_down_after(cluster: Cluster, photos: list[tuple[bytes, str]]) -> None:
    s = Scaling(min_replicas=1, max_replicas=2, target_ongoing_requests=1, upscale_delay_s=0.5,
                downscale_delay_s=2, look_back_period_s=1)
    cluster.deploy(s)
    rate = closed_loop(cluster.url, photos, 2, 2)["throughput_rps"]
    run = run_schedule(cluster.url, photos, [Phase(8, 1.5 * rate), Phase(8, 0.2 * rate)], "auto",
                       cluster.replicas, timeout_s=15)
    events = scale_events(run.series)
    assert any(e["to"] == 2 for e in events), f"no scale-up to 2 replicas: {run.series}"
    cluster.wait_replicas(lambda n: n == 1, "the scale-down to 1 replica after the load", 30)
