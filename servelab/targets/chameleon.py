"""The instructor's headless run on the Chameleon node: ``./lab run --target chameleon``.

One command covers the node's whole life, in this order:

1. ``preflight``: every check that creates nothing (credentials, project and
   site, key pair, code source). When it fails, nothing is created and no
   SSH command is sent.
2. ``reserve`` and ``launch``: what notebooks 01 and 02 do (lease, server,
   floating IP, node set-up, the model artefacts, the node's Jupyter server).
3. ``node run``: ``./lab run --target docker`` on the node over SSH, its
   progress streamed here. The experiments run on the node, so every client
   and utilisation sample is taken next to the servers.
4. ``fetch``: the node's run folder, packed there and unpacked into this run's
   folder, also after a failed node run (what was measured is kept).
5. ``teardown``: server, then lease, even when a step failed, unless ``keep_node``.

The run's ``run.json`` lists the steps and the node's notebooks; the exit code
and the report say which step failed. The SSH side is a ``NodeShell``: Fabric on
a real run, a recording stand-in in the tests.
"""

from __future__ import annotations

import contextlib
import shlex
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

STEPS = ("preflight", "reserve", "launch", "node run", "fetch", "teardown")


class NodeShell(Protocol):
    """Commands and files on the node, as its login user, from the user's home directory."""

    def run(self, command: str, timeout: float) -> int:
        """Run ``command`` with its output streamed here; its exit code."""

    def get(self, remote_path: str, local_path: Path) -> None:
        """Copy a file from the node."""


class FabricShell:
    """``NodeShell`` over a Fabric ``Connection`` (python-chi's ``Server.ssh_connection``)."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def run(self, command: str, timeout: float) -> int:
        result = self.connection.run(command, warn=True, hide=False, pty=False, in_stream=False,
                                     timeout=timeout)
        return int(result.exited)

    def get(self, remote_path: str, local_path: Path) -> None:
        self.connection.get(remote_path, local=str(local_path))


@dataclass
class StepOutcome:
    """One step of the node's life: whether it went well, how long it took, what happened."""

    step: str
    ok: bool
    seconds: float
    detail: str = ""


@dataclass
class NodeRun:
    """What the chameleon run did: its steps, and the node's notebooks (from its run.json)."""

    run_dir: Path
    steps: list[StepOutcome] = field(default_factory=list)
    notebooks: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.steps) and all(n.get("ok") for n in self.notebooks)

    @property
    def error(self) -> str:
        """The first thing that failed, in a line: a step, else one of the node's notebooks."""
        step = next((s for s in self.steps if not s.ok), None)
        notebook = next((n for n in self.notebooks if not n.get("ok")), None)
        failed_notebook = (notebook.get("error") or notebook.get("name")) if notebook else ""
        if step is not None:
            also = f" — {failed_notebook}" if step.step == "node run" and failed_notebook else ""
            return f"{step.step}: {step.detail}{also}"
        return f"node run: {failed_notebook}" if failed_notebook else ""


def remote_lab_command(remote_dir: str, run_name: str, preset: str, only: Sequence[str] | None) -> str:
    """The node's ``./lab run --target docker``, in the code dir, with the docker group in force.

    ``sg docker`` because the login session that ran the node set-up may not have
    the new group yet; the run folder is named like this run's, so it is found again.
    """
    lab = ["./lab", "run", "--target", "docker", "--preset", preset, "--run-dir", f"results/{run_name}"]
    if only:
        lab += ["--only", *only]
    return f"cd {shlex.quote(remote_dir)} && sg docker -c {shlex.quote(shlex.join(lab))}"


def pack_command(remote_dir: str, run_name: str) -> str:
    """Pack the node's run folder (nothing when the run never made one: the fetch then says so)."""
    return (f"cd {shlex.quote(remote_dir)}/results && test -d {shlex.quote(run_name)} && "
            f"tar -czf {shlex.quote(run_name + '.tar.gz')} {shlex.quote(run_name)}")


def unpack(tarball: Path, run_name: str, run_dir: Path) -> list[str]:
    """The node's run folder's files into ``run_dir`` (its top folder dropped); the names unpacked."""
    names = []
    with tarfile.open(tarball, "r:gz") as tar:
        members = []
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) < 2 or parts[0] != run_name:
                continue  # only the run folder's content
            member.name = str(Path(*parts[1:]))
            members.append(member)
            names.append(member.name)
        tar.extractall(run_dir, members=members, filter="data")  # refuses absolute paths and ..
    return names


