"""Where the services run: the ``Stack`` interface (``base``), its implementations for the
``local`` and ``docker`` targets, the local process launchers (``services``), and the instructor's
whole run on the Chameleon node (``chameleon``)."""

from __future__ import annotations

from typing import Any

from servelab.targets.base import TARGETS, Stack, TargetError


def get_stack(target: str, **options: Any) -> Stack:
    """The ``Stack`` for ``target``; ``options`` go to its constructor.

    "chameleon" has no stack here: the experiments run on the node as "docker"
    (``targets.docker.NODE_NOTEBOOKS``); asking for one raises a TargetError that says so.
    """
    from servelab.targets.docker import NODE_NOTEBOOKS, ComposeStack
    from servelab.targets.local import LocalStack

    if target == "chameleon":
        raise TargetError(f"target='chameleon' drives no services from here: {NODE_NOTEBOOKS}")
    classes: dict[str, type[Stack]] = {"local": LocalStack, "docker": ComposeStack}
    if target not in classes:
        raise TargetError(f"unknown target {target!r}: choose one of {', '.join(TARGETS)}")
    return classes[target](**options)
