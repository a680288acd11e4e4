"""The instructor's headless run on the Chameleon node: ``./lab run --target chameleon``.

One command covers the node's whole life, in this order:

1. ``preflight``: every check that creates nothing (credentials, project and site, key pair, code
   source). When it fails, nothing is created and no SSH command is sent.
2. ``reserve`` and ``launch``: what notebooks 01 and 02 do (lease, server, floating IP, node set-up,
   the model artefacts, the node's Jupyter server).
3. ``node run``: ``./lab run --target docker`` on the node over SSH, its progress streamed here, so
   every client and utilisation sample is taken next to the servers. It is started with its deadline
   (the lease's end less the fetch margin, on the wall clock) and stops itself there on the node.
4. ``fetch``: the node's run folder, packed there and unpacked into this run's folder, also after a
   failed node run, and after Ctrl-C, SIGTERM or SIGHUP for up to ``STOPPED_FETCH_S`` (its SSH connect
   included, on a connection of its own; a later signal cuts it short) before the teardown.
5. ``teardown``: what this run created (recorded in ``chameleon-state.json`` in the run's folder),
   even when a step failed or the run was stopped, unless ``keep_node``; what it adopted (found and
   reused) is kept unless ``delete_adopted``.

Everything printed goes to the terminal and always to ``controller.log`` in the run's folder: a
closed terminal (SIGHUP, then EIO on every write) cannot stop the teardown, and a stop reaches it
within seconds at every step but the node run and the fetch, where the stop's fetch comes first (docs/
decisions/2026-11-28-class-day-third-pass.md, 2026-12-01-class-day-fourth-pass.md). ``run.json``
lists the steps and the node's notebooks; the exit code and the report say which step failed. The
SSH side is a ``NodeShell``: Fabric on a real run, a recording stand-in in the tests.
"""

from __future__ import annotations

import contextlib
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from servelab.core.console import logged_output, say
from servelab.remote.shell import FabricShell, NodeShell
from servelab.targets.detached import NodeUnreachable, RemoteRun, follow
from servelab.targets.run_fetch import FETCH_LIMIT_S, STOPPED_FETCH_S, fetch_run

STEPS = ("preflight", "reserve", "launch", "node run", "fetch", "teardown")
# kept from the lease for packing, fetching and tearing down
# why: docs/decisions/2026-11-23-chameleon-lifecycle.md
FETCH_MARGIN_S = 15 * 60.0
MIN_NODE_RUN_S = 10 * 60.0  # a lease with less left than this (after the margin) cannot run the lab
# the lab runs inside the node's Jupyter container (scripts/docker_host.sh run): stopping the host's
# `docker compose exec` would leave it running there, so the deadline stops it there first
STOP_INNER = "sg docker -c 'docker exec servelab-jupyter python -m servelab.lab stop'"
INNER_STOP_WAIT_S = 120.0  # how long `python -m servelab.lab stop` waits for the run's run.json and report
# past the deadline, how long the controller leaves the node to stop its run itself (its watchdog looks
# every few seconds, then the inner stop and the process group's end) before it stops it from here
NODE_STOP_GRACE_S = 4 * 60.0
CONTROLLER_LOG = "controller.log"  # everything the controller printed, in the run's folder


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


class _Steps:
    """Runs the steps in order, timing and recording each; a failed step raises ``_Stop``, a stop (Ctrl-C,
    SIGTERM's ``Terminated``) passes through, ``current`` naming the step it cut."""

    def __init__(self, outcome: NodeRun) -> None:
        self.outcome = outcome
        self.current = ""

    def __call__(self, name: str, action: Callable[[], Any]) -> Any:
        started = time.monotonic()
        say(f"== {name}")
        self.current = name
        try:
            value = action()
        except Exception as exc:  # every failure becomes the step's one-line reason
            text = str(exc).splitlines()[0] if str(exc) else ""
            # our own errors say what happened; anything else also names its type
            detail = text if isinstance(exc, RuntimeError) and text else f"{type(exc).__name__}: {text}"
            self.outcome.steps.append(StepOutcome(name, False, time.monotonic() - started, detail))
            self.current = ""
            raise _Stop from exc
        detail = value if isinstance(value, str) else ""
        self.outcome.steps.append(StepOutcome(name, True, time.monotonic() - started, detail))
        self.current = ""
        return value


class _Stop(Exception):
    """A step failed; its outcome is recorded already."""


