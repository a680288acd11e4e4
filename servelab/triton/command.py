"""The tritonserver command line: every flag the lab gives Triton, in one place, for every target.

Each Triton the lab starts takes its flags from ``FLAGS``, rendered for a ``Launch``:
- the local target's process: ``servelab.triton.server.TritonServer.argv``;
- the Triton image (``docker/Dockerfile.triton``, ``docker/docker-compose-triton.yaml``): its command is
  ``python3 -m servelab.triton.command [MODEL ...]``, which builds the same line inside the container
  (``Launch.in_container``) and execs it; ``--dry-run`` prints it instead;
- Model Analyzer's Triton (notebook 11): ``model_analyzer_flags``.

A notebook's own server flags (``server_flags``) come last on every target: ``get_stack(target,
triton_flags=[...])`` (``LocalStack``, ``ComposeStack``); a compose stack passes them to the container as
``TRITON_SERVER_FLAGS`` (what to set when running ``docker compose`` by hand).

Adding a flag is one line in ``FLAGS``: ``Flag(name, value, when)``. ``value`` is a ``str.format``
template over ``Launch``'s fields and ``env`` (the environment of the process that builds the line: the
kernel on ``local``, the Triton container on ``docker``), None for a bare switch; ``when`` names the
field (or ``env:NAME``) that must be set for the flag to appear; ``each`` repeats it once per item of a
field (``{item}``). A flag with a key from the environment::

    Flag("--http-restricted-api", "model-repository:admin-key={env[TRITON_ADMIN_KEY]}",
         when="env:TRITON_ADMIN_KEY"),

On ``docker`` that variable must reach the container: name it under ``triton_server``'s ``environment``
in the compose file (``test_every_key_the_flags_read_reaches_the_container`` holds it). This module
imports the standard library only: it runs in the Triton image's own Python (3.10).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

FLAGS_VARIABLE = "TRITON_SERVER_FLAGS"  # a notebook's own server flags, as a compose stack passes them


@dataclass(frozen=True)
class Flag:
    """One tritonserver flag: ``name``, its value (a template, None: a bare switch), when it is given."""

    name: str
    value: str | None = None
    when: str = ""  # a Launch field, or "env:NAME": the flag appears only when that is set
    each: str = ""  # a Launch field holding a sequence: the flag once per item, ``{item}`` its value


# Every flag the lab gives tritonserver, in the order the command line shows them.
FLAGS: tuple[Flag, ...] = (
    Flag("--model-repository", "{repository}"),
    Flag("--model-control-mode", "explicit"),  # the lab loads and reloads single models, in seconds
    Flag("--load-model", "{item}", each="load_models"),  # explicit mode loads only these at start
    Flag("--http-port", "{http_port}", when="http_port"),  # unset: Triton's own (8000, 8001, 8002)
    Flag("--grpc-port", "{grpc_port}", when="grpc_port"),
    Flag("--metrics-port", "{metrics_port}", when="metrics_port"),
    Flag("--http-address", "{address}", when="address"),  # unset: every address (a container's are mapped)
    Flag("--grpc-address", "{address}", when="address"),
    Flag("--backend-directory", "{backend_directory}", when="backend_directory"),  # unset: the image's
    Flag("--backend-config", "python,shm-region-prefix-name={shm_prefix}", when="shm_prefix"),
    Flag("--exit-timeout-secs", "{exit_timeout_s}"),  # a crashed model would hold the stop 30 s
    Flag("--disable-auto-complete-config"),  # the configs are complete; saves a stub start per load
    Flag("--log-verbose", "{verbose:d}"),
)
# Model Analyzer sets these itself (it loads the models it profiles), and passes a bare switch as "… True",
# which tritonserver refuses: docs/decisions/2026-11-28-model-analyzer.md
MODEL_ANALYZER_OWN = ("--model-repository", "--model-control-mode", "--load-model")


@dataclass(frozen=True)
class Launch:
    """What one Triton is started with: the values ``FLAGS`` read, and the notebook's own flags."""

    repository: str = "/models"
    binary: str = "tritonserver"
    load_models: tuple[str, ...] = ()
    http_port: int | None = None
    grpc_port: int | None = None
    metrics_port: int | None = None
    address: str | None = None
    backend_directory: str | None = None
    shm_prefix: str | None = None  # the Python backend's shared-memory regions (found and removed by it)
    exit_timeout_s: int = 5
    verbose: bool = False
    server_flags: tuple[str, ...] = ()  # the notebook's own, after the lab's
    env: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def in_container(cls, models: Sequence[str] = (), env: Mapping[str, str] | None = None) -> Launch:
        """The Triton image's launch: ``/models`` mounted, Triton's own ports, addresses and backends,
        ``models`` loaded at start, the flags ``TRITON_SERVER_FLAGS`` holds."""
        env = dict(os.environ if env is None else env)
        return cls(load_models=tuple(models), server_flags=tuple(shlex.split(env.get(FLAGS_VARIABLE, ""))),
                   env=env)


def _is_set(launch: Launch, when: str) -> bool:
    if when.startswith("env:"):
        return bool(launch.env.get(when[4:]))
    return not when or getattr(launch, when) not in (None, "", ())


def rendered(launch: Launch) -> list[tuple[str, str | None]]:
    """``FLAGS`` for ``launch``: (name, value) in order, a bare switch's value None."""
    values: dict[str, Any] = {f.name: getattr(launch, f.name) for f in fields(launch)}
    out: list[tuple[str, str | None]] = []
    for flag in FLAGS:
        if not _is_set(launch, flag.when):
            continue
        items = getattr(launch, flag.each) if flag.each else [None]
        for item in items:
            value = None if flag.value is None else flag.value.format(**values, item=item)
            out.append((flag.name, value))
    return out


def argv(launch: Launch) -> list[str]:
    """The whole command line: the binary, the lab's flags, then the notebook's own."""
    flags = [name if value is None else f"{name}={value}" for name, value in rendered(launch)]
    return [launch.binary, *flags, *launch.server_flags]


def model_analyzer_flags(launch: Launch) -> dict[str, str]:
    """Model Analyzer's ``triton_server_flags``: the lab's flags as its YAML names them (``http_port``),
    without those it sets itself and without bare switches."""
    return {name[2:].replace("-", "_"): value for name, value in rendered(launch)
            if value is not None and name not in MODEL_ANALYZER_OWN}


def listens_on(line: Sequence[str], http_port: int | str) -> bool:
    """Whether a tritonserver command line (a process's, read from ``/proc``) serves HTTP on ``http_port``."""
    flag = next(f for f in FLAGS if f.when == "http_port")
    return f"{flag.name}={http_port}" in line


def main(args: Sequence[str]) -> int:
    """The Triton image's command: ``python3 -m servelab.triton.command [--dry-run] [MODEL ...]``."""
    dry = "--dry-run" in args
    models = [a for a in args if a != "--dry-run"]
    if any(m.startswith("-") for m in models):
        print(f"servelab.triton.command takes model names to load at start, not flags ({models}): pass "
              f"server flags in ${FLAGS_VARIABLE}", file=sys.stderr)
        return 2
    line = argv(Launch.in_container(models))
    if dry:
        print(shlex.join(line))
        return 0
    sys.stdout.flush()
    os.execvp(line[0], line)
    return 1  # not reached: exec replaced this process


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
