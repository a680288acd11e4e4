"""The scaling config as data: Ray Serve's options, the Kubernetes manifests that mirror it, bad
settings refused with the setting named; the load generator's arrivals and interval rows."""

from __future__ import annotations

import itertools

import pytest
import yaml

from servelab.scaling.config import (
    UTILISATION_POLICY,
    Scaling,
    ScalingConfigError,
    field_map,
    hpa_manifest,
    keda_manifest,
)
from servelab.scaling.load import Phase, _intervals, arrivals, scale_events


def test_autoscaled_options_carry_every_field() -> None:
    s = Scaling(min_replicas=1, max_replicas=3, target_ongoing_requests=2, upscale_delay_s=1,
                downscale_delay_s=5, max_queued_requests=8)
    options = s.deployment_options()
    assert options["max_queued_requests"] == 8
    auto = options["autoscaling_config"]
    assert (auto["min_replicas"], auto["max_replicas"], auto["target_ongoing_requests"]) == (1, 3, 2)
    assert (auto["upscale_delay_s"], auto["downscale_delay_s"]) == (1, 5)
    assert "policy" not in auto and "num_replicas" not in options


def test_fixed_and_utilisation_options() -> None:
    assert Scaling(fixed=2).deployment_options()["num_replicas"] == 2
    assert "autoscaling_config" not in Scaling(fixed=2).deployment_options()
    auto = Scaling(policy="utilisation").deployment_options()["autoscaling_config"]
    assert auto["policy"] == {"policy_function": UTILISATION_POLICY}


@pytest.mark.parametrize("bad", [{"fixed": 0}, {"min_replicas": 3, "max_replicas": 2},
                                 {"max_queued_requests": 0}, {"target_ongoing_requests": 0},
                                 {"policy": "cpu"}, {"upscale_delay_s": -1}])
def test_bad_settings_are_refused_by_name(bad: dict) -> None:
    with pytest.raises(ScalingConfigError, match=next(iter(bad))):
        Scaling(**bad)


def test_manifests_are_yaml_that_mirror_the_config() -> None:
    s = Scaling(min_replicas=1, max_replicas=4, target_ongoing_requests=3, upscale_delay_s=2,
                downscale_delay_s=9)
    hpa = yaml.safe_load(hpa_manifest(s))
    assert hpa["kind"] == "HorizontalPodAutoscaler"
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 4)
    assert hpa["spec"]["metrics"][0]["pods"]["target"]["averageValue"] == "3"
    assert hpa["spec"]["behavior"]["scaleUp"]["stabilizationWindowSeconds"] == 2
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 9
    keda = yaml.safe_load(keda_manifest(s))
    assert keda["spec"]["maxReplicaCount"] == 4
    assert keda["spec"]["triggers"][0]["metadata"]["threshold"] == "3"
    fields = {r["ray_serve"] for r in field_map(s)}
    assert fields >= {"min_replicas", "max_queued_requests", "upscale_delay_s"}


def test_arrivals_follow_the_phases() -> None:
    times = arrivals([Phase(10, 5), Phase(10, 50)], seed=1)
    low = sum(1 for _, p in times if p == 0)
    high = sum(1 for _, p in times if p == 1)
    assert 25 < low < 80 and 400 < high < 600
    assert all(a <= b for (a, _), (b, _) in itertools.pairwise(times))
    with pytest.raises(ValueError, match="rate > 0"):
        Phase(5, 0)


def test_intervals_and_scale_events() -> None:
    requests = [{"t_sent": 0.1, "t_done": 0.3, "status": 200, "latency_ms": 200.0},
                {"t_sent": 0.5, "t_done": 1.5, "status": 503, "latency_ms": 5.0},
                {"t_sent": 0.9, "t_done": 1.8, "status": 200, "latency_ms": 900.0}]
    samples = [{"t": 1.0, "replicas": 1, "cpu_util_pct": 50.0},
               {"t": 2.0, "replicas": 2, "cpu_util_pct": 90.0}]
    rows = _intervals(requests, samples, [Phase(1, 10), Phase(1, 20)], 1.0, "r")
    assert [r["in_flight"] for r in rows] == [2, 0]
    assert rows[0]["p50_ms"] == 200.0 and rows[1]["shed_503"] == 1 and rows[1]["ok"] == 1
    assert scale_events(rows) == [{"run": "r", "t": 2.0, "from": 1, "to": 2}]