def run_on_node(run_dir: Path, preset: str = "quick", only: Sequence[str] | None = None,
                keep_node: bool = False, config: Any = None, chi: Any = None,
                shell_for: Callable[[Any], NodeShell] | None = None,
                node_timeout: float | None = None, delete_adopted: bool = False,
                settings: dict[str, Any] | None = None) -> NodeRun:
    """Provision, run the lab on the node, fetch its results, tear down (see the module's text).

    ``config`` is a ``provisioning.ChameleonConfig`` (default: from the environment and
    ``settings``, e.g. ``lease_start``/``lease_id``); ``chi`` replaces the python-chi modules and
    ``shell_for(node)`` the SSH shell (the tests' recording stand-ins). ``node_timeout`` defaults
    to the time until the lease's end less ``FETCH_MARGIN_S``. What the run creates or adopts is
    recorded in ``<run_dir>/chameleon-state.json``; teardown deletes what it created, adopted
    resources too only with ``delete_adopted``. SIGTERM/SIGHUP fail the running step like an
    exception, Ctrl-C too (the teardown still runs; a signal during the teardown waits for it).
    Output goes to ``<run_dir>/controller.log`` as well; a terminal that is gone is no error.
    """
    run_dir = Path(run_dir)
    with logged_output(run_dir / CONTROLLER_LOG):
        return _run_on_node(run_dir, preset, only, keep_node, config, chi, shell_for, node_timeout,
                            delete_adopted, settings)


def _run_on_node(run_dir: Path, preset: str, only: Sequence[str] | None, keep_node: bool, config: Any,
                 chi: Any, shell_for: Callable[[Any], NodeShell] | None, node_timeout: float | None,
                 delete_adopted: bool, settings: dict[str, Any] | None) -> NodeRun:
    import provisioning
    from provisioning.errors import Terminated, signals_raise

    state = run_dir / provisioning.STATE_NAME
    outcome = NodeRun(run_dir)
    step = _Steps(outcome)
    started = time.monotonic()
    checked = stopped = False
    fetch_now: list[Callable[..., str]] = []  # the fetch, once the node run has started and not fetched
    signals_installed = contextlib.ExitStack()
    signals = signals_installed.enter_context(signals_raise())  # until the teardown is done
    try:
        config = step("preflight", lambda: _preflight(provisioning, config, chi, settings))
        checked = True  # from here on the state file records what exists because of this run
        leases: list[Any] = []
        step("reserve", lambda: _reserve(provisioning, config, chi, state, leases))
        node = step("launch", lambda: provisioning.launch(config, chi=chi, state=state))
        connect = partial(shell_for or _fabric_shell, node)
        remote = RemoteRun(config.remote_dir, run_dir.name)
        command = remote_lab_command(config.remote_dir, run_dir.name, preset, only)
        node_failed = False
        fetch_now.append(partial(_fetch, connect, config.remote_dir, run_dir, outcome))  # its own connection
        try:
            step("node run", lambda: _node_run(connect, remote, command,
                                               _deadline(leases[0], config, node_timeout), config.site))
        except _Stop:
            node_failed = True  # what the node measured before it failed is still fetched
        if signals.received:  # a stop a library turned into an error: still a stop
            stopped = True
            signals.begin_stop()
            raise _Stop  # stopped from outside: what the node has is fetched in a time limit, then teardown
        fetch_in = fetch_now[-1]  # kept until it succeeds: a stop during it fetches once more, time-limited
        try:
            step("fetch", lambda: fetch_in(FETCH_LIMIT_S))
        except _Stop:
            stopped = bool(signals.received)  # SIGTERM/SIGHUP cut the copy: the stop's fetch tries again
            if stopped:
                signals.begin_stop()
            raise
        fetch_now.pop()
        if node_failed:
            raise _Stop
    except _Stop:
        pass  # the failed step is recorded in outcome.steps
    except (Terminated, KeyboardInterrupt) as exc:  # SIGTERM/SIGHUP or Ctrl-C, in any step or between
        signals.begin_stop()  # from here on a signal only prints: the way to the teardown is taken
        stopped = True
        during = f" during {step.current}" if step.current else ""
        outcome.steps.append(StepOutcome("stopped", False, 0.0, f"{str(exc) or 'stopped by Ctrl-C'}{during}"))
    finally:
        signals.begin_stop()  # stopped or done: from here on every signal (Ctrl-C too) only prints
        try:
            if stopped and fetch_now:
                _fetch_when_stopped(step, fetch_now.pop(), outcome, signals)
        finally:
            with signals_installed, signals.deferred("the teardown"):
                _teardown(provisioning, step, config, chi, state, checked, keep_node, delete_adopted)
            outcome.seconds = time.monotonic() - started
    return outcome


