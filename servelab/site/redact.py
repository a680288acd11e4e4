"""What a page of the handout never shows: the machine's own paths and the user name of whoever ran the lab
or builds the site. Applied to every output a page takes from a run (and to the files copied beside it).

- the run's folder, where it ran and where it is read now → ``results/<run>``;
- the lab's checkout (papermill's recorded input path, less ``notebooks/``; the checkout building the site)
  → ``$LAB``; then a home folder → ``~``;
- a lease or server named after a user (``serve_system_<user>``, ``node-serve-system-<user>``) →
  ``serve_system_<netID>``, as the lab's pages name a student's lease;
- what would let a reader reach a node or a project (docs/decisions/2026-12-01-exposure.md): an IPv4
  address other than loopback and ``0.x`` → ``<IP>``, an OpenStack or GPU id (a UUID) → ``<id>``, a token
  in a URL (``token=...``) and a Jupyter token (48 hex digits, as ``./lab jupyter`` makes them) →
  ``<token>``.

Why at build time and what is tested: docs/decisions/2026-11-26-handout-site-second-pass.md
"""

from __future__ import annotations

import contextlib
import getpass
import html
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servelab.core.paths import REPO_ROOT

LAB = "$LAB"  # stands for the lab's folder on the machine that ran it (the index says so)
NET_ID = "<netID>"
# the lab's default names for a student's lease and server (provisioning.config): serve_system_<user>
_NAMED = re.compile(r"\b(serve_system_|node-serve-system-)(?!<)([A-Za-z0-9][A-Za-z0-9_.-]*)")
TEXT_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex", "application/json")
_IPV4 = re.compile(r"(?<![\w.])((?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3})(?![\w.])")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_URL_TOKEN = re.compile(r"(?i)\b(token=)[^\s&\"'<>]+")
_HEX_TOKEN = re.compile(r"(?<![0-9a-fA-F])[0-9a-f]{48}(?![0-9a-fA-F])")


def _user_names() -> set[str]:
    names = {os.environ.get(k, "") for k in ("USER", "LOGNAME", "CHI_USER")}
    with contextlib.suppress(KeyError, OSError):  # a uid with no passwd entry
        names.add(getpass.getuser())
    return {n for n in names if n}


@dataclass(frozen=True)
class Redactor:
    """The replacements for one run, longest path first (a run folder inside the checkout goes first)."""

    paths: tuple[tuple[str, str], ...]
    users: frozenset[str]

    @classmethod
    def for_run(cls, run_dir: Path, notebooks: Iterable[Any] = ()) -> Redactor:
        """The replacements for the run in ``run_dir``, whose executed ``notebooks`` (nbformat) name the
        folders they ran in (papermill's metadata)."""
        run_dir = Path(run_dir)
        name = run_dir.resolve().name
        runs, labs = {str(run_dir.resolve()), str(run_dir.absolute())}, {str(REPO_ROOT.resolve())}
        for nb in notebooks:
            meta = nb.metadata.get("papermill", {}) if nb is not None else {}
            if meta.get("output_path"):
                runs.add(str(Path(meta["output_path"]).parent))
            if meta.get("input_path"):
                labs.add(str(Path(meta["input_path"]).parent.parent))
        homes = {str(Path.home())} | {f"/home/{u}" for u in _user_names()}
        pairs = [(p, f"results/{name}") for p in runs] + [(p, LAB) for p in labs] + [(h, "~") for h in homes]
        # longest first; never a bare "/" or a one-letter folder (it would eat ordinary text)
        pairs = sorted({(a, b) for a, b in pairs if len(a) > 2 and a != "/"}, key=lambda ab: -len(ab[0]))
        return cls(tuple(pairs), frozenset(_user_names()))

    def text(self, value: str, escape: bool = False) -> str:
        """``value`` with the machine's paths and user names replaced; ``escape``: ``value`` is HTML."""
        for path, replacement in self.paths:
            value = re.sub(r"(?<![\w.-])" + re.escape(path) + r"(?![\w.-])", replacement.replace("\\", r"\\"),
                           value)
        named = html.escape(NET_ID) if escape else NET_ID
        value = _NAMED.sub(lambda m: m.group(1) + named, value)
        value = secrets_out(value, escape)
        for user in self.users:
            value = re.sub(rf"(?<![\w.-]){re.escape(user)}@", "user@", value)
        return value

    def output(self, output: Any) -> Any:
        """A notebook output (nbformat) with every text in it redacted; images are left as they are."""
        if "text" in output:
            output["text"] = self.text(_joined(output["text"]))
        if "traceback" in output:
            output["traceback"] = [self.text(line) for line in output["traceback"]]
        if "evalue" in output:
            output["evalue"] = self.text(output["evalue"])
        data = output.get("data", {})
        for mime in TEXT_TYPES:
            if mime in data and not isinstance(data[mime], dict):
                data[mime] = self.text(_joined(data[mime]), escape=mime == "text/html")
        return output

    def file(self, source: Path, target: Path) -> None:
        """Copy a run's text file (``.csv``, ``.json``, ``.jsonl``, ``.html``) with its text redacted."""
        raw = source.read_text(errors="replace")
        target.write_text(self.text(raw, escape=source.suffix == ".html"))


def secrets_out(value: str, escape: bool = False) -> str:
    """``value`` without its tokens, node addresses and resource ids (``escape``: ``value`` is HTML)."""
    def mark(text: str) -> str:
        return html.escape(text) if escape else text

    value = _URL_TOKEN.sub(lambda m: m.group(1) + mark("<token>"), value)
    value = _HEX_TOKEN.sub(lambda _: mark("<token>"), value)
    value = _UUID.sub(lambda _: mark("<id>"), value)
    return _IPV4.sub(lambda m: m.group(1) if m.group(1).startswith(("127.", "0.")) else mark("<IP>"), value)


def _joined(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)
