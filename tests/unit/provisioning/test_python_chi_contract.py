"""What the lab relies on in the installed python-chi (1.2.10), read from its source: an upgrade that
changes one of these fails here, with what to re-check, instead of on the testbed.

The stand-in (tests/unit/conftest.py) copies these behaviours; test_provisioning compares its
signatures. Checks read the source through ``ast`` (statements, not formatting) or with its
whitespace collapsed, and look for the one expression that carries the behaviour, so a reformatted
or reordered python-chi still passes and a changed behaviour does not.
Background: docs/decisions/2026-11-23-chameleon-lifecycle.md.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

import chi.lease as chi_lease  # imported, never skipped: the full venv always has python-chi 1.2.10
import chi.network as chi_network
import chi.server as chi_server


def flat(func: Any) -> str:
    """The function's source with all whitespace collapsed (formatting changes do not matter)."""
    return " ".join(inspect.getsource(func).split())


def tree(func: Any) -> ast.FunctionDef:
    node = ast.parse(textwrap.dedent(inspect.getsource(func))).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


def returns(node: ast.AST) -> list[ast.Return]:
    """The return statements of this function (not of functions defined inside it)."""
    found: list[ast.Return] = []

    def visit(item: ast.AST) -> None:
        for child in ast.iter_child_nodes(item):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Return):
                found.append(child)
            visit(child)

    visit(node)
    return found


def idempotent_branch_returns(func: Any) -> tuple[list[ast.Return], list[ast.Return]]:
    """(returns inside ``if idempotent:``, all returns) of a python-chi ``submit``."""
    node = tree(func)
    inside = [r for branch in ast.walk(node) if isinstance(branch, ast.If)
              and isinstance(branch.test, ast.Name) and branch.test.id == "idempotent"
              for r in returns(branch)]
    return inside, returns(node)


def test_server_delete_with_delete_ips_does_not_release_the_floating_ip() -> None:
    """``Server.delete(delete_ips=True)`` passes the IP's id to openstacksdk's network proxy as a raw
    adapter ``delete(url)``: the URL is just the id (``DELETE /v2.0/<id>``, not ``/v2.0/floatingips/<id>``),
    Neutron answers 404 and ``openstack.proxy.Proxy.request`` does not raise (``raise_exc=False``), so
    the IP stays allocated to the project. provisioning calls ``delete(delete_ips=False)`` and releases
    the IP itself (``chi.network.deallocate_floating_ip``). If this fails, python-chi changed the
    release: check whether it now works, then update provisioning.server and the decision note."""
    import keystoneauth1.adapter
    import openstack.network.v2._proxy
    import openstack.proxy

    source = flat(chi_server.Server.delete)
    assert 'conn.network.delete(floating_ip_obj["id"])' in source
    assert source.index("conn.network.delete(") < source.index("delete_server(self.id)")  # IPs first
    assert issubclass(openstack.network.v2._proxy.Proxy, keystoneauth1.adapter.Adapter)
    assert "delete" not in vars(openstack.network.v2._proxy.Proxy)  # Adapter.delete(url): a raw request
    assert inspect.signature(openstack.proxy.Proxy.request).parameters["raise_exc"].default is False


def test_python_chis_association_hides_neutrons_status() -> None:
    """Why provisioning binds the IP through neutronclient itself (``floating_ip.associate_floating_ip``):
    python-chi 1.2.10 catches every ``SDKException`` of ``update_ip`` per port and, after the loop, raises
    a ``ResourceError`` of its own, chained to nothing, so a 502 or 504 cannot be told from a port that
    cannot route (issue 53, finding 10; run over the network in ``test_retries``)."""
    source = flat(chi_server.associate_floating_ip)
    assert "except SDKException: # Ignore errors and try the next port pass" in source
    assert source.rindex("raise exception.ResourceError(") > source.rindex("except SDKException")


def test_server_submit_returns_none_on_a_fresh_create() -> None:
    """``submit(idempotent=True)`` returns a Server only for an existing one: provisioning fetches a
    fresh one by name (``get_server``). Every return must sit in the ``if idempotent:`` branch."""
    inside, everywhere = idempotent_branch_returns(chi_server.Server.submit)
    assert inside and inside == everywhere


def test_lease_submit_returns_nothing_and_waits_only_when_asked() -> None:
    """``Lease.submit(wait_for_active=False, idempotent=False)``: no value (the Lease object itself is
    filled in), no wait; provisioning waits itself, following the start time."""
    inside, everywhere = idempotent_branch_returns(chi_lease.Lease.submit)
    assert all(r.value is None for r in everywhere) and inside == everywhere
    assert "if wait_for_active: self.wait(" in flat(chi_lease.Lease.submit)


