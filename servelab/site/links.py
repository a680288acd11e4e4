"""Where a page of the handout links out: the lab's repository (a file at the built commit), the notebook's
download, and where a student opens it (the notebook in the student's clone on Chameleon's JupyterHub, or
the lab's Trovi artifact).

The repository is ``--repo``, else ``$SERVELAB_REPO_URL`` (the lab's own setting for the node's clone), else
the CI's (GitHub's ``GITHUB_SERVER_URL``/``GITHUB_REPOSITORY``, GitLab's ``CI_PROJECT_URL``), else
pyproject.toml's ``[project.urls] Repository``, else the checkout's ``origin`` when it is a web address;
none found: the site says so, and its pages link no sources. The launch link is ``--launch``, else
``$SERVELAB_LAUNCH_URL``: a ``{notebook}`` in it becomes the page's notebook (``notebooks/NN_name.ipynb``),
an address without one (a Trovi artifact's) is the same on every page; else the notebook in the student's
clone on Chameleon's JupyterHub (``hub/user-redirect/lab/tree/<clone>/{notebook}``, the clone named as
``git clone`` names it). Why: docs/decisions/2026-11-28-gpu-reference-and-site-third-pass.md
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from servelab.core.lab_steps import in_the_hub
from servelab.core.paths import REPO_ROOT

JUPYTERHUB = "https://jupyter.chameleoncloud.org/"
# the notebook in the student's own clone of the lab, in their JupyterHub server (JupyterHub's user-redirect)
HUB_NOTEBOOK = JUPYTERHUB + "hub/user-redirect/lab/tree/{clone}/{notebook}"
PLACEHOLDER = "{notebook}"
IN_THE_HUB = tuple(in_the_hub())  # the rest run in the Jupyter server on the node (02 starts it)
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


def declared_repository(pyproject: Path = REPO_ROOT / "pyproject.toml") -> str:
    """pyproject.toml's ``[project.urls]`` ``Repository`` (or ``Source``), "" when it names none."""
    import tomllib

    try:
        urls = tomllib.loads(pyproject.read_text()).get("project", {}).get("urls", {})
    except (OSError, ValueError):
        return ""
    found = {str(k).lower(): str(v) for k, v in urls.items()} if isinstance(urls, dict) else {}
    return found.get("repository") or found.get("source") or ""


def repository(given: str | None = None) -> str:
    """The lab repository's web address (see above), or ""."""
    env = os.environ
    ci = (f"{env['GITHUB_SERVER_URL']}/{env['GITHUB_REPOSITORY']}"
          if env.get("GITHUB_SERVER_URL") and env.get("GITHUB_REPOSITORY") else env.get("CI_PROJECT_URL", ""))
    for candidate in (given, env.get("SERVELAB_REPO_URL"), ci, declared_repository(),
                      _git("remote", "get-url", "origin")):
        address = web_address(candidate or "")
        if address:
            return address
    return ""


@dataclass(frozen=True)
class Links:
    """The site's links out: ``repo`` (web address or ""), ``ref`` (the commit its files are linked at),
    ``launch`` (where a student opens a notebook: an address, with ``{notebook}`` where the page's goes)."""

    repo: str = ""
    ref: str = "HEAD"
    launch: str = ""

    @classmethod
    def find(cls, repo: str | None = None, launch: str | None = None) -> Links:
        ref = os.environ.get("GITHUB_SHA") or os.environ.get("CI_COMMIT_SHA") or _git("rev-parse", "HEAD")
        return cls(repository(repo), ref or "HEAD", launch or os.environ.get("SERVELAB_LAUNCH_URL") or "")

    @property
    def clone(self) -> str:
        """The folder ``git clone`` makes of the repository (its last name), else this checkout's."""
        name = self.repo.rstrip("/").rsplit("/", 1)[-1] if self.repo else REPO_ROOT.resolve().name
        return name.removesuffix(".git") or "serve-system-lab"

    def launch_for(self, stem: str) -> str:
        """Where a student opens notebook ``stem``: see above."""
        notebook = f"notebooks/{stem}.ipynb"
        if self.launch:
            return self.launch.replace(PLACEHOLDER, notebook)
        return HUB_NOTEBOOK.format(clone=self.clone, notebook=notebook)

    def launch_label(self, stem: str) -> str:
        """The launch link's words."""
        if not self.launch:
            return "Open it in Chameleon's Jupyter"
        if PLACEHOLDER in self.launch:
            return "Open it in Jupyter"
        trovi = "experiment/share" in self.launch or "trovi" in self.launch
        return "Launch on Chameleon (Trovi)" if trovi else "Launch the lab"

    def launch_note(self, stem: str) -> str:
        """What to do after the launch link, and where the notebook runs ("" when nothing)."""
        parts = [] if not self.launch or PLACEHOLDER in self.launch else [f"then open notebooks/{stem}.ipynb"]
        if not self.launch:
            parts.append(f"in your clone of the lab, {self.clone}/")
        if stem[:2] not in IN_THE_HUB:
            parts.append("it runs in your node's Jupyter, whose address 02 prints")
        return "; ".join(parts)

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