def _teardown(provisioning: Any, step: _Steps, config: Any, chi: Any, state: Path, checked: bool,
              keep_node: bool, delete_adopted: bool) -> None:
    """Delete what the state file records as created (adopted too with ``delete_adopted``)."""
    if not checked or not state.exists():
        return  # the preflight failed, or nothing was created or adopted
    if keep_node:
        left = ", ".join(f"{r['kind'].replace('_', ' ')} {r['name']}" for r in _resources(state)
                         if r["fate"] == "live")
        say(f"--keep-node: left running: {left or 'nothing'}; tear down with: python -m provisioning "
            f"teardown --state {state}")
        return

    def teardown() -> str:
        try:
            result = provisioning.teardown(config, chi=chi, state=state, delete_adopted=delete_adopted)
        except provisioning.TeardownError as exc:
            raise RuntimeError(f"{exc.result.line()} — {exc}") from exc
        return str(result.line())

    with contextlib.suppress(_Stop):
        step("teardown", teardown)


def _resources(state: Path) -> list[dict[str, Any]]:
    from provisioning.state import load_resources

    return load_resources(state)


def _preflight(provisioning: Any, config: Any, chi: Any, settings: dict[str, Any] | None = None) -> Any:
    config = config if config is not None else provisioning.from_env(**(settings or {}))
    provisioning.preflight(config, chi=chi)
    return config


def _fabric_shell(node: Any) -> NodeShell:
    return FabricShell(node.ssh_connection())


def _deadline(lease: Any, config: Any, node_timeout: float | None = None) -> float:
    """When the node run must stop, on the wall clock (seconds since the epoch): the lease's end less
    FETCH_MARGIN (fetch and teardown), or ``node_timeout`` from now when given. A suspended laptop
    does not move it: it is a time, not a duration (``provisioning.times.utcnow``, the wall clock)."""
    from provisioning.times import to_utc, utcnow

    now = utcnow()
    if node_timeout:
        return now.timestamp() + node_timeout
    end = to_utc(getattr(lease, "end_date", None))
    left = ((end - now).total_seconds() if end else config.duration.total_seconds()) - FETCH_MARGIN_S
    if left < MIN_NODE_RUN_S:
        raise RuntimeError(f"the lease ends in {(left + FETCH_MARGIN_S) / 60:.0f} min, too soon for the lab "
                           f"and the fetch ({FETCH_MARGIN_S / 60:.0f} min kept for it): extend the lease "
                           "(GUI: Reservations → Leases → Update) or reserve a longer one")
    return now.timestamp() + left


def _wall_clock() -> float:
    """Now, in seconds since the epoch (``provisioning.times.utcnow``: the tests' fake clock)."""
    from provisioning.times import utcnow

    return utcnow().timestamp()


def _wall_sleep(seconds: float) -> None:
    from provisioning.times import sleep

    sleep(seconds)


def _reserve(provisioning: Any, config: Any, chi: Any, state: Path, leases: list[Any]) -> str:
    from provisioning.times import show_time, to_utc

    leases.append(provisioning.reserve(config, chi=chi, state=state, require_active=True))
    end = to_utc(getattr(leases[0], "end_date", None))
    return f"lease {config.lease_id or config.lease_name}" + (f", ends {show_time(end, config.site)}"
                                                              if end else "")


