"""Where a page of the handout links out: the lab's repository (a file at the built commit), the notebook's
download, and where a student launches it (Chameleon's Trovi artifact or its JupyterHub).

The repository is ``--repo``, else ``$SERVELAB_REPO_URL`` (the lab's own setting for the node's clone), else
the CI's (GitHub's ``GITHUB_SERVER_URL``/``GITHUB_REPOSITORY``, GitLab's ``CI_PROJECT_URL``), else the
checkout's ``origin`` when it is a web address; none found: a referenced file is copied into the site
instead. The launch link is ``--launch`` (a Trovi artifact's address), else ``$SERVELAB_LAUNCH_URL``, else
Chameleon's JupyterHub. Why: docs/decisions/2026-11-26-handout-site-second-pass.md
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from servelab.core.paths import REPO_ROOT

JUPYTERHUB = "https://jupyter.chameleoncloud.org/"
# a repository file named in prose: docs/decisions/…md, `docs/ci/gitlab-ci.yml`, (docs/…md); never part of
# an address, nor a markdown link's target ("](docs/…)")
DOC_REFERENCE = re.compile(
    r"(?<![\w/.\-\[<\"'=])(?<!\]\()(`?)(docs/[\w.\-/]+?\.(?:md|ya?ml|txt))\1(?![\w/-])")


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True,
                              timeout=10, check=False)
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def web_address(remote: str) -> str:
    """A git remote as the repository's web address (``git@host:o/r.git`` → ``https://host/o/r``), or ""
    when it is not one (a local folder)."""
    remote = remote.strip()
    ssh = re.fullmatch(r"(?:ssh://)?git@([\w.-]+)[:/](.+?)(?:\.git)?/?", remote)
    if ssh:
        return f"https://{ssh.group(1)}/{ssh.group(2)}"
    web = re.fullmatch(r"(https?://)(?:[^@/]+@)?(.+?)(?:\.git)?/?", remote)  # credentials in it dropped
    return f"{web.group(1)}{web.group(2)}" if web else ""


def repository(given: str | None = None) -> str:
    """The lab repository's web address (see above), or ""."""
    env = os.environ
    ci = (f"{env['GITHUB_SERVER_URL']}/{env['GITHUB_REPOSITORY']}"
          if env.get("GITHUB_SERVER_URL") and env.get("GITHUB_REPOSITORY") else env.get("CI_PROJECT_URL", ""))
    for candidate in (given, env.get("SERVELAB_REPO_URL"), ci, _git("remote", "get-url", "origin")):
        address = web_address(candidate or "")
        if address:
            return address
    return ""


@dataclass(frozen=True)
class Links:
    """The site's links out: ``repo`` (web address or ""), ``ref`` (the commit its files are linked at),
    ``launch`` (where a student opens the lab)."""

    repo: str = ""
    ref: str = "HEAD"
    launch: str = JUPYTERHUB

    @classmethod
    def find(cls, repo: str | None = None, launch: str | None = None) -> Links:
        ref = os.environ.get("GITHUB_SHA") or os.environ.get("CI_COMMIT_SHA") or _git("rev-parse", "HEAD")
        return cls(repository(repo), ref or "HEAD",
                   launch or os.environ.get("SERVELAB_LAUNCH_URL") or JUPYTERHUB)

    @property
    def launch_label(self) -> str:
        if "experiment/share" in self.launch or "trovi" in self.launch:
            return "Launch on Chameleon (Trovi)"
        return "Open Chameleon's Jupyter" if self.launch == JUPYTERHUB else "Launch"

    def file(self, path: str) -> str:
        """The address of a repository file at ``ref``; "" without a repository."""
        if not self.repo:
            return ""
        blob = "-/blob" if "gitlab" in self.repo else "blob"
        return f"{self.repo}/{blob}/{self.ref}/{path}"


def link_doc_references(markdown: str, href: Callable[[str], str]) -> str:
    """``markdown`` with every ``docs/…`` file it names made a link to ``href(path)`` (left as it is where
    that is ""), as inline HTML, so that MyST never takes it for a page of the site."""
    def link(match: re.Match[str]) -> str:
        tick, path = match.group(1), match.group(2)
        address = href(path)
        if not address:
            return match.group(0)
        shown = f"<code>{path}</code>" if tick else path
        return f'<a class="servelab-doc reference external" href="{address}">{shown}</a>'

    return DOC_REFERENCE.sub(link, markdown)


def referenced_file(path: str) -> Path | None:
    """The checkout's copy of a referenced file, or None when it has none (or it is outside the checkout)."""
    found = (REPO_ROOT / path).resolve()
    return found if found.is_file() and found.is_relative_to(REPO_ROOT.resolve()) else None
