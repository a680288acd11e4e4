"""The three kinds of credentials the lab meets, with the recording stand-in and python-chi 1.2.10 itself.

* Chameleon's Jupyter (OIDC, ``v3oidcaccesstoken``) and a password openrc (``v3password``): the
  project is chosen with ``use_project``;
* an application credential (``v3applicationcredential``, what an instructor's headless run uses):
  its project is fixed when it is made, Keystone refuses any scope with it, so no ``use_project``;
  the token's project is compared with the configured one instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import provisioning
from provisioning.config import ProvisioningError, from_env
from provisioning.credentials import check_credentials

PROJECT = "CHI-231095"


def config(**changes: object) -> provisioning.ChameleonConfig:
    return from_env(env={}, **{"project": PROJECT, "code_source": "git", "repo_url": "https://x/lab.git",
                               **changes})


def names(fake_chi) -> list[str]:
    return fake_chi.rec.names()


@pytest.mark.parametrize("auth_type", ["v3oidcaccesstoken", "v3password"])
def test_the_hub_and_a_password_openrc_select_the_project(fake_chi, student, auth_type: str) -> None:
    fake_chi.context.settings["auth_type"] = auth_type
    provisioning.preflight(config(), chi=fake_chi.api)
    assert ("context.use_project", (PROJECT,), {}) in fake_chi.rec.calls
    assert "context.session.get_access" not in names(fake_chi)  # the scope is the configured project


def test_an_application_credential_is_not_scoped(fake_chi, student, capsys) -> None:
    fake_chi.context.settings["auth_type"] = "v3applicationcredential"
    provisioning.preflight(config(), chi=fake_chi.api)
    assert "context.use_project" not in names(fake_chi)
    assert names(fake_chi)[:4] == ["context.list_sites", "context.use_site", "context.list_projects",
                                   "context.session.get_access"]


def test_an_application_credential_of_another_project_is_one_clear_line(fake_chi, student) -> None:
    fake_chi.context.settings["auth_type"] = "v3applicationcredential"
    fake_chi.context.projects = [PROJECT, "CHI-777777"]  # the user is in both
    with pytest.raises(ProvisioningError) as caught:
        provisioning.preflight(config(project="CHI-777777"), chi=fake_chi.api)
    message = str(caught.value)
    assert message == (f"the application credential is for project {PROJECT}, not CHI-777777: set "
                       f"project={PROJECT} (CHI_PROJECT), or create an application credential in CHI-777777 "
                       "(GUI: Identity → Application Credentials) and source its openrc")
    assert "\n" not in message
    assert "Lease" not in " ".join(names(fake_chi))  # nothing reserved in the wrong project


def test_the_project_may_be_given_by_its_id(fake_chi, student) -> None:
    fake_chi.context.settings["auth_type"] = "v3applicationcredential"
    fake_chi.context.projects = [PROJECT, fake_chi.context.credential_project[1]]
    provisioning.preflight(config(project=fake_chi.context.credential_project[1]), chi=fake_chi.api)


def test_the_stand_in_refuses_a_scoped_application_credential_as_keystone_does(fake_chi) -> None:
    """What the lab did before: use_project with an application credential, then a 401 on every call."""
    fake_chi.context.settings["auth_type"] = "v3applicationcredential"
    fake_chi.context.use_project(PROJECT)
    with pytest.raises(Exception, match="Application credentials cannot request a scope") as caught:
        fake_chi.context.list_projects()
    assert type(caught.value).__name__ == "Unauthorized"


def test_a_chameleon_run_with_an_application_credential_goes_past_its_checks(fake_chi, student,
                                                                             tmp_path) -> None:
    """``./lab run --target chameleon`` with an application credential's openrc: every step runs."""
    from servelab.lab.runner import run_chameleon

    fake_chi.context.settings["auth_type"] = "v3applicationcredential"

    class Node:
        def capture(self, command: str, timeout: float) -> tuple[int, str]:
            return (0, "started\n") if "setsid nohup" in command else (0, "0\n\n")

        def run(self, command: str, timeout: float) -> int:
            return 3  # nothing to fetch: the test is about the checks

    _, outcome, _ = run_chameleon("quick", results_base=tmp_path, config=config(), chi=fake_chi.api,
                                  shell_for=lambda node: Node(), report=False)
    steps = {s.step: s.ok for s in outcome.steps}
    assert steps["preflight"] and steps["reserve"] and steps["launch"] and steps["node run"]
    assert "context.use_project" not in names(fake_chi) and names(fake_chi)[-1] == "Lease.delete"


