"""Notebook 10: the Food-11 model on Ray Serve: one replica's capacity, a step load autoscaled on queue
depth and on utilisation, fixed replicas beside it, shedding past capacity, a killed replica.
Sizes and what was measured: docs/decisions/2026-11-23-ray-serve.md
Long on purpose: every measurement on the notebook's one Ray Serve cluster (capacity, the step loads, the
device stand-in, shedding, the kill) shares its deployments and photos; the verdicts are in step10_report,
the plots in step10_views.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from servelab.core.labels import CLASSES
from servelab.core.paths import REPO_ROOT
from servelab.lab.params import LabParams
from servelab.lab.step10_views import describe_replicas as describe_replicas  # re-exported: the notebook
from servelab.lab.step10_views import fig_timeline as fig_timeline  # and the report call them as step.…
from servelab.lab.step10_views import high_load_said
from servelab.lab.step10_views import plot_timeline as plot_timeline
from servelab.lab.tables import record, show_columns
from servelab.results.schema import SCALING, SCALING_SERIES, device_label, relative_spread, trend_spread
from servelab.scaling.cluster import Cluster, cluster_gpus, ray_processes
from servelab.scaling.config import Scaling, field_map, hpa_manifest, keda_manifest
from servelab.scaling.load import LoadRun, Phase, closed_loop, run_schedule, scale_events

# Triton's answer to the same question (the engine of the Triton notebooks): a queue policy with two limits
TRITON_QUEUE_POLICY = """# config.pbtxt: a request that finds 4 waiting is refused on arrival; one that has
# waited 100 ms in the queue is refused then: two limits, and two different waits
dynamic_batching {
  default_queue_policy {
    max_queue_size: 4
    timeout_action: REJECT
    default_timeout_microseconds: 100000
  }
}"""

SUMMARY_COLUMNS = ["label", "sent", "ok", "timeouts", "goodput_rps", "p50_ms", "p99_ms",
                   "replicas_max", "replica_seconds"]


def bodies(count: int = 3) -> list[tuple[bytes, str]]:
    """Sample photos with the label the model gives each (the load generator checks every answer)."""
    import onnxruntime as ort

    from servelab.core.model import ONNX_INPUT, ONNX_OUTPUT
    from servelab.core.preprocess import preprocess_bytes

    session = ort.InferenceSession(str(REPO_ROOT / "artifacts" / "food11.onnx"),
                                   providers=["CPUExecutionProvider"])
    photos = sorted((REPO_ROOT / "data" / "samples").glob("*.jpg"))[:count]
    if not photos:
        raise FileNotFoundError("no sample photos in data/samples: run scripts/setup.sh")
    out = []
    for photo in photos:
        data = photo.read_bytes()
        logits = session.run([ONNX_OUTPUT], {ONNX_INPUT: preprocess_bytes(data)[None]})[0]
        out.append((data, CLASSES[int(logits.argmax())]))
    return out


GPU_SHARE = 0.5  # of a GPU per replica where the cluster has GPUs: two replicas per GPU


def gpu_share(gpus: float, replicas: int) -> float:
    """The GPU share each replica asks for: ``GPU_SHARE``, smaller where the cluster's ``gpus`` cannot
    hold ``replicas`` of it (one GPU and 4 replicas: 0.25 each), 0 without GPUs. Every replica the
    policy allows then fits the GPUs present."""
    if gpus <= 0:
        return 0.0
    return min(GPU_SHARE, gpus / max(1, replicas))


def replica_gpus() -> float:
    """The running Ray cluster's GPUs the replicas can use: none where this Python's onnxruntime has no
    CUDA provider (the lab's venv installs the CPU build; the replicas import the same packages), said
    once, so that a GPU host without onnxruntime-gpu runs the lesson on the CPU instead of failing."""
    gpus = cluster_gpus()
    if gpus <= 0:
        return 0.0
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        return gpus
    if not _SAID_CPU:
        _SAID_CPU.append(True)
        print(f"The cluster has {gpus:g} GPU(s), but onnxruntime {onnxruntime.__version__} here has no CUDA "
              "provider: the replicas ask for no GPU and run on the CPU (install onnxruntime-gpu, as the "
              "Jupyter image does, to put them on the GPU)")
    return 0.0


_SAID_CPU: list[bool] = []  # replica_gpus said once per process why the replicas stay on the CPU


def policy(p: LabParams, **changes: Any) -> Scaling:
    """The notebook's autoscaling config (``changes``: fields to set, e.g. ``fixed=1``); each replica
    asks for a ``gpu_share`` of the GPUs it can use (``replica_gpus``; none without them)."""
    replicas = max(int(changes.get("fixed") or 0), int(changes.get("max_replicas") or p.scaling_max_replicas))
    base = {"min_replicas": 1, "max_replicas": p.scaling_max_replicas, "target_ongoing_requests": 2.0,
            "upscale_delay_s": 1.0, "downscale_delay_s": 3.0, "look_back_period_s": 1.0,
            "num_gpus": gpu_share(replica_gpus(), replicas)}
    return Scaling(**{**base, **changes})


LAB_AUTOSCALING = ("min_replicas", "max_replicas", "target_ongoing_requests", "upscale_delay_s",
                   "downscale_delay_s", "look_back_period_s", "metrics_interval_s")


def policy_from(text: str, p: LabParams) -> Scaling:
    """The autoscaling config as the student writes it: YAML, as under a deployment of a Serve config file
    (``autoscaling_config:`` and its fields, or the fields alone), checked by Ray Serve's own
    ``AutoscalingConfig``; none written: one fixed replica (Serve's default), said in one line."""
    import difflib

    import yaml
    from ray.serve.config import AutoscalingConfig

    from servelab.lab.exercise import StudentError

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise StudentError(f"the autoscaling config is not YAML: {' '.join(str(exc).split())}") from None
    data = data.get("autoscaling_config", data) if isinstance(data, dict) else data
    if not isinstance(data, dict):
        raise StudentError("write the autoscaling config as `field: value` lines (min_replicas: 1 …)")
    if not data:
        print("no autoscaling_config: Serve runs one fixed replica (write min_replicas, max_replicas … to "
              "autoscale)")
        return policy(p, fixed=1)
    for key in data:
        if key not in LAB_AUTOSCALING:
            near = difflib.get_close_matches(str(key), LAB_AUTOSCALING, n=1)
            raise StudentError(f"`{key}` is not a field this lab's runs take: " + (
                f"did you mean `{near[0]}`?" if near else f"write {', '.join(LAB_AUTOSCALING)}"))
    try:
        AutoscalingConfig(**data)  # Ray Serve's own checks (types, min_replicas ≤ max_replicas …)
        return policy(p, **data)
    except (ValueError, TypeError) as exc:  # pydantic's ValidationError, the lab's ScalingConfigError
        said = " ".join(str(exc).split())[:300]
        raise StudentError(f"Ray Serve would refuse this autoscaling config: {said}") from None


def show_policy(s: Scaling) -> pd.DataFrame:
    """Print the HPA and KEDA manifests for ``s``; return the field-by-field table."""
    print("# the same policy as a Kubernetes HorizontalPodAutoscaler\n" + hpa_manifest(s))
    print("# and as a KEDA ScaledObject\n" + keda_manifest(s))
    return pd.DataFrame(field_map(s))


def cluster_up(p: LabParams) -> Cluster:
    """A Ray of this notebook's own, or the cluster ``ray_address`` (else ``$RAY_ADDRESS``) names."""
    import os

    address = p.ray_address or os.environ.get("RAY_ADDRESS") or None
    cluster = Cluster(address=address).start()
    where = f"joined the Ray cluster at {address}" if address else "Ray started on this machine"
    print(f"{where}, Serve up in {cluster.started:.1f} s: {cluster.gpus:g} GPU(s) in the cluster; "
          f"the app will answer at {cluster.url}")
    return cluster


def capacity(cluster: Cluster, p: LabParams, photos: list[tuple[bytes, str]],
             device_ms: float | None = None) -> float:
    """One replica's answers/s with 4 senders back to back (twice: the spread is the noise); on the device
    stand-in where ``device_ms`` is given (``stand_in_ms``)."""
    took = cluster.deploy(policy(p, fixed=1, device_ms=device_ms))
    device = replica_device(cluster, photos[0][0])
    print(f"the replica computes on the {device_label(device) or device or 'device it did not name'}")
    closed_loop(cluster.url, photos, 2, 1.0)  # warm-up
    windows = [closed_loop(cluster.url, photos, 4, 2.0) for _ in range(2)]
    rate = sum(w["throughput_rps"] for w in windows) / len(windows)
    spread = relative_spread([w["throughput_rps"] for w in windows])
    label = "one replica, 4 senders" + (" on the stand-in" if device_ms is not None else "")
    record(SCALING, [{"kind": "capacity", "label": label, "device": device, "device_ms": device_ms,
                      "throughput_rps": round(rate, 2),
                      "throughput_spread": spread, "p50_ms": windows[-1]["p50_ms"],
                      "deploy_s": round(took, 1)}])
    print(f"one replica answers ≈{rate:.1f} requests/s here (windows {spread or 0:.0%} apart)")
    return rate


def stand_in_ms() -> float:
    """The device stand-in's wait: the model's own forward pass at batch 1 on one ONNX Runtime thread, as a
    replica runs it, timed here (the median of 20 after 3 untimed); said in one line."""
    import statistics
    import time

    import onnxruntime as ort

    from servelab.core.model import ONNX_INPUT, ONNX_OUTPUT
    from servelab.core.preprocess import preprocess_bytes

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(REPO_ROOT / "artifacts" / "food11.onnx"), options,
                                   providers=["CPUExecutionProvider"])
    image = preprocess_bytes(bodies(1)[0][0])[None]
    times = []
    for n in range(23):
        started = time.perf_counter()
        session.run([ONNX_OUTPUT], {ONNX_INPUT: image})
        if n >= 3:
            times.append((time.perf_counter() - started) * 1000)
    ms = round(statistics.median(times), 2)
    print(f"the model's forward pass here, batch 1 on one ONNX Runtime thread: {ms:.1f} ms (median of 20): "
          "each stand-in replica waits that long per request, off the CPU")
    return ms


def replica_device(cluster: Cluster, photo: bytes) -> str:
    """Where a replica computes, as the tables record it (``cuda`` or ``cpu``), from its own answer to
    one photo (``Food11``'s ``device``); "" when it does not say."""
    from servelab.scaling.cluster import post

    try:
        said = str(post(cluster.url, photo)[1].get("device") or "")
    except OSError:
        return ""
    return {"GPU": "cuda", "CPU": "cpu"}.get(said, said)


STEP_TIMEOUT_S = 30.0  # each step-load request's timeout (see step_load)


def step_phases(rate: float, p: LabParams) -> list[Phase]:
    low, high = (f * rate for f in p.scaling_rate_fractions[:2])
    seconds = p.scaling_phase_seconds
    return [Phase(seconds[0], low), Phase(seconds[1], high), Phase(seconds[2], low)]


def step_load(cluster: Cluster, s: Scaling, phases: list[Phase], photos: list[tuple[bytes, str]],
              kind: str = "step") -> LoadRun:
    """Deploy ``s``, run the step load, record the summary and the time series."""
    took = cluster.deploy(s)
    print(f"{s.label}: deployed in {took:.1f} s; sending " + " → ".join(
        f"{ph.rate:.1f}/s for {ph.seconds:g} s" for ph in phases))
    # 30 s: the last request of the high phase waits for the whole backlog (utilisation's, on two cores,
    # about 18 s), and one that times out is a harness limit, not the lesson
    # (docs/decisions/2026-12-02-backlog-growth.md)
    run = run_schedule(cluster.url, photos, phases, s.label, cluster.replica_counts,
                       timeout_s=STEP_TIMEOUT_S)
    events = scale_events(run.series)
    high_start = phases[0].seconds
    up = next((e["t"] for e in events if e["to"] > e["from"] and e["t"] >= high_start), None)
    # the autoscaler's decision: the first sample after the step with a replica starting (or added)
    decided = next((x["t"] for x in run.series if x["t"] >= high_start
                    and (x["starting"] > 0 or (up is not None and x["t"] >= up))), None)
    down = next((e["t"] for e in events if e["to"] < e["from"]), None)
    summary = run.summary()
    high = [x for x in run.series if x["phase"] == 1]
    after = [x for x in run.series if x["phase"] == 1 and up is not None and x["t"] > up + 1]
    before = [x for x in high if up is None or x["t"] <= up]
    # the backlog (requests in flight) when the added replica started serving, and as the high load ends
    at_up = next((x["in_flight"] for x in high[:-1] if up is not None and x["t"] >= up), None)
    record(SCALING, [{"kind": kind, **summary, "policy": s.policy if s.fixed is None else "fixed",
                      "device_ms": s.device_ms,
                      "config": s.as_data(), "events": events, "high_starts_s": high_start,
                      "scale_up_after_s": None if up is None else round(up - high_start, 2),
                      "decided_after_s": None if decided is None else round(decided - high_start, 2),
                      "scale_down_at_s": down, "upscale_delay_s": s.upscale_delay_s,
                      "look_back_period_s": s.look_back_period_s, "metrics_interval_s": s.metrics_interval_s,
                      "high_seconds": phases[1].seconds,
                      "p99_before_up_ms": _max(before, "p99_ms"), "p99_after_up_ms": _max(after, "p99_ms"),
                      "p99_after_up_spread": relative_spread([x["p99_ms"] for x in after]),
                      "backlog_at_up": at_up, "backlog_end_high": high[-1]["in_flight"] if high else None,
                      "backlog_end_high_spread": trend_spread([x["in_flight"] for x in high[-5:]]),
                      "sample_interval_s": 1.0}])
    record(SCALING_SERIES, run.series)
    print(high_load_said(run.series, high))
    if decided is not None:
        print(f"after the step: a replica was starting at {decided - high_start:.1f} s, " + (
            f"serving at {up - high_start:.1f} s" if up is not None
            else "never serving before the load ended")
            + " (sampled every second)")
    return run


def _max(rows: list[dict[str, Any]], column: str) -> float | None:
    return max((r[column] for r in rows if r.get(column) is not None), default=None)


SHOWN = {"step": SUMMARY_COLUMNS, "kill": ["label", "sent", "ok", "failed", "in_flight_at_kill",
                                           "killed_at_s", "replaced_after_s", "fewest_running_after_kill"],
         "shedding": ["label", "max_queued_requests", "sent", "ok", "shed_503", "timeouts", "goodput_rps",
                      "p99_ms", "shed_p99_ms"]}


def summaries(kind: str) -> pd.DataFrame:
    """This run's recorded summaries of one ``kind``, shown with the columns ``SHOWN`` names for it, as
    every measurement table is (``common.show_columns``: rounded once, a missing value blank); the run
    metadata each row also carries stays in the frame and the CSV. The first table with a goodput says
    what it is."""
    from servelab.report.terms import define
    from servelab.results.store import read_rows

    rows = pd.DataFrame([r for r in read_rows(SCALING) if r.get("kind") == kind])
    if "goodput_rps" in SHOWN[kind] and (said := define("goodput")):
        print(said)
    return show_columns(rows, SHOWN[kind])


def shedding(cluster: Cluster, rate: float, p: LabParams, photos: list[tuple[bytes, str]]) -> pd.DataFrame:
    """The same overload on one replica twice: an unbounded queue, then ``max_queued_requests``."""
    phases = [Phase(p.scaling_overload_seconds, p.scaling_overload_fraction * rate)]
    for limit in (-1, p.scaling_queue_limit):
        # unbounded: the queue forms in the replica (a deep queue in Serve's router stalls it:
        # docs/decisions/2026-11-23-ray-serve.md); bounded: 2 computing or waiting per replica + `limit`
        s = policy(p, fixed=1) if limit < 0 else policy(p, fixed=1, max_queued_requests=limit,
                                                         max_ongoing_requests=2)
        cluster.deploy(s)
        run = run_schedule(cluster.url, photos, phases, f"queue {'unbounded' if limit < 0 else limit}",
                           cluster.replicas, timeout_s=10)
        message = next((r.get("message") for r in run.requests if r["status"] == 503), None)
        record(SCALING, [{"kind": "shedding", **run.summary(), "max_queued_requests": limit,
                          "p99_spread": relative_spread([x["p99_ms"] for x in run.series]),
                          "rate": round(phases[0].rate, 1), "message_503": message}])
        if message:
            print(f"{run.label}: a shed request's answer: 503 {message!r}")
    return summaries("shedding")


def kill_one(cluster: Cluster, p: LabParams, rate: float, photos: list[tuple[bytes, str]]) -> pd.DataFrame:
    """Two fixed replicas under light load; one is killed 2 s in (SIGKILL; ``ray.kill`` on a joined
    cluster). Records how long until a new replica answered, and what the requests meanwhile got."""
    import time

    from servelab.scaling.cluster import RAYLET_MESSAGES, post, raylet_said

    cluster.deploy(policy(p, fixed=2))
    _, answer = post(cluster.url, photos[0][0], "victim")
    heard = len(RAYLET_MESSAGES)
    killed: dict[str, Any] = {}

    def during(t: float) -> None:  # on the sampler's thread: an error is kept and raised below
        if "at" not in killed and "error" not in killed and t >= 2:
            try:  # a request sent before the kill returned counts as in flight at the kill
                start = time.perf_counter()
                how = cluster.kill_replica(answer)
                done = time.perf_counter()
                killed.update(how=how, at=t + done - start, clock=done)
            except Exception as exc:
                killed["error"] = exc

    run = run_schedule(cluster.url, photos, [Phase(5, 0.5 * rate)], "kill one of 2", cluster.replica_counts,
                       during=during, timeout_s=10)
    if "error" in killed:
        raise killed["error"]
    if "at" not in killed:
        raise RuntimeError("the load ended before the replica was killed: lengthen the run")
    seen = {r.get("replica") for r in run.requests if r["t_done"] < killed["at"]}
    new = [r["t_done"] for r in run.requests if r["status"] == 200 and r.get("replica") not in seen]
    if new:
        replaced_after = min(new) - killed["at"]
    else:  # not within the run: ask until a replica this run has not seen answers
        deadline = time.perf_counter() + 60
        while True:
            status, reply = post(cluster.url, photos[0][0], "after-kill", timeout_s=10)
            if status == 200 and reply.get("replica") not in seen:
                break
            if time.perf_counter() > deadline:
                raise RuntimeError("no new replica answered within 60 s of the kill")
            time.sleep(0.2)
        replaced_after = time.perf_counter() - killed["clock"]
    cluster.wait_replicas(lambda n: n == 2, "two running replicas after the kill", 60)
    failed = [r for r in run.requests if r["status"] != 200]
    statuses = sorted({str(r["status"]) for r in failed})
    held = sum(r["t_sent"] <= killed["at"] < r["t_done"] for r in run.requests)  # in flight at the kill
    sent = [r["t_sent"] - killed["at"] for r in failed]  # each failure's send time from the kill
    fewest = min((x["replicas"] for x in run.series if x["t"] > killed["at"]), default=None)
    record(SCALING, [{"kind": "kill", **run.summary(), "killed_at_s": round(killed["at"], 2),
                      "replaced_after_s": round(replaced_after, 2), "failed": len(failed),
                      "failed_statuses": statuses, "failed_sent_after_kill": sum(s > 0 for s in sent),
                      "failed_sent_s": [round(s, 3) for s in sent],
                      "failed_messages": sorted({str(r.get("message", ""))[:200] for r in failed}),
                      "in_flight_at_kill": held, "fewest_running_after_kill": fewest}])
    print(f"replica (pid {answer['pid']}) killed ({killed['how']}) at {killed['at']:.1f} s; a new replica "
          f"answered {replaced_after:.1f} s later; Serve counted {fewest} running at the fewest; "
          f"{len(failed)} of {len(run.requests)} requests failed meanwhile ({', '.join(statuses) or 'none'};"
          f" {held} in flight at the kill)")
    if failed:
        times = ", ".join(f"{s:+.2f}" for s in sent)
        print(f"failed requests sent at {times} s from the kill; answered {failed[0].get('message')!r}")
    if said := raylet_said(heard):
        print(f"Ray's raylet told this notebook: {said}")
    return summaries("kill")


def multi_node_plan(nodes: int = 2) -> None:
    """Print provisioning's plan for a Ray cluster over ``nodes`` reserved nodes (plan mode: nothing
    is created)."""
    from provisioning.config import ChameleonConfig
    from provisioning.ray_cluster import ray_cluster_plan

    for number, s in enumerate(ray_cluster_plan(ChameleonConfig(), nodes=nodes), 1):
        print(f"{number}. {s.name}: {s.detail}")


def stop(cluster: Cluster) -> None:
    """Shut Serve and Ray down and check that no Ray process is left; raises if one is."""
    from servelab.scaling.load import stop_sender

    stop_sender()
    left = cluster.stop()
    if cluster.address:
        if left:
            raise RuntimeError(f"Serve's actors left in the cluster at {cluster.address}: {left}")
        print(f"Serve stopped: none of its actors is left. The cluster at {cluster.address} keeps running "
              "(it was started with `ray start`): `ray stop` on each node ends it")
        return
    if left:
        raise RuntimeError(f"Ray processes this notebook started are left after shutdown: {left}")
    print(f"Ray stopped: none of the {len(cluster.pids)} processes it started is left")
    others = ray_processes()
    if others:
        print(f"(other Ray processes of this user run on this machine, not this notebook's: {others})")
