"""The deployment's scaling config as data: Ray Serve's options, and the Kubernetes manifests (an HPA and
a KEDA ScaledObject) that say the same thing, field by field. Also the utilisation-driven policy the
notebook compares with Ray's own queue-depth policy. Defaults and why: docs/decisions/2026-11-23-ray-serve.md
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

from servelab.core.notices import SaidPlainly

UTILISATION_POLICY = "servelab.scaling.config:utilisation_policy"


class ScalingConfigError(SaidPlainly, ValueError):
    """A scaling setting makes no sense; the message names it and says what to set."""


@dataclass(frozen=True)
class Scaling:
    """How many replicas, when to add and remove them, and how much each may hold.

    ``fixed`` replicas (autoscaling off) or ``min_replicas``..``max_replicas`` driven by ongoing
    requests per replica (``target_ongoing_requests``; ``policy="utilisation"`` drives it by CPU
    utilisation instead, ``target_utilisation_pct``). The replicas and Serve's proxy push their
    counts to the controller every ``metrics_interval_s``; it averages them over ``look_back_period_s``,
    which must be the longer (Ray warns otherwise, and will refuse it). ``max_queued_requests`` bounds
    the queue in front of the replicas (-1: unbounded): past it a request is answered 503 at once.
    """

    min_replicas: int = 1
    max_replicas: int = 2
    target_ongoing_requests: float = 2.0
    upscale_delay_s: float = 2.0
    downscale_delay_s: float = 6.0
    look_back_period_s: float = 2.0
    metrics_interval_s: float = 0.5  # Ray's default is 10 s (docs/decisions/2026-11-28-lessons-third-pass.md)
    max_ongoing_requests: int = 1000  # the queue forms in the replica, not in Serve's router (why: the note)
    max_queued_requests: int = -1
    fixed: int | None = None
    policy: str = "queue depth"  # or "utilisation"
    target_utilisation_pct: float = 70.0
    num_cpus: float = 0.5
    num_gpus: float = 0.0
    health_check_period_s: float = 2.0  # how soon Serve notices a dead replica (Ray's default: 10 s)
    device_ms: float | None = None  # a device stand-in: each forward pass a wait this long (Food11)

    def __post_init__(self) -> None:
        def bad(name: str, rule: str) -> ScalingConfigError:
            return ScalingConfigError(f"{name}={getattr(self, name)!r}: {rule}")

        if self.fixed is not None and not (isinstance(self.fixed, int) and self.fixed >= 1):
            raise bad("fixed", "must be a whole number of replicas, at least 1 (or None to autoscale)")
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise bad("min_replicas", f"must be at least 1 and at most max_replicas={self.max_replicas}")
        for name in ("target_ongoing_requests", "look_back_period_s", "metrics_interval_s"):
            if not getattr(self, name) > 0:
                raise bad(name, "must be above 0")
        if not self.look_back_period_s > self.metrics_interval_s:
            raise bad("look_back_period_s", "must be longer than metrics_interval_s="
                      f"{self.metrics_interval_s!r}: the controller averages the pushed counts over it, "
                      "and a window no longer than the push interval holds one push at most (Ray warns, "
                      "and will refuse it)")
        for name in ("upscale_delay_s", "downscale_delay_s", "num_cpus", "num_gpus", "health_check_period_s"):
            if getattr(self, name) < 0:
                raise bad(name, "must be 0 or more")
        if self.max_ongoing_requests < 1:
            raise bad("max_ongoing_requests", "must be at least 1")
        if self.max_queued_requests < -1 or self.max_queued_requests == 0:
            raise bad("max_queued_requests", "must be -1 (unbounded) or at least 1")
        if self.policy not in ("queue depth", "utilisation"):
            raise bad("policy", "must be 'queue depth' or 'utilisation'")
        if self.device_ms is not None and not self.device_ms > 0:
            raise bad("device_ms", "must be above 0 (the stand-in's forward pass, in ms), or None: the model")
        if not 0 < self.target_utilisation_pct <= 100:
            raise bad("target_utilisation_pct", "must be above 0 and at most 100")

    @property
    def label(self) -> str:
        stand_in = " on the stand-in" if self.device_ms is not None else ""
        if self.fixed is not None:
            return f"fixed {self.fixed}{stand_in}"
        return f"autoscaled {self.min_replicas}-{self.max_replicas} ({self.policy}){stand_in}"

    def as_data(self) -> dict[str, Any]:
        return asdict(self)

    def init_args(self) -> dict[str, Any]:
        """The replica's constructor arguments (``Food11``): the device stand-in's wait, where set."""
        return {} if self.device_ms is None else {"device_ms": self.device_ms}

    def deployment_options(self) -> dict[str, Any]:
        """Keyword arguments for ``Deployment.options``: Ray Serve's names for the fields above."""
        options: dict[str, Any] = {
            "max_ongoing_requests": self.max_ongoing_requests,
            "max_queued_requests": self.max_queued_requests,
            "ray_actor_options": {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus},
            "health_check_period_s": self.health_check_period_s,
        }
        if self.fixed is not None:
            return {**options, "num_replicas": self.fixed}
        autoscaling: dict[str, Any] = {
            "min_replicas": self.min_replicas, "max_replicas": self.max_replicas,
            "initial_replicas": self.min_replicas, "target_ongoing_requests": self.target_ongoing_requests,
            "upscale_delay_s": self.upscale_delay_s, "downscale_delay_s": self.downscale_delay_s,
            "look_back_period_s": self.look_back_period_s, "metrics_interval_s": self.metrics_interval_s,
        }
        if self.policy == "utilisation":
            autoscaling["policy"] = {"policy_function": UTILISATION_POLICY}
        return {**options, "autoscaling_config": autoscaling}


