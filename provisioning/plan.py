"""Plan mode: the exact steps provisioning would take, as data, without calling anything.

The local target's headless run passes through the lease and server notebooks
in this mode, and a student can read what will be created before spending
lease time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from provisioning import times
from provisioning.config import ChameleonConfig
from provisioning.node import node_commands
from provisioning.state import CREATED, State, default_state_path
from servelab.core.paths import shown


@dataclass(frozen=True)
class Step:
    """One provisioning step: what it acts on and what it does."""

    name: str
    detail: str


def lease_times(config: ChameleonConfig) -> str:
    """When the new lease would start and end, in the site's time zone and this machine's."""
    start = config.start_at
    if start is None:
        return f"starting now, for {config.duration_text}"
    end = start + config.duration
    return (f"from {times.show_time(start, config.site)} to {times.show_time(end, config.site)} "
            f"({config.duration_text}; an advance reservation)")


def _lease_step(config: ChameleonConfig) -> Step:
    wait = (f"wait until ACTIVE, up to {times.show_span(config.lease_timeout_s)} after its start, printing "
            f"the time left; a lease starting more than {config.lease_wait_minutes} min from now is left "
            "reserved (nothing deleted)")
    if config.lease_id:
        return Step("lease", f"adopt lease {config.lease_id} (by id; kept at teardown unless "
                             f"delete_adopted); {wait}")
    return Step("lease", f"adopt the live lease named {config.lease_name} (kept at teardown unless "
                         f"delete_adopted) or create it: {config.node_count} × {config.node_type} at "
                         f"{config.site}, {lease_times(config)}; " + wait)


def _state_path(state: Path | str | None) -> Path:
    return Path(state) if state is not None else default_state_path()


def provision_plan(config: ChameleonConfig, state: Path | str | None = None) -> list[Step]:
    """The steps of ``provision`` for ``config``, in order; ``state`` is the state file (default one)."""
    project = config.project or "(CHI_PROJECT, required for a real run)"
    steps = [
        Step("context", f"check credentials, site, project, image, key pair "
                        f"{config.key_name or '(python-chi default)'} and code source "
                        f"({config.code_source}), creating nothing; use project {project}, "
                        f"site {config.site}; record what is created or adopted in "
                        f"{shown(str(_state_path(state)))}"),
        _lease_step(config),
        Step("server", f"launch or reuse server {config.server_name} with image {config.image} on the "
                       "lease's node reservation, wait until ACTIVE ("
                       + (f"up to {config.server_timeout_s} s)" if config.server_timeout_s else
                          "as long as the lease allows: until its end less the teardown's margin)")),
        Step("floating-ip", f"associate a floating IP with {config.server_name} unless it has one: "
                            + (f"{config.floating_ip} (floating_ip: the project's, kept at teardown)"
                               if config.floating_ip else "a new allocation for this run (recorded with its "
                               "id, released at teardown)")),
        Step("ssh", f"wait until SSH (port 22) answers (up to {config.ssh_timeout_s} s), user "
                    f"{config.ssh_user}"),
        Step("upload", "node_setup.sh" + (" and the lab's own files (git ls-files, else "
                                          "provisioning/lab-files.txt) as serve-system-lab.tar.gz"
                                          if config.code_source == "upload" else "")),
    ]
    try:
        setup, jupyter = node_commands(config)
    except Exception as exc:  # a missing repo URL is shown in the plan, not raised
        return [*steps, Step("node-setup", f"(cannot run yet: {exc})")]
    return [*steps, Step("node-setup", setup),
            Step("jupyter", f"{jupyter}  (prints the Jupyter URL; the node builds the model "
                            "artefacts first when none came along)")]


def teardown_plan(config: ChameleonConfig, keep_lease: bool = False, delete_adopted: bool = False,
                  state: Path | str | None = None, lease_only: bool = False) -> list[Step]:
    """The steps of ``teardown``: server, the floating IP this lab allocated, then the lease (``lease_only``:
    that lease alone).

    Reads the state file (a local file: no python-chi call) to say what is recorded.
    """
    path = _state_path(state)
    try:
        records = State(path)
    except Exception as exc:  # shown in the plan; teardown itself raises it
        return [Step("state", f"(cannot read {shown(str(path))}: {exc})")]

    def recorded(kind: str) -> str:
        entries = records.live(kind, config)
        if not entries:
            return "none recorded"
        return ", ".join(f"{e.name} ({'reserved ahead, ' if e.keep else ''}{e.origin})" for e in entries)

    rule = ("also what it adopted (delete_adopted)" if delete_adopted
            else "adopted ones are kept (delete_adopted=True deletes them too)")
    steps = [Step("context", f"use project {config.project or '(CHI_PROJECT)'}, site {config.site}; "
                             f"delete what {shown(str(path))} records as created by this lab, {rule}"),
             Step("server", f"delete server {config.server_name} if recorded as created (recorded: "
                            f"{recorded('server')}), without python-chi's floating IP release; wait "
                            "until gone"),
             Step("floating-ip", f"release the floating IP this lab allocated, through python-chi's network "
                                 f"API (recorded: {recorded('floating_ip')})")]
    if lease_only:  # a class slot: no server or floating IP, and no other lease of the state file
        steps = [steps[0], Step("lease", f"delete lease {config.lease_id or config.lease_name} alone "
                                         "(lease_only; as recorded, and adopted too with delete_adopted)")]
    elif keep_lease:
        steps.append(Step("lease", "keep the lease (keep_lease)"))
    else:
        name = config.lease_id or config.lease_name
        created = [e for e in records.live("lease", config) if e.origin == CREATED and not e.keep]
        as_is = "" if created or delete_adopted else "; as it stands: kept"
        steps.append(Step("lease", f"delete lease {name} if recorded as created (recorded: "
                                   f"{recorded('lease')}{as_is})"))
    return steps


def format_plan(steps: list[Step], title: str = "Provisioning plan (nothing is created)") -> str:
    """The plan as text, one numbered line per step."""
    width = max(len(step.name) for step in steps)
    lines = [title] + [f"{i:2d}. {step.name:<{width}}  {step.detail}" for i, step in enumerate(steps, 1)]
    return "\n".join(lines)