def _node_run(connect: Callable[[], NodeShell], remote: RemoteRun, command: str, deadline: float,
              site: str = "") -> str:
    """Start the lab detached on the node with its own ``deadline`` (or attach to it), then follow its
    output until it ends or the deadline (wall clock, seconds since the epoch) stops it."""
    from datetime import datetime, timezone

    from provisioning.times import show_span, show_time

    until = show_time(datetime.fromtimestamp(deadline, timezone.utc), site)
    say(f"[node run] until {until} at the latest ({show_span(deadline - _wall_clock())} from now: the "
        f"lease's end less {FETCH_MARGIN_S / 60:.0f} min for the fetch and the teardown); the node stops "
        "the run there by itself")
    shell = connect()
    start = remote.start_command(command, deadline=deadline, inner_stop=STOP_INNER)
    say(f"$ {command}\n  (detached on the node: its output in ~/{remote.path('log')}, followed here)")
    code, said = shell.capture(start, timeout=120)
    if code != 0:
        raise RuntimeError(f"could not start the lab on the node (exit {code}): {said.strip()[:200]}")
    if said.strip().endswith("attached"):
        say("[node run] the lab already runs on the node for this run folder: following it")

    try:
        followed = follow(connect, remote, deadline, inner_stop=STOP_INNER, inner_wait_s=INNER_STOP_WAIT_S,
                          stop_grace_s=NODE_STOP_GRACE_S, clock=_wall_clock, sleep=_wall_sleep, shell=shell)
    except NodeUnreachable as exc:
        raise RuntimeError(str(exc)) from exc
    again = f" (reconnected {followed.reconnects} times)" if followed.reconnects else ""
    if followed.vanished:
        raise RuntimeError(f"the node's lab run ended without an exit code{again}: the node rebooted or the "
                           "run was killed there; what it finished is in this run's folder")
    if followed.stopped_at_deadline:
        how = f"; {followed.stop_detail}" if followed.stop_detail else ""
        raise RuntimeError(f"the node's lab run was stopped at the lease's end less "
                           f"{FETCH_MARGIN_S / 60:.0f} min kept for the fetch (by {followed.stopped_by}"
                           f"{how}){again}: what it finished is in this run's folder")
    if followed.exit_code != 0:
        raise RuntimeError(f"./lab run --target docker exited {followed.exit_code} on the node{again} (its "
                           "output is above; the notebooks that ran are in this run's folder)")
    return f"./lab run --target docker passed on the node{again}"


def _fetch_when_stopped(step: _Steps, fetch_in: Callable[..., str], outcome: NodeRun, signals: Any) -> None:
    """After Ctrl-C, SIGTERM or SIGHUP: fetch what the node has (the run goes on there until the teardown
    ends it) within ``STOPPED_FETCH_S``, its SSH connect included, then the teardown. A later signal (Ctrl-C,
    SIGTERM, SIGHUP: a supervisor's second SIGTERM before its SIGKILL) cuts it short; anywhere else during
    the stop a signal only prints (docs/decisions/2026-12-01-class-day-fourth-pass.md)."""
    from provisioning.errors import Terminated

    say(f"[fetch] the run was stopped: fetching what the node has measured so far (up to "
        f"{STOPPED_FETCH_S / 60:.0f} min, connecting included; Ctrl-C again skips it), then the teardown")
    try:
        with signals.cuttable("the stop's fetch"):
            step("fetch", lambda: f"after the stop: {fetch_in(STOPPED_FETCH_S, 'stopped')}")
    except _Stop:
        pass  # recorded: the teardown goes on
    except (Terminated, KeyboardInterrupt) as exc:
        outcome.steps.append(StepOutcome("fetch", False, 0.0, f"skipped ({str(exc) or 'Ctrl-C'} again)"))


def _fetch(connect: Callable[[], NodeShell], remote_dir: str, run_dir: Path, outcome: NodeRun,
           limit_s: float = FETCH_LIMIT_S, tag: str = "") -> str:
    """``fetch_run`` into ``run_dir``; the node's notebooks (its run.json) go into ``outcome``."""
    names, outcome.notebooks = fetch_run(connect, remote_dir, run_dir, limit_s, tag)
    return f"{len(names)} files from the node's results/{run_dir.name}"


def summary(outcome: NodeRun, preset: str) -> dict[str, Any]:
    """The run's ``run.json`` (read by the report), with what the run created or adopted on Chameleon
    and what teardown deleted or left (from ``chameleon-state.json``)."""
    resources = [{key: r[key] for key in ("kind", "name", "id", "origin", "fate", "keep", "detail")}
                 for r in _resources(outcome.run_dir / "chameleon-state.json")]

    def names(**match: str) -> list[str]:
        return [f"{r['kind'].replace('_', ' ')} {r['name']}" for r in resources
                if all(r[k] == v for k, v in match.items())]

    return {"preset": preset, "target": "chameleon", "seconds": round(outcome.seconds, 1), "ok": outcome.ok,
            "error": outcome.error,
            "steps": [{"step": s.step, "ok": s.ok, "seconds": round(s.seconds, 1), "detail": s.detail}
                      for s in outcome.steps],
            "notebooks": outcome.notebooks,
            "chameleon": {"created": names(origin="created"), "adopted": names(origin="adopted"),
                          "deleted": names(fate="deleted"), "already_gone": names(fate="gone"),
                          "left": names(fate="live"), "resources": resources}}
