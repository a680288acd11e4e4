"""Every check that needs nothing to be created, run before the lease, the server or the IP exist.

A lease is short and a bare-metal boot takes 10–20 minutes, so a setting that
can only fail later (a missing key pair, a repository URL, a mistyped image)
must fail here, in seconds, with one line that says what to do. Order:

1. credentials in the environment (only when python-chi itself is used:
   ``chi=None``; a ``ChiApi`` passed in brings its own), before python-chi is
   imported — see ``provisioning.credentials``;
2. the project is named; the code source is usable (upload: this folder is
   the lab's, with or without git; git: a repository URL is given);
3. read-only python-chi calls: the site exists (``context.list_sites``), the
   project and site are selected (``use_project``/``use_site``; an application
   credential's project is its own: no ``use_project``), the credentials work
   and the project is one of the user's (``context.list_projects``) — with an
   application credential, the one its token is for, and the credential unrestricted —, the
   image exists at the site (``image.get_image``), and the key pair exists there
   (``server.get_keypair``), or — without ``key_name`` — python-chi has its
   Jupyter default (``context.get("keypair_name")`` and a public key file).

Any python-chi/keystoneauth exception becomes a one-line ``ProvisioningError``
naming the check (``provisioning.errors.step``).
"""

from __future__ import annotations

import os
from pathlib import Path

from provisioning import messages as msg
from provisioning.chi_api import (
    ChiApi,
    TokenFacts,
    real_chi,
    token_facts,
    use_context,
    uses_application_credential,
)
from provisioning.config import ChameleonConfig, ProvisioningError
from provisioning.credentials import check_credentials
from provisioning.errors import step
from provisioning.node import checkout_files
from servelab.core.paths import REPO_ROOT

KEY_PAIRS_GUI = "GUI at that site: Compute → Key Pairs"
CREDENTIALS_GUI = "Identity → Application Credentials → Create"
UNRESTRICTED = "\"Unrestricted (dangerous)\""  # Horizon's label; its default is restricted


def check_code_source(config: ChameleonConfig, root: Path = REPO_ROOT) -> None:
    """The code can reach the node: git mode has a URL; upload mode has the lab's folder to pack
    and knows its files (a git clone, or a Trovi import or an unpacked zip with the lab's file list;
    see ``provisioning.node.checkout_files``)."""
    if config.code_source == "git":
        if not config.repo_url:
            raise ProvisioningError(msg.GIT_NEEDS_REPO_URL(what="folder"))
        return
    missing = [name for name in ("lab", "provisioning/node_setup.sh") if not (root / name).is_file()]
    if missing:
        raise ProvisioningError(msg.NOT_THE_LABS_FOLDER(root=root, missing=" or ".join(missing)))
    checkout_files(root)  # a clone or the lab's file list: what belongs to the lab is known


def check_local(config: ChameleonConfig, root: Path = REPO_ROOT) -> None:
    """The checks that need neither python-chi nor the network."""
    config.require_project()
    check_code_source(config, root)


def start_chi(config: ChameleonConfig, chi: ChiApi | None) -> ChiApi:
    """Credentials (for the real python-chi), the project, then the ChiApi to use."""
    if chi is None:
        check_credentials()  # before importing python-chi: its own failure is a keystoneauth traceback
    config.require_project()
    return chi or real_chi()


def select_context(config: ChameleonConfig, chi: ChiApi) -> None:
    """Check the site exists, then select project and site (python-chi's own ``use_site`` only
    prints to stderr when it cannot fetch the site list, and then talks to whatever OS_AUTH_URL says)."""
    api = getattr(chi.context, "RESOURCE_API_URL", "https://api.chameleoncloud.org")
    with step(f"looking up Chameleon's sites ({api})", "check this machine's network connection"):
        sites = list(chi.context.list_sites())
    if config.site not in sites:
        raise ProvisioningError(msg.UNKNOWN_SITE(site=config.site, known=", ".join(sites)))
    what = (f"selecting site {config.site} (the project is the application credential's)"
            if uses_application_credential(chi)
            else f"selecting project {config.project} and site {config.site}")
    with step(what):
        use_context(config.project, config.site, chi)


def credential_hints(config: ChameleonConfig, chi: ChiApi) -> dict[str, str]:
    """Hints, by exception class, for what the credentials may do wrong: an application credential
    works only at the site whose GUI made it (each site has its own Keystone)."""
    if not uses_application_credential(chi):
        return {}
    hint = (f"Chameleon refused the application credential: one works only at the site whose GUI made it "
            f"and until it expires: create it in {config.site}'s GUI ({CREDENTIALS_GUI}, tick "
            f"{UNRESTRICTED}) and source its openrc")
    # python-chi's list_projects turns keystone's 401 into ResourceError("Failed to retrieve projects.
    # Check your credentials."): in this step, that is the refusal
    return {"Unauthorized": hint, "ResourceError": hint}


