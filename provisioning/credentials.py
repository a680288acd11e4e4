"""Are there Chameleon credentials in the environment? Checked before python-chi is imported.

python-chi reads the OpenStack ``OS_*`` variables: an openrc file sets them
(``source CHI-123456-openrc.sh``), and Chameleon's JupyterHub sets them in
every notebook server. Without them python-chi's first call dies deep inside
keystoneauth; this check names what is missing instead, in one line.

It only looks at the variables (no network): whether Chameleon accepts them
is checked afterwards by ``provisioning.checks`` with a read-only call.
Facts from python-chi 1.2.10's ``chi/context.py``: the auth plugin is
``OS_AUTH_TYPE`` (else ``OS_AUTH_METHOD``, else ``v3token``); only plugins
whose name starts with ``v3`` get their options from the environment (so
``password`` never works, ``v3password`` does); the auth URL comes from the
site chosen with ``use_site``, so ``OS_AUTH_URL`` is not needed. With
``v3applicationcredential`` an ``OS_PROJECT_NAME``/``OS_PROJECT_ID`` in the environment becomes a
scope on the plugin, which Keystone refuses for application credentials (their project is fixed).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from provisioning import messages as msg
from provisioning.config import ProvisioningError

HOW_TO_GET_THEM = (
    "run this from Chameleon's Jupyter (jupyter.chameleoncloud.org), where they are set, or first "
    "`source` an openrc file for your project (GUI of the site, CHI@TACC for the lab's P100s: Identity → "
    "Application Credentials → Create, tick \"Unrestricted (dangerous)\": a lease needs it; then download "
    "its openrc)")

# any of these set means someone tried to provide credentials
CREDENTIAL_VARS = ("OS_AUTH_TYPE", "OS_AUTH_METHOD", "OS_APPLICATION_CREDENTIAL_ID",
                   "OS_APPLICATION_CREDENTIAL_NAME", "OS_APPLICATION_CREDENTIAL_SECRET", "OS_USERNAME",
                   "OS_USER_ID", "OS_PASSWORD", "OS_TOKEN", "OS_ACCESS_TOKEN")

# auth plugin → groups of variables; every group needs one of its variables set
NEEDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "v3applicationcredential": (("OS_APPLICATION_CREDENTIAL_ID", "OS_APPLICATION_CREDENTIAL_NAME"),
                                ("OS_APPLICATION_CREDENTIAL_SECRET",)),
    "v3password": (("OS_USERNAME", "OS_USER_ID"), ("OS_PASSWORD",)),
    "v3token": (("OS_TOKEN",),),
    "v3oidcaccesstoken": (("OS_ACCESS_TOKEN",),),  # Chameleon's Jupyter: python-chi refreshes it
    "v3oidcpassword": (("OS_USERNAME",), ("OS_PASSWORD",), ("OS_CLIENT_ID",),
                       ("OS_IDENTITY_PROVIDER",), ("OS_PROTOCOL",)),
}
DEFAULT_AUTH_TYPE = "v3token"  # python-chi's default when OS_AUTH_TYPE is unset
# python-chi reads these into every v3 plugin's project_name/project_id: a scope
SCOPE_VARS = ("OS_PROJECT_NAME", "OS_PROJECT_ID")


def check_credentials(env: Mapping[str, str] | None = None) -> str:
    """Raise ProvisioningError naming what is missing; return the auth plugin python-chi will use."""
    env = os.environ if env is None else env
    present = [var for var in CREDENTIAL_VARS if env.get(var)]
    if not present:
        raise ProvisioningError(msg.NO_CREDENTIALS(how=HOW_TO_GET_THEM))
    auth_type = env.get("OS_AUTH_TYPE") or env.get("OS_AUTH_METHOD") or ""
    if not auth_type:
        raise ProvisioningError(msg.NO_AUTH_TYPE(present=", ".join(present), default=DEFAULT_AUTH_TYPE,
                                                 how=HOW_TO_GET_THEM))
    if not auth_type.startswith("v3"):
        suggested = auth_type.replace("_", "")
        raise ProvisioningError(msg.AUTH_TYPE_NOT_V3(auth_type=auth_type, suggested=suggested))
    needs = list(NEEDS.get(auth_type, ()))
    if auth_type == "v3password" and env.get("OS_USERNAME"):
        needs.append(("OS_USER_DOMAIN_NAME", "OS_USER_DOMAIN_ID"))  # keystone v3: a name is per domain
    missing = [" or ".join(group) for group in needs if not any(env.get(var) for var in group)]
    if missing:
        raise ProvisioningError(msg.CREDENTIALS_INCOMPLETE(auth_type=auth_type, missing=" and ".join(missing),
                                                           how=HOW_TO_GET_THEM))
    scoped = [var for var in SCOPE_VARS if env.get(var)]
    if auth_type == "v3applicationcredential" and scoped:
        raise ProvisioningError(msg.SCOPED_APPLICATION_CREDENTIAL(
            scoped=" and ".join(scoped), verb="is" if len(scoped) == 1 else "are", names=" ".join(scoped)))
    return auth_type