# ------------------------------------------------------------------------- the environment, before python-chi
def test_a_project_variable_with_an_application_credential_is_refused_before_python_chi() -> None:
    env = {"OS_AUTH_TYPE": "v3applicationcredential", "OS_APPLICATION_CREDENTIAL_ID": "abc",
           "OS_APPLICATION_CREDENTIAL_SECRET": "s3cret"}
    assert check_credentials(env) == "v3applicationcredential"
    with pytest.raises(ProvisioningError) as caught:
        check_credentials({**env, "OS_PROJECT_NAME": PROJECT})
    assert str(caught.value).startswith("OS_PROJECT_NAME is set with application credentials: Keystone "
                                        "refuses any project scope with them")
    assert "unset OS_PROJECT_NAME" in str(caught.value) and "\n" not in str(caught.value)
    # the hub and password openrc files set OS_PROJECT_NAME: that is their scope
    assert check_credentials({"OS_AUTH_TYPE": "v3oidcaccesstoken", "OS_ACCESS_TOKEN": "t",
                              "OS_PROJECT_NAME": PROJECT}) == "v3oidcaccesstoken"


# ----------------------------------------------------------------------------- python-chi 1.2.10 itself
PROBE = textwrap.dedent('''
    import json, sys
    import chi.context as context
    from keystoneauth1.access import AccessInfoV3

    def scope(auth):
        """The body keystoneauth would POST to /v3/auth/tokens (the request itself is stopped)."""
        sent = {}

        class Session:
            def post(self, url, json=None, **kwargs):
                sent.update(json)
                raise RuntimeError("stop")

        try:
            auth.get_auth_ref(Session())
        except RuntimeError:
            pass
        return sent["auth"].get("scope")

    context.set("project_domain_name", "chameleon")  # what use_site does in 1.2.10 (it needs the network)
    adapter = context.session()
    auth = adapter.session.auth
    out = {"auth_type": context.get("auth_type"), "plugin": type(auth).__name__,
           "scope_before": scope(auth), "has_get_access": callable(getattr(auth, "get_access", None)),
           "access_has_project": all(isinstance(getattr(AccessInfoV3, n), property)
                                     for n in ("project_name", "project_id"))}
    context.use_project(sys.argv[1])
    out["scope_after_use_project"] = scope(context.session().session.auth)
    print(json.dumps(out))
''')


def test_python_chi_scopes_an_application_credential_after_use_project() -> None:
    """Read from python-chi 1.2.10 and keystoneauth themselves (no network): the auth type is the
    ``auth_type`` setting; ``session().session.auth`` is the plugin with ``get_access`` (an
    ``AccessInfoV3`` with the project's name and id); an application credential asks for no scope
    until ``use_project``, after which it asks for the project — which Keystone refuses."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env.update(OS_AUTH_TYPE="v3applicationcredential", OS_APPLICATION_CREDENTIAL_ID="abc",
               OS_APPLICATION_CREDENTIAL_SECRET="s3cret", OS_AUTH_URL="https://keystone.invalid:5000/v3")
    done = subprocess.run([sys.executable, "-c", PROBE, PROJECT], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["auth_type"] == "v3applicationcredential" and out["plugin"] == "ApplicationCredential"
    assert out["has_get_access"] and out["access_has_project"]
    assert out["scope_before"] is None
    assert out["scope_after_use_project"]["project"]["name"] == PROJECT
