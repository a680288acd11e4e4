"""Plan mode: the exact steps provisioning would take, as data, without calling anything.

The local target's headless run passes through the lease and server notebooks
in this mode, and a student can read what will be created before spending
lease time.
"""

from __future__ import annotations

from dataclasses import dataclass

from provisioning.config import ChameleonConfig
from provisioning.node import node_commands


@dataclass(frozen=True)
class Step:
    """One provisioning step: what it acts on and what it does."""

    name: str
    detail: str


def provision_plan(config: ChameleonConfig) -> list[Step]:
    """The steps of ``provision`` for ``config``, in order."""
    project = config.project or "(CHI_PROJECT, required for a real run)"
    steps = [
        Step("context", f"check credentials, site, project, image, key pair "
                        f"{config.key_name or '(python-chi default)'} and code source "
                        f"({config.code_source}), creating nothing; use project {project}, "
                        f"site {config.site}"),
        Step("lease", f"create or reuse lease {config.lease_name}: {config.node_count} × "
                      f"{config.node_type} at {config.site}, duration {config.duration_text}, "
                      f"wait until ACTIVE (up to {config.lease_timeout_s} s)"),
        Step("server", f"launch or reuse server {config.server_name} with image {config.image} on the "
                       f"lease's node reservation, wait until ACTIVE (up to {config.server_timeout_s} s)"),
        Step("floating-ip", f"associate a floating IP with {config.server_name} unless it has one"),
        Step("ssh", f"wait until SSH (port 22) answers (up to {config.ssh_timeout_s} s), user "
                    f"{config.ssh_user}"),
        Step("upload", "node_setup.sh" + (" and this checkout as serve-system-lab.tar.gz"
                                          if config.code_source == "upload" else "")),
    ]
    try:
        setup, jupyter = node_commands(config)
    except Exception as exc:  # a missing repo URL is shown in the plan, not raised
        return [*steps, Step("node-setup", f"(cannot run yet: {exc})")]
    return [*steps, Step("node-setup", setup),
            Step("jupyter", f"{jupyter}  (prints the Jupyter URL; the node builds the model "
                            "artefacts first when none came along)")]


def teardown_plan(config: ChameleonConfig, keep_lease: bool = False) -> list[Step]:
    """The steps of ``teardown``: the server first (with its floating IP), then the lease."""
    steps = [Step("context", f"use project {config.project or '(CHI_PROJECT)'}, site {config.site}"),
             Step("server", f"delete server {config.server_name} and its floating IP, wait until gone")]
    if not keep_lease:
        steps.append(Step("lease", f"delete lease {config.lease_name}"))
    return steps


def format_plan(steps: list[Step], title: str = "Provisioning plan (nothing is created)") -> str:
    """The plan as text, one numbered line per step."""
    width = max(len(step.name) for step in steps)
    lines = [title] + [f"{i:2d}. {step.name:<{width}}  {step.detail}" for i, step in enumerate(steps, 1)]
    return "\n".join(lines)