def field_map(s: Scaling, name: str = "food11") -> list[dict[str, Any]]:
    """One row per Ray Serve setting: its value and the Kubernetes field that does the same job."""
    queue_metric = f"inference_queue_depth (per pod), target averageValue {s.target_ongoing_requests:g}"
    return [
        {"ray_serve": "min_replicas", "value": s.min_replicas, "kubernetes": "HPA spec.minReplicas"},
        {"ray_serve": "max_replicas", "value": s.max_replicas, "kubernetes": "HPA spec.maxReplicas"},
        {"ray_serve": "target_ongoing_requests", "value": s.target_ongoing_requests,
         "kubernetes": f"HPA metrics[0] Pods {queue_metric}; KEDA trigger threshold"},
        {"ray_serve": "upscale_delay_s", "value": s.upscale_delay_s,
         "kubernetes": "HPA behavior.scaleUp.stabilizationWindowSeconds"},
        {"ray_serve": "downscale_delay_s", "value": s.downscale_delay_s,
         "kubernetes": "HPA behavior.scaleDown.stabilizationWindowSeconds; KEDA cooldownPeriod (to zero)"},
        {"ray_serve": "metrics_interval_s", "value": s.metrics_interval_s,
         "kubernetes": "Prometheus scrape_interval (how old a metric can be); KEDA pollingInterval"},
        {"ray_serve": "look_back_period_s", "value": s.look_back_period_s,
         "kubernetes": "the averaging window in the Prometheus query (avg_over_time(...[window]))"},
        {"ray_serve": "max_ongoing_requests", "value": s.max_ongoing_requests,
         "kubernetes": "no HPA field: the server's own concurrency limit (Knative containerConcurrency, "
                       "Triton instance count)"},
        {"ray_serve": "max_queued_requests", "value": s.max_queued_requests,
         "kubernetes": "no HPA field: the server's queue bound (Triton default_queue_policy.max_queue_size, "
                       "an ingress rate limit)"},
        {"ray_serve": "ray_actor_options.num_cpus / num_gpus", "value": f"{s.num_cpus:g} / {s.num_gpus:g}",
         "kubernetes": "container resources.requests cpu / nvidia.com/gpu"},
        {"ray_serve": "health_check_period_s", "value": s.health_check_period_s,
         "kubernetes": "container livenessProbe.periodSeconds"},
        {"ray_serve": "(deployment name)", "value": name, "kubernetes": "scaleTargetRef.name"},
    ]


