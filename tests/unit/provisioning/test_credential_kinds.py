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
                       '(Identity → Application Credentials → Create at CHI@TACC, tick "Unrestricted '
                       '(dangerous)") and source its openrc')
    assert "\n" not in message
    assert "Lease" not in " ".join(names(fake_chi))  # nothing reserved in the wrong project


def test_a_restricted_application_credential_stops_before_anything_is_reserved(fake_chi, student) -> None:
    """The GUI makes application credentials restricted by default; Blazar's lease needs a Keystone trust,
    which Keystone refuses to them. preflight reads ``restricted`` from the token it fetches anyway."""
    fake_chi.context.settings["auth_type"] = "v3applicationcredential"
    fake_chi.context.credential_restricted = True
    with pytest.raises(ProvisioningError) as caught:
        provisioning.reserve(config(), chi=fake_chi.api)
    message = str(caught.value)
    assert message == (
        "the application credential is restricted (the GUI's default), and Chameleon can make no lease with "
        "it: Blazar asks Keystone for a trust for every lease, which Keystone refuses to restricted "
        "application credentials; create one in CHI@TACC's GUI (Identity → Application Credentials → "
        f'Create) with "Unrestricted (dangerous)" ticked, in project {PROJECT}, and source its openrc')
    assert not [n for n in names(fake_chi) if n.startswith(("lease.", "Lease.", "server.", "Server."))]
    assert names(fake_chi)[-1] == "context.session.get_access"  # the token preflight reads anyway


def test_the_stand_in_refuses_a_lease_to_a_restricted_credential_as_blazar_does(fake_chi, student) -> None:
    """What happened before the check: the lease itself failed, and the lab blamed a busy node type."""
    fake_chi.context.settings["auth_type"] = "v3applicationcredential"
    fake_chi.context.credential_restricted = True
    from provisioning.lease import create_lease
    from provisioning.state import State

    with pytest.raises(ProvisioningError, match="Using method 'application_credential' is not allowed for "
                                                "managing trusts"):
        create_lease(config(), fake_chi.api, State())
    fake_chi.context.credential_restricted = False
    assert create_lease(config(), fake_chi.api, State()).id


def test_an_unrestricted_application_credential_and_the_hub_pass(fake_chi, student) -> None:
    fake_chi.context.settings["auth_type"] = "v3applicationcredential"
    provisioning.preflight(config(), chi=fake_chi.api)
    fake_chi.context.settings["auth_type"] = "v3oidcaccesstoken"
    fake_chi.context.credential_restricted = True  # not an application credential: nothing to read
    provisioning.preflight(config(), chi=fake_chi.api)


def test_restricted_is_read_from_keystones_token_with_keystoneauth() -> None:
    """The token body as Keystone renders it (keystone/common/render_token.py: ``application_credential``
    with ``id``, ``name`` and ``restricted = not unrestricted``), read through keystoneauth's own
    ``AccessInfoV3``; a token without one (the hub's OIDC) gives None."""
    from types import SimpleNamespace

    from keystoneauth1.access import AccessInfoV3

    from provisioning.chi_api import token_facts

    def chi_with(token: dict) -> SimpleNamespace:
        access = AccessInfoV3(body={"token": {"methods": ["application_credential"],
                                              "project": {"id": "0a1b", "name": PROJECT}, **token}})
        auth = SimpleNamespace(get_access=lambda session: access)
        adapter = SimpleNamespace(session=SimpleNamespace(auth=auth))
        return SimpleNamespace(context=SimpleNamespace(session=lambda: adapter))

    for restricted in (True, False):
        token = {"application_credential": {"id": "ac", "name": "lab", "restricted": restricted}}
        facts = token_facts(chi_with(token))  # type: ignore[arg-type]
        assert (facts.project_name, facts.project_id, facts.restricted) == (PROJECT, "0a1b", restricted)
    assert token_facts(chi_with({})).restricted is None  # type: ignore[arg-type]


def test_a_401_with_an_application_credential_names_the_site_whose_gui_makes_it(fake_chi, student) -> None:
    """python-chi 1.2.10's list_projects catches keystone's 401 and raises ResourceError("Failed to retrieve
    projects. Check your credentials.") (chi/context.py): the hint must come for that."""
    from chi.exception import ResourceError

    fake_chi.context.settings["auth_type"] = "v3applicationcredential"
    fake_chi.rec.failures["context.list_projects"] = ResourceError("Failed to retrieve projects. Check your "
                                                                   "credentials.")
    with pytest.raises(ProvisioningError) as caught:
        provisioning.preflight(config(site="CHI@TACC"), chi=fake_chi.api)
    assert str(caught.value).endswith(
        "Chameleon refused the application credential: one works only at the site whose GUI made it and "
        "until it expires: create it in CHI@TACC's GUI (Identity → Application Credentials → Create, tick "
        '"Unrestricted (dangerous)") and source its openrc')


def test_the_project_may_be_given_by_its_id(fake_chi, student) -> None:
    """Issue 42: the credential check accepted a project given by id, then the project check refused it as
    "not one of yours": python-chi 1.2.10's ``list_projects`` returns names only. The token's project id
    is the credential's own."""
    import inspect

    import chi.context

    names_only = "project_names = [project.name for project in projects]"
    assert names_only in inspect.getsource(chi.context.list_projects)
    fake_chi.context.settings["auth_type"] = "v3applicationcredential"
    fake_chi.context.projects = [PROJECT, "CHI-777777"]  # names, as python-chi returns them
    provisioning.preflight(config(project=fake_chi.context.credential_project[1]), chi=fake_chi.api)
    with pytest.raises(ProvisioningError, match="the application credential is for project CHI-231095, not "
                                                "0f0f0f"):
        provisioning.preflight(config(project="0f0f0f"), chi=fake_chi.api)  # another id: not the credential's


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
    steps = {s.phase: s.ok for s in outcome.phases}
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
