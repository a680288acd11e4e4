"""How many cores this process may use: one answer for the FastAPI services,
the Triton stubs and the benchmarks. Free of heavy imports on purpose, since a
Triton Python-backend stub imports it."""

from __future__ import annotations

import os
import platform


def cpu_cores() -> int:
    """Cores this process may run on (respects taskset / container CPU sets)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def cpu_model() -> str:
    """The processor's name as the kernel gives it (``/proc/cpuinfo``), else the platform's; '' if neither."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
