"""What a Triton server is running right now, as a notebook shows it after a config change."""

from __future__ import annotations

import time
from typing import Any

from servelab.core.paths import shown
from servelab.lab.triton_steps import Triton, live_config

# one line per process on the server's host or container: pid, parent pid, threads, command line
PROCESS_LIST = ("import os\n"
                "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
                "    try:\n"
                "        stat = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()\n"
                "        args = open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode()\n"
                "    except (OSError, IndexError):\n"
                "        continue\n"
                "    print(pid, stat[1], stat[17], args.strip() or '-')\n")


# the longest wait for a reload's old stubs to exit; why: docs/decisions/2026-11-23-readable-notebooks.md
STUB_WAIT_S = 60.0


def _stubs(triton: Triton, name: str) -> tuple[set[str], list[list[str]]]:
    """tritonserver's pid(s) on this port, and its Python-backend stub processes serving ``name``."""
    from servelab.triton.command import listens_on

    argv = ["python3", "-c", PROCESS_LIST]
    out = triton.stack.run(argv, service="triton_server", timeout=60).check().stdout
    rows = [line.split(" ", 3) for line in out.splitlines() if line.count(" ") >= 3]
    servers = [r for r in rows if r[3].split()[0].endswith("tritonserver")]
    port = triton.url.rsplit(":", 1)[-1]
    ours = [r for r in servers if listens_on(r[3].split(), port)]
    parents = {r[0] for r in ours or (servers if len(servers) == 1 else [])}
    return parents, [r for r in rows if r[1] in parents and "triton_python_backend_stub" in r[3]
                     and f"/{name}/1/" in r[3]]


def live_instances(triton: Triton, name: str) -> str:
    """The live instance_group in the plan's words (``gpu_configs.describe``): "2 + 2 instances on GPUs
    0 and 1", "4 instances on the CPU"; a GPU group listing no GPUs runs ``count`` on each GPU."""
    from servelab.triton.config import mc
    from servelab.triton.gpu_configs import describe

    parts = []
    for group in live_config(triton, name).instance_group:
        if group.kind == mc.ModelInstanceGroup.KIND_GPU and not group.gpus:
            parts.append(f"{group.count} instance{'s' if group.count != 1 else ''} on each GPU")
        else:
            on_gpu = group.kind == mc.ModelInstanceGroup.KIND_GPU
            parts.append(describe(group.count, list(group.gpus) if on_gpu else []))
    return ", ".join(parts)


def expected_stubs(cfg: Any) -> int | None:
    """Python-backend stub processes a live config asks for: ``count`` per listed GPU (or on the CPU);
    None when a GPU group lists no GPUs (it runs on every GPU the server sees)."""
    from servelab.triton.config import mc

    groups = cfg.instance_group
    if any(g.kind == mc.ModelInstanceGroup.KIND_GPU and not g.gpus for g in groups):
        return None
    return sum(g.count * max(1, len(g.gpus)) for g in groups) or 1


def server_view(triton: Triton, name: str) -> None:
    """What runs on the server now: the Python backend's stub processes of ``name`` (one per instance,
    with their thread counts; ONNX Runtime instances are threads) and, on a GPU host, each GPU's memory.
    Waits (up to ``STUB_WAIT_S``) until the stubs match the config, so what follows measures only them.
    Best effort: a failure is printed, never raised (the measurement that follows must run)."""
    try:
        _server_view(triton, name)
    except Exception as exc:  # a view, not a measurement
        print(f"(could not look at the server's processes: {exc.__class__.__name__}: {str(exc)[:300]})")


def _server_view(triton: Triton, name: str) -> None:
    import shlex

    if triton.stack.has_gpu:
        argv = ["nvidia-smi", "--query-gpu=index,name,memory.used,utilization.gpu", "--format=csv"]
        print("$ " + shlex.join(argv))
        print(triton.stack.run(argv, service="triton_server", timeout=60).check().stdout.rstrip())
    if live_config(triton, name).backend != "python":
        print(f"{name} runs on ONNX Runtime inside the tritonserver process: its instances are threads "
              "there, not processes (the live config above lists them)")
        return
    expected = expected_stubs(live_config(triton, name))
    started = time.monotonic()
    parents, stubs = _stubs(triton, name)
    while expected is not None and len(stubs) != expected and time.monotonic() - started < STUB_WAIT_S:
        time.sleep(0.5)  # a reload's old instances exit after the new ones are ready
        parents, stubs = _stubs(triton, name)
    waited = time.monotonic() - started
    if expected is not None and len(stubs) != expected:
        print(f"warning: {len(stubs)} stub processes of {name} after {STUB_WAIT_S:.0f} s, the config asks "
              f"for {expected}: old ones are still exiting and share the CPU with the measurement below")
    elif waited >= 1:
        print(f"(waited {waited:.0f} s for the previous instances' stub processes to exit)")
    print(f"$ python3 -c '<list /proc: pid, parent, threads, command>'  # children of tritonserver "
          f"(pid {', '.join(sorted(parents)) or '?'}) running {name}")
    print("  pid  threads  command")
    for pid, _parent, threads, args in stubs:
        print(f"{pid:>5}  {threads:>7}  {shown(args)[:120]}")
    print(f"-> {len(stubs)} stub process(es): one per instance of {name}")