class _Steps:
    """Runs the steps in order, timing and recording each; a failed step raises ``_Stop``."""

    def __init__(self, outcome: NodeRun) -> None:
        self.outcome = outcome

    def __call__(self, name: str, action: Callable[[], Any]) -> Any:
        started = time.monotonic()
        print(f"== {name}", flush=True)
        try:
            value = action()
        except Exception as exc:  # every failure becomes the step's one-line reason
            text = str(exc).splitlines()[0] if str(exc) else ""
            # our own errors say what happened; anything else also names its type
            detail = text if isinstance(exc, RuntimeError) and text else f"{type(exc).__name__}: {text}"
            self.outcome.steps.append(StepOutcome(name, False, time.monotonic() - started, detail))
            raise _Stop from exc
        detail = value if isinstance(value, str) else ""
        self.outcome.steps.append(StepOutcome(name, True, time.monotonic() - started, detail))
        return value


class _Stop(Exception):
    """A step failed; its outcome is recorded already."""


def run_on_node(run_dir: Path, preset: str = "quick", only: Sequence[str] | None = None,
                keep_node: bool = False, config: Any = None, chi: Any = None,
                shell_for: Callable[[Any], NodeShell] | None = None,
                node_timeout: float | None = None) -> NodeRun:
    """Provision, run the lab on the node, fetch its results, tear down (see the module's text).

    ``config`` is a ``provisioning.ChameleonConfig`` (default: from the environment);
    ``chi`` replaces the python-chi modules and ``shell_for(node)`` the SSH shell
    (the tests' recording stand-ins). ``node_timeout`` defaults to the lease's length.
    """
    import provisioning

    run_dir = Path(run_dir)
    outcome = NodeRun(run_dir)
    step = _Steps(outcome)
    started = time.monotonic()
    created = False
    try:
        config = step("preflight", lambda: _preflight(provisioning, config, chi))
        created = True  # from here on something may exist on the testbed: always tear down
        step("reserve", lambda: provisioning.reserve(config, chi=chi) and f"lease {config.lease_name}")
        node = step("launch", lambda: provisioning.launch(config, chi=chi))
        shell = (shell_for or (lambda n: FabricShell(n.ssh_connection())))(node)
        command = remote_lab_command(config.remote_dir, run_dir.name, preset, only)
        limit = node_timeout or config.duration.total_seconds()
        node_failed = False
        try:
            step("node run", lambda: _node_run(shell, command, limit))
        except _Stop:
            node_failed = True  # what the node measured before it failed is still fetched
        step("fetch", lambda: _fetch(shell, config.remote_dir, run_dir, outcome))
        if node_failed:
            raise _Stop
    except _Stop:
        pass  # the failed step is recorded in outcome.steps
    finally:
        if created and not keep_node:
            def teardown() -> str:
                provisioning.teardown(config, chi=chi)
                return "server and lease deleted"

            with contextlib.suppress(_Stop):
                step("teardown", teardown)
        elif created:
            print(f"--keep-node: server {config.server_name} and lease {config.lease_name} left running; "
                  "tear down with: python -m provisioning teardown", flush=True)
        outcome.seconds = time.monotonic() - started
    return outcome


def _preflight(provisioning: Any, config: Any, chi: Any) -> Any:
    config = config if config is not None else provisioning.from_env()
    provisioning.preflight(config, chi=chi)
    return config


def _node_run(shell: NodeShell, command: str, limit: float) -> str:
    print(f"$ {command}", flush=True)
    try:
        code = shell.run(command, timeout=limit)
    except Exception as exc:  # Fabric's CommandTimedOut, a dropped connection
        raise RuntimeError(f"the node's lab run stopped after at most {limit / 60:.0f} min: {exc}") from exc
    if code != 0:
        raise RuntimeError(f"./lab run --target docker exited {code} on the node (its output is above; "
                           "the notebooks that ran are in this run's folder)")
    return "./lab run --target docker passed on the node"


def _fetch(shell: NodeShell, remote_dir: str, run_dir: Path, outcome: NodeRun) -> str:
    import json

    name = run_dir.name
    if shell.run(pack_command(remote_dir, name), timeout=600) != 0:
        raise RuntimeError(f"the node has no results/{name} to fetch (the node's run did not start)")
    with tempfile.TemporaryDirectory() as tmp:
        tarball = Path(tmp) / f"{name}.tar.gz"
        shell.get(f"{remote_dir}/results/{name}.tar.gz", tarball)
        names = unpack(tarball, name, run_dir)
    node_summary = run_dir / "run.json"
    if node_summary.exists():
        node = json.loads(node_summary.read_text())
        outcome.notebooks = list(node.get("notebooks", []))
        node_summary.rename(run_dir / "node-run.json")  # kept as the node wrote it
    return f"{len(names)} files from the node's results/{name}"


def summary(outcome: NodeRun, preset: str) -> dict[str, Any]:
    """The run's ``run.json`` (read by the report)."""
    return {"preset": preset, "target": "chameleon", "seconds": round(outcome.seconds, 1), "ok": outcome.ok,
            "error": outcome.error,
            "steps": [{"step": s.step, "ok": s.ok, "seconds": round(s.seconds, 1), "detail": s.detail}
                      for s in outcome.steps],
            "notebooks": outcome.notebooks}
