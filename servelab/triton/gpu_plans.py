"""Where the Triton notebooks put a model's instances, for the GPUs present.

The original lab's node has two GPUs: 05 goes 1 instance on GPU 0 → 2 on each of GPUs 0 and 1 → 4 on
each, and 06's scaled step is ``count: 2, gpus: [0, 1]``. A host with one GPU keeps the counts on GPU 0,
a CPU host lists no GPUs (``instance_steps``, ``onnx_step``; the notebooks apply them through
``servelab.lab.triton_steps.set_instances``). Triton reads ``count`` in an instance group as *per listed
GPU*: ``count: 2, gpus: [0, 1]`` starts 2 instances on each GPU.
"""

from __future__ import annotations

from collections.abc import Sequence

NODE_GPUS = 2  # the 2×P100 node: the original lab's steps


def spread_gpus(gpus: int) -> tuple[int, ...]:
    """The GPUs a scaled step spreads over on a host with ``gpus`` GPUs: the node's two (0 and 1)
    where there are two or more, GPU 0 where there is one, none on a CPU."""
    if gpus < 0:
        raise ValueError(f"a host cannot have {gpus} GPUs")
    return (0, 1) if gpus >= 2 else (0,) if gpus == 1 else ()


def instance_steps(gpus: int, counts: Sequence[int] = (1, 2, 4)) -> list[tuple[int, tuple[int, ...]]]:
    """05's instance steps as (count per listed GPU, GPUs): the first on GPU 0, the others spread
    (``spread_gpus``). The node: 1 on GPU 0 → 2 on each of GPUs 0 and 1 → 4 on each; one GPU:
    1 → 2 → 4 on GPU 0; a CPU: the counts alone (no GPUs listed)."""
    spread = spread_gpus(gpus)
    return [(int(count), spread[:1] if i == 0 else spread) for i, count in enumerate(counts)]


def describe(count: int, gpus: Sequence[int]) -> str:
    """A step as the notebooks label it: "1 instance on GPU 0", "2 + 2 instances on GPUs 0 and 1"."""
    if not gpus:
        return f"{count} instance{'s' if count != 1 else ''} on the CPU"
    total = " + ".join([str(count)] * len(gpus))
    where = f"GPU {gpus[0]}" if len(gpus) == 1 else "GPUs " + " and ".join(map(str, gpus))
    return f"{total} instance{'s' if count * len(gpus) != 1 else ''} on {where}"


def onnx_step(gpus: int, count: int = 2) -> tuple[int, tuple[int, ...]]:
    """06's scaled ONNX step: ``count`` per GPU over ``spread_gpus`` (the node: ``count: 2, gpus:
    [0, 1]``; one GPU: 2 on GPU 0; a CPU: ``count`` instances)."""
    return int(count), spread_gpus(gpus)
