"""What to reserve and where: one settings object for the whole provisioning sequence.

Every value comes from an explicit parameter (a notebook's papermill
``parameters`` cell), else an environment variable, else the lab's default —
so a headless run never needs a widget or a prompt to pick a project or site.
"""

from __future__ import annotations

import getpass
import os
import re
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta
from typing import Any

from provisioning import messages as msg
from provisioning.errors import ProvisioningError
from provisioning.times import parse_start

DEFAULT_SITE = "CHI@TACC"
DEFAULT_NODE_TYPE = "gpu_p100"
DEFAULT_IMAGE = "CC-Ubuntu24.04-CUDA"
DEFAULT_DURATION = timedelta(hours=2, minutes=50)
DEFAULT_REPO_REF = "main"
DEFAULT_REMOTE_DIR = "serve-system-lab"
DEFAULT_LEASE_WAIT_MINUTES = 30
CODE_SOURCES = ("git", "upload")

# env variable → field; parameters given explicitly win over these
ENV_VARS = {
    "project": "CHI_PROJECT",
    "site": "CHI_SITE",
    "lease_name": "CHI_LEASE_NAME",
    "lease_id": "CHI_LEASE_ID",
    "lease_start": "CHI_LEASE_START",
    "lease_wait_minutes": "CHI_LEASE_WAIT_MINUTES",
    "server_name": "CHI_SERVER_NAME",
    "node_type": "CHI_NODE_TYPE",
    "image": "CHI_IMAGE",
    "key_name": "CHI_KEY_NAME",
    "floating_ip": "CHI_FLOATING_IP",
    "code_source": "SERVELAB_CODE_SOURCE",
    "repo_url": "SERVELAB_REPO_URL",
    "repo_ref": "SERVELAB_REPO_REF",
    "remote_dir": "SERVELAB_REMOTE_DIR",
}


def user_id() -> str:
    """The student's id used in resource names (``USER``), made safe for OpenStack names."""
    raw = os.environ.get("CHI_USER") or os.environ.get("USER")
    if not raw:
        try:
            raw = getpass.getuser()
        except (KeyError, OSError):  # a uid with no passwd entry (a container run as the host's uid)
            raw = "student"
    return re.sub(r"[^A-Za-z0-9_-]+", "-", raw).strip("-") or "student"


