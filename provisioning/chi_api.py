"""python-chi's module objects, gathered in one place so they can be passed in.

Every provisioning function takes a ``ChiApi``; by default the real python-chi
modules. Tests pass a recording stand-in with the same surface, which is how
the exact calls (and their arguments) are checked without a Chameleon account;
a test compares the stand-in's signatures with the installed python-chi.
Importing python-chi is deferred: the plan mode and the local target never
need it (nor its credentials).

What is called, per module (python-chi 1.2.x):
  context  list_sites, use_site, use_project (not with application credentials), list_projects, get,
           session (the token's project and credential: ``session().session.auth.get_access(...)``)
  lease    Lease(name, start_date/end_date or duration) (add_node_reservation, submit, delete, and the
           attributes id, name, status — a Blazar read each time —, start_date, node_reservations),
           list_leases
  server   Server (submit, wait, status, id, get_floating_ip, check_connectivity, upload, execute,
           ssh_connection, delete(delete_ips=False)), get_server, get_server_id, get_keypair, list_keypair
  image    get_image
  network  get_network_id(PUBLIC_NETWORK), get_floating_ip, list_floating_ips, and its neutronclient
           (``neutron()``): create_floatingip (allocation), list_ports and update_floatingip (association),
           delete_floatingip (release, by id): provisioning.floating_ip says why not python-chi's own
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from provisioning import messages as msg
from provisioning.config import ProvisioningError


@dataclass
class ChiApi:
    """The python-chi 1.2.x modules the provisioning code calls."""

    context: Any
    lease: Any
    server: Any
    image: Any
    network: Any


def real_chi() -> ChiApi:
    """The installed python-chi (1.2.x); it needs python-blazarclient, which it does not declare."""
    try:
        import chi.context
        import chi.image
        import chi.lease
        import chi.network
        import chi.server
    except ImportError as exc:  # e.g. blazarclient missing
        raise ProvisioningError(msg.PYTHON_CHI_MISSING(error=exc)) from exc
    return ChiApi(context=chi.context, lease=chi.lease, server=chi.server, image=chi.image,
                  network=chi.network)


APPLICATION_CREDENTIAL = "v3applicationcredential"  # keystoneauth's plugin for an application credential


def auth_type(chi: ChiApi) -> str:
    """The keystoneauth plugin python-chi authenticates with (its ``auth_type`` setting, from
    ``OS_AUTH_TYPE``, else ``OS_AUTH_METHOD``, else ``v3token``)."""
    return str(chi.context.get("auth_type") or "")


def uses_application_credential(chi: ChiApi) -> bool:
    return auth_type(chi) == APPLICATION_CREDENTIAL


def use_context(config_project: str, config_site: str, chi: ChiApi) -> None:
    """Select project and site from the settings — never ``choose_project``/``choose_site`` widgets.

    Not the project with an application credential: it is fixed when the credential is made, and
    python-chi 1.2.10's ``use_project`` sets ``project_name`` on the auth plugin, a scope Keystone
    refuses with a 401 ("Application credentials cannot request a scope"). ``token_facts`` tells
    which project the credential's token is for (docs/decisions/2026-11-25-chameleon-robustness.md).
    """
    if not uses_application_credential(chi):
        chi.context.use_project(config_project)
    chi.context.use_site(config_site)


@dataclass(frozen=True)
class TokenFacts:
    """What the credentials' token says about them: its project and, for an application credential,
    whether it is restricted (Keystone's ``application_credential.restricted``; None when the token
    carries no application credential or no such field)."""

    project_name: str
    project_id: str
    restricted: bool | None = None


def token_facts(chi: ChiApi) -> TokenFacts:
    """The token's project (name, id) and an application credential's ``restricted`` flag, read from the
    token itself (keystoneauth's ``AccessInfo``: authenticating is the only call, no Keystone policy
    involved). python-chi's ``session()`` is a keystoneauth ``Adapter`` around the ``Session`` holding
    the auth. Keystone renders ``application_credential: {id, name, restricted}`` into every token
    made with one (docs/decisions/2026-11-25-chameleon-robustness.md)."""
    adapter = chi.context.session()
    access = adapter.session.auth.get_access(adapter.session)
    try:
        credential = access.application_credential  # keystoneauth: KeyError when the token has none
    except (KeyError, AttributeError):
        credential = None
    restricted = credential.get("restricted") if isinstance(credential, dict) else None
    return TokenFacts(str(access.project_name or ""), str(access.project_id or ""),
                      restricted if isinstance(restricted, bool) else None)