def hpa_manifest(s: Scaling, name: str = "food11") -> str:
    """A HorizontalPodAutoscaler (autoscaling/v2) on queue depth (+ CPU utilisation) for ``s``."""
    return f"""apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {name}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {name}}}
  minReplicas: {s.min_replicas}
  maxReplicas: {s.max_replicas}
  metrics:
  - type: Pods            # queue depth: ongoing requests per pod (a custom metric via prometheus-adapter)
    pods:
      metric: {{name: inference_queue_depth}}
      target: {{type: AverageValue, averageValue: "{s.target_ongoing_requests:g}"}}
  - type: Resource        # utilisation: what the chapter warns is not enough on its own
    resource:
      name: cpu
      target: {{type: Utilization, averageUtilization: {s.target_utilisation_pct:g}}}
  behavior:
    scaleUp: {{stabilizationWindowSeconds: {s.upscale_delay_s:g}}}
    scaleDown: {{stabilizationWindowSeconds: {s.downscale_delay_s:g}}}
"""


def keda_manifest(s: Scaling, name: str = "food11") -> str:
    """The same policy as a KEDA ScaledObject with a Prometheus trigger."""
    polling = max(1, math.ceil(s.metrics_interval_s))  # KEDA counts whole seconds
    window = max(1, math.ceil(s.look_back_period_s))
    return f"""apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
spec:
  scaleTargetRef: {{name: {name}}}
  minReplicaCount: {s.min_replicas}
  maxReplicaCount: {s.max_replicas}
  pollingInterval: {polling}
  cooldownPeriod: {s.downscale_delay_s:g}
  triggers:
  - type: prometheus
    metadata:
      serverAddress: http://prometheus:9090
      query: sum(avg_over_time(inference_queue_depth{{deployment="{name}"}}[{window}s]))
      threshold: "{s.target_ongoing_requests:g}"
"""


def replica_busy_cores(app: str = "food11") -> float:
    """Cores the app's replica processes used since the previous call (psutil, this node only).

    The process handles (cpu_percent needs the same ones each call) live on the psutil module: Serve
    pickles the policy by value with the globals it names, and a handle holds a lock."""
    import psutil

    if not hasattr(psutil, "_servelab_replicas"):
        psutil._servelab_replicas = {}  # type: ignore[attr-defined]
    replicas: dict[int, Any] = psutil._servelab_replicas  # type: ignore[attr-defined]
    busy, alive = 0.0, set()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if f"ServeReplica:{app}" not in " ".join(proc.info["cmdline"] or []):
            continue
        alive.add(proc.pid)
        try:
            busy += replicas.setdefault(proc.pid, proc).cpu_percent(interval=None) / 100
        except psutil.NoSuchProcess:
            continue
    for pid in set(replicas) - alive:
        replicas.pop(pid)
    return busy


def utilisation_policy(ctx: Any) -> tuple[float, dict[str, Any]]:
    """A Ray Serve autoscaling policy driven by CPU utilisation, as an HPA on pods' CPU would be:
    desired = ceil(replicas × utilisation / target), utilisation being the replicas' busy cores per
    running replica (one ONNX Runtime thread each: one core is 100 %), held ``upscale_delay_s`` /
    ``downscale_delay_s`` before it acts. Runs in Serve's controller; target 70 %
    (``SERVELAB_TARGET_UTILISATION``)."""
    import os

    state = dict(ctx.policy_state or {})
    replicas = max(1, int(ctx.current_num_replicas))
    running = max(1, len(ctx.running_replicas or ()))  # a starting replica computes nothing yet
    utilisation = 100 * replica_busy_cores(ctx.app_name or "food11") / running
    target = float(os.environ.get("SERVELAB_TARGET_UTILISATION", "70"))
    wanted = max(1, math.ceil(running * utilisation / target - 0.05))
    now = time.time()
    if wanted != replicas:
        since = (state.get("since") if state.get("wanted") == wanted else None) or now
        delay = ctx.config.upscale_delay_s if wanted > replicas else ctx.config.downscale_delay_s
        state.update(wanted=wanted, since=since, utilisation=round(utilisation, 1))
        return (wanted if now - since >= delay else replicas), state
    state.update(wanted=wanted, since=None, utilisation=round(utilisation, 1))
    return replicas, state
