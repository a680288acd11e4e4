"""Notebook 10's autoscaling windows as the pinned Ray reads them: its config accepted without the
"`look_back_period_s` must be greater than `metrics_interval_s`" warning, and metrics pushed at the
config's ``metrics_interval_s`` (Ray 2.60 reads the field; the push-interval variables it names instead are
defined but not read yet). Why: docs/decisions/2026-11-28-lessons-third-pass.md."""

from __future__ import annotations

import inspect
import warnings

import pytest

from servelab.scaling.config import Scaling, ScalingConfigError

serve_config = pytest.importorskip("ray.serve.config")


@pytest.mark.parametrize("policy", ["queue depth", "utilisation"])
def test_ray_accepts_the_lab_s_windows_without_a_warning(policy: str) -> None:
    from servelab.lab.params import resolve
    from servelab.lab.step10_scaling_out import policy as lab_policy

    scaling = lab_policy(resolve("local", "quick", scaling_max_replicas=None), policy=policy)
    options = dict(scaling.deployment_options()["autoscaling_config"])
    options.pop("policy", None)  # a custom policy's import path: not a window
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        config = serve_config.AutoscalingConfig(**options)
    assert not [w for w in said if issubclass(w.category, FutureWarning)], [str(w.message) for w in said]
    assert config.look_back_period_s > config.metrics_interval_s == scaling.metrics_interval_s


def test_ray_2_60_pushes_at_the_config_s_metrics_interval() -> None:
    """The replicas and the handles (Serve's proxy) push their counts every ``metrics_interval_s`` of the
    deployment's config: the field, not ``RAY_SERVE_*_AUTOSCALING_METRIC_PUSH_INTERVAL_S`` (defined in
    constants, read nowhere). Fails when a Ray upgrade moves this: then set those variables instead."""
    from ray.serve._private import replica, router

    pushed = inspect.getsource(replica.ReplicaMetricsManager.start_metrics_pusher)
    assert "autoscaling_config.metrics_interval_s" in pushed
    assert "autoscaling_config.metrics_interval_s" in inspect.getsource(router)
    for module in (replica, router):
        assert "AUTOSCALING_METRIC_PUSH_INTERVAL_S" not in inspect.getsource(module)


def test_a_look_back_window_no_longer_than_the_push_interval_is_refused_by_name() -> None:
    with pytest.raises(ScalingConfigError, match=r"look_back_period_s=0\.5: must be longer than "
                                                 r"metrics_interval_s=0\.5"):
        Scaling(look_back_period_s=0.5, metrics_interval_s=0.5)
    with pytest.raises(ScalingConfigError, match="metrics_interval_s"):
        Scaling(metrics_interval_s=0)