def test_lease_dates_are_utc_minutes_and_duration_counts_from_now() -> None:
    """Blazar's format is UTC to the minute; ``Lease`` formats the datetime it gets as it is (so
    provisioning passes UTC) and, given ``duration``, ends it *now* + duration even with a
    ``start_date`` (so an advance reservation passes ``end_date``). Dates read back from Blazar are
    naive datetimes (UTC)."""
    assert chi_lease.BLAZAR_TIME_FORMAT == "%Y-%m-%d %H:%M"
    init = flat(chi_lease.Lease.__init__)
    assert "self.start_date = start_date.strftime(BLAZAR_TIME_FORMAT)" in init
    assert "self.end_date = (utcnow() + duration).strftime(BLAZAR_TIME_FORMAT)" in init
    assert 'datetime.strptime( lease_json.get("start_date"), "%Y-%m-%dT%H:%M:%S.%f" )' in \
        flat(chi_lease.Lease._populate_from_json)


def test_lease_status_is_read_from_blazar_each_time() -> None:
    """provisioning polls ``lease.status`` while it waits: the property must refresh the lease."""
    status = inspect.getattr_static(chi_lease.Lease, "status")
    assert isinstance(status, property) and status.fget is not None
    assert "self.refresh()" in flat(status.fget)


def test_network_floating_ip_functions() -> None:
    """``get_or_create_floating_ip`` returns (ip, allocated here); ``deallocate_floating_ip`` deletes by
    the IP's id through neutron's ``/floatingips/<id>`` (neutronclient raises on 404, unlike the raw
    adapter call above); ``list_floating_ips`` lists the project's IPs as dicts with id and address."""
    assert any(isinstance(r.value, ast.Tuple) and [getattr(e, "id", None) for e in r.value.elts]
               == ["fip", "created"] for r in returns(tree(chi_network.get_or_create_floating_ip)))
    assert "get_free_floating_ip(allocate=False)" in flat(chi_network.get_or_create_floating_ip)
    assert '_neutron.delete_floatingip(get_floating_ip(address)["id"])' in \
        flat(chi_network.deallocate_floating_ip)
    assert 'return neutron().list_floatingips()["floatingips"]' in flat(chi_network.list_floating_ips)


def test_a_new_floating_ip_is_allocated_as_python_chi_does_it() -> None:
    """provisioning allocates an IP for each run with the same call python-chi's own allocation makes
    (``get_or_create_floating_ip`` takes the project's first free IP, possibly another student's):
    neutron ``create_floatingip`` on ``get_network_id(PUBLIC_NETWORK)``; ``neutron`` and
    ``get_network_id`` are what ``chi.network`` offers for it. ``get_floating_ip`` raises for an
    address not in the project (a given ``floating_ip`` that is not there)."""
    source = flat(chi_network.get_or_create_floating_ip)
    assert "network_id = get_network_id(PUBLIC_NETWORK)" in source
    allocation = 'neutron().create_floatingip( {"floatingip": {"floating_network_id": network_id}} )'
    assert f'{allocation}["floatingip"]' in source
    assert chi_network.PUBLIC_NETWORK == "public" and callable(chi_network.neutron)
    assert 'raise CHIValueError(f"Floating IP {ip_address} not found")' in flat(chi_network.get_floating_ip)


def test_get_server_id_returns_none_for_an_unknown_name() -> None:
    """provisioning's ``find_server`` and the wait after a delete rely on None, not an exception."""
    assert "if not servers: return None" in flat(chi_server.get_server_id)


def test_only_the_boot_timeout_is_a_service_error_in_server_wait() -> None:
    """provisioning's ``boot_timed_out``: ``Server.wait`` raises ``ServiceError("Timeout waiting for server to
    reach <status> status")`` when its own timeout passes; a failed status read inside it is ``refresh``'s
    ``ResourceError`` (a connection reset included), which the lab tries again."""
    from chi.exception import ResourceError, ServiceError

    from provisioning.server import BOOT_TIMEOUT_CLASS, BOOT_TIMEOUT_TEXT, boot_timed_out

    wait = flat(chi_server.Server.wait)
    assert 'raise ServiceError(f"Timeout waiting for server to reach {status} status")' in wait
    assert wait.count("raise ") == 1 and "self.refresh()" in wait
    refresh = flat(chi_server.Server.refresh)
    assert 'except Exception as e: raise ResourceError(f"Could not refresh server: {e}")' in refresh
    assert ServiceError.__name__ == BOOT_TIMEOUT_CLASS
    assert boot_timed_out(ServiceError(f"{BOOT_TIMEOUT_TEXT}ACTIVE status"))
    assert not boot_timed_out(ResourceError("Could not refresh server: Connection reset by peer"))
    assert not boot_timed_out(ServiceError("Lease went into ERROR state"))
