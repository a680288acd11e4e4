"""Utilisation sampling around a run."""

from __future__ import annotations

import os
import time

from servelab.core.monitor import Utilisation


def _busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(i * i for i in range(2000))


def test_samples_cpu_per_core_and_own_process() -> None:
    with Utilisation(interval=0.1, pids=[os.getpid()]) as util:
        deadline = time.monotonic() + 10  # a loaded CI machine may schedule the sampler late
        while len(util.samples) < 3 and time.monotonic() < deadline:
            _busy(0.3)
    summary = util.summary()
    assert summary["util_samples"] >= 3
    assert len(summary["cpu_per_core_mean_pct"]) == os.cpu_count()
    assert summary["cpu_mean_pct"] > 0 and summary["proc_cpu_mean_pct"] > 10
    frame = util.frame()
    assert {"t", "cpu0_pct", "proc_cpu_pct"} <= set(frame.columns)


def test_gpu_fields_only_where_a_gpu_exists() -> None:
    with Utilisation(interval=0.05) as util:
        time.sleep(0.15)
    summary = util.summary()
    if summary["gpu_count"] == 0:
        assert not [k for k in summary if k.startswith("gpu0")]
    else:
        util = summary["gpu0_util_mean_pct"]  # None where the driver kept no sample of so short a run
        assert (util is None or 0 <= util <= 100) and summary["gpu0_mem_max_mib"] > 0, summary