@dataclass(frozen=True)
class ChameleonConfig:
    """Everything the lease → server → node set-up sequence needs, with the lab's defaults."""

    project: str = ""
    site: str = DEFAULT_SITE
    lease_name: str = ""
    lease_id: str = ""  # adopt this lease (made ahead, e.g. in the GUI) instead of looking it up by name
    # when a new lease starts: None/"" now, else an advance reservation (text is parsed: provisioning.times)
    lease_start: datetime | str | None = None
    lease_wait_minutes: int = DEFAULT_LEASE_WAIT_MINUTES  # wait for a lease starting this soon, else stop
    server_name: str = ""
    node_type: str = DEFAULT_NODE_TYPE
    node_count: int = 1
    duration: timedelta = DEFAULT_DURATION
    image: str = DEFAULT_IMAGE
    key_name: str = ""
    floating_ip: str = ""  # use this free floating IP of the project (kept at teardown); "": allocate one
    code_source: str = "upload"
    repo_url: str = ""
    repo_ref: str = DEFAULT_REPO_REF
    remote_dir: str = DEFAULT_REMOTE_DIR
    ssh_user: str = "cc"
    lease_timeout_s: int = 600  # how long after its start time a lease may take to become ACTIVE
    server_timeout_s: int | None = None  # the wait for ACTIVE; None: as long as the lease allows (server.py)
    ssh_timeout_s: int = 10 * 60
    node_command_timeout_s: int = 60 * 60  # one node set-up command (apt, image pulls and builds)
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        user = user_id()
        if not self.lease_name:
            object.__setattr__(self, "lease_name", f"serve_system_{user}")
        if not self.server_name:
            object.__setattr__(self, "server_name", f"node-serve-system-{user}")
        if self.lease_start is not None:
            start = self.lease_start  # a naive datetime means the site's time, as in text
            text = start.isoformat() if isinstance(start, datetime) else str(start)
            object.__setattr__(self, "lease_start", parse_start(text, self.site))
        self.validate()

    def validate(self) -> None:
        """Refuse settings that would only fail later, on the testbed, with a vaguer message."""
        if self.code_source not in CODE_SOURCES:
            choices = ", ".join(CODE_SOURCES)
            raise ProvisioningError(msg.CODE_SOURCE_UNKNOWN(value=self.code_source, choices=choices))
        if self.node_count < 1:
            raise ProvisioningError(msg.NODE_COUNT(value=self.node_count))
        if self.duration <= timedelta(0):
            raise ProvisioningError(msg.DURATION_NOT_POSITIVE(value=self.duration))
        if self.duration > timedelta(days=7):
            raise ProvisioningError(msg.DURATION_TOO_LONG(value=self.duration))
        if self.lease_wait_minutes < 0:
            raise ProvisioningError(msg.LEASE_WAIT_NEGATIVE(value=self.lease_wait_minutes))

    @property
    def start_at(self) -> datetime | None:
        """The new lease's start (aware UTC, whole minute), None for now."""
        return self.lease_start if isinstance(self.lease_start, datetime) else None

    @property
    def duration_text(self) -> str:
        minutes = int(self.duration.total_seconds() // 60)
        return f"{minutes // 60} h {minutes % 60} min"

    def require_project(self) -> str:
        if not self.project:
            raise ProvisioningError(msg.NO_PROJECT())
        return self.project


def _whole_number(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ProvisioningError(msg.NOT_A_WHOLE_NUMBER(name=name, text=text)) from None


def _coerce(name: str, text: str) -> object:
    kinds = {f.name: f.type for f in fields(ChameleonConfig)}
    if kinds.get(name) in ("int", int):
        return _whole_number(ENV_VARS.get(name, name), text)
    return text


def from_env(env: dict[str, str] | None = None, **params: object) -> ChameleonConfig:
    """Settings from ``params`` (non-empty values win), then ``env`` (default os.environ), then defaults.

    ``duration`` may be a timedelta or minutes; ``CHI_LEASE_MINUTES`` sets it from the environment.
    ``lease_start`` (``CHI_LEASE_START``) is ISO 8601 (no offset: the site's time zone) or ``+2h``.
    The project falls back to ``OS_PROJECT_NAME`` (set by an openrc file and on Chameleon's
    Jupyter), which is what python-chi would use by itself.
    """
    env = dict(os.environ if env is None else env)
    values: dict[str, Any] = {}  # str, int or timedelta: names checked below, values by validate()
    for name, var in ENV_VARS.items():
        if env.get(var):
            values[name] = _coerce(name, env[var])
    if not values.get("project") and env.get("OS_PROJECT_NAME"):
        values["project"] = env["OS_PROJECT_NAME"]  # what python-chi itself defaults to (openrc, Jupyter)
    if env.get("CHI_LEASE_MINUTES"):
        values["duration"] = timedelta(minutes=_whole_number("CHI_LEASE_MINUTES", env["CHI_LEASE_MINUTES"]))
    for name, value in params.items():
        if value is None or value == "":
            continue
        if name == "duration" and isinstance(value, (int, float)):
            value = timedelta(minutes=value)
        values[name] = value
    unknown = sorted(set(values) - {f.name for f in fields(ChameleonConfig)})
    if unknown:
        raise ProvisioningError(msg.UNKNOWN_SETTINGS(names=", ".join(unknown)))
    return ChameleonConfig(**values)


def with_changes(config: ChameleonConfig, **changes: Any) -> ChameleonConfig:
    """A copy of ``config`` with ``changes`` applied (and validated again)."""
    return replace(config, **changes)