def check_project(config: ChameleonConfig, chi: ChiApi) -> None:
    """The credentials work (a keystone call) and the project is one of the user's; with an
    application credential, it is also the credential's own project (its token's), and unrestricted."""
    with step(f"checking your credentials with project {config.project} at {config.site}",
              "check the project name and that the credentials are current", credential_hints(config, chi)):
        projects = list(chi.context.list_projects())
    token = check_application_credential(config, chi) if uses_application_credential(chi) else None
    # a project given by id is the credential's own when its token says so (list_projects gives names)
    if config.project not in projects and (token is None or config.project != token.project_id):
        yours = ", ".join(projects) or "none"
        raise ProvisioningError(msg.NOT_YOUR_PROJECT(project=config.project, yours=yours))
    if len(projects) > 1:  # the hub's OS_PROJECT_NAME is only the first of them
        print(f"You are in {len(projects)} projects ({', '.join(projects)}); this lab charges "
              f"{config.project}: to charge another, set project=... (CHI_PROJECT)", flush=True)


def check_application_credential(config: ChameleonConfig, chi: ChiApi) -> TokenFacts:
    """An application credential works in the one project it was made in: the configured project
    must be that one (by name or id), else everything would be reserved and charged elsewhere. And it
    must be unrestricted: Blazar makes a Keystone trust with the caller's token for every lease, and
    Keystone refuses trusts to a restricted one (the GUI's default), so the lease would fail. Both are
    read from the token preflight fetches anyway (docs/decisions/2026-11-25-chameleon-robustness.md)."""
    hints = credential_hints(config, chi)
    with step("reading the application credential's project from its token", hints=hints):
        token = token_facts(chi)
    name, project_id = token.project_name, token.project_id
    if config.project not in (name, project_id):
        raise ProvisioningError(msg.CREDENTIAL_OTHER_PROJECT(
            theirs=name or project_id, project=config.project, gui=CREDENTIALS_GUI, site=config.site,
            unrestricted=UNRESTRICTED))
    if token.restricted:
        raise ProvisioningError(msg.CREDENTIAL_RESTRICTED(site=config.site, gui=CREDENTIALS_GUI,
                                                          unrestricted=UNRESTRICTED, project=config.project))
    return token


def check_image(config: ChameleonConfig, chi: ChiApi) -> None:
    """The server's image exists at the site (python-chi looks it up only when the server is made)."""
    try:
        with step(f"looking up image {config.image} at {config.site}"):
            chi.image.get_image(config.image)
    except ProvisioningError as exc:
        if isinstance(exc.__cause__, ValueError):  # python-chi's CHIValueError: no image by that name
            raise ProvisioningError(msg.NO_SUCH_IMAGE(image=config.image, site=config.site)) from exc
        raise


def _key_pair_names(chi: ChiApi) -> str:
    try:
        names = [str(keypair.name) for keypair in chi.server.list_keypair()]
    except Exception:  # only for the message
        return "could not be listed"
    return ", ".join(names) or "none"


def check_key_pair(config: ChameleonConfig, chi: ChiApi) -> None:
    """The server's key pair exists at the site; without key_name, python-chi's Jupyter default is there.

    python-chi's ``Server(key_name=X)`` does not fail for a missing X (``get_keypair`` returns a
    key pair with no public key), and without ``key_name`` it uses the context's ``keypair_name``
    and ``keypair_public_key`` (set on Chameleon's Jupyter, None elsewhere): both fail only when the
    server is created, after the lease.
    """
    if config.key_name:
        with step(f"looking up key pair {config.key_name} at {config.site}"):
            keypair = chi.server.get_keypair(config.key_name)
        if getattr(keypair, "public_key", None) is None:
            raise ProvisioningError(msg.NO_SUCH_KEY_PAIR(key=config.key_name, site=config.site,
                                                         there=_key_pair_names(chi), gui=KEY_PAIRS_GUI))
    else:
        with step("reading python-chi's default key pair"):
            name = chi.context.get("keypair_name")
            public = chi.context.get("keypair_public_key")
        if not (name and public and os.path.isfile(os.path.expanduser(str(public)))):
            found = f" (its public key file {public} is missing)" if public else ""
            raise ProvisioningError(msg.NO_KEY_PAIR(found=found, site=config.site, gui=KEY_PAIRS_GUI))
    with step("reading python-chi's SSH key setting"):
        private = chi.context.get("keypair_private_key")
    if private and not os.path.isfile(os.path.expanduser(str(private))):
        raise ProvisioningError(msg.NO_PRIVATE_KEY(path=private))


def run_preflight(config: ChameleonConfig, chi: ChiApi | None = None, root: Path = REPO_ROOT) -> ChiApi:
    """Every check, in order; returns the ChiApi with project and site selected."""
    if chi is None:
        check_credentials()  # first: without credentials nothing else matters
    check_local(config, root)
    chi = chi or real_chi()
    select_context(config, chi)
    check_project(config, chi)
    check_image(config, chi)
    check_key_pair(config, chi)
    return chi
