"""Provisioning against a recording stand-in of python-chi: the exact calls, reuse, errors, teardown.

Also: the checks that run before anything is created (and create nothing when they fail), the
command line's one-line errors (a real subprocess with a clean environment), and the stand-in's
signatures compared with the installed python-chi.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

import provisioning
from provisioning import ProvisioningError, from_env
from provisioning.credentials import check_credentials
from provisioning.node import NODE_SETUP_SCRIPT, jupyter_url, node_setup_command
from provisioning.plan import format_plan, provision_plan
from servelab.core.paths import REPO_ROOT

LEASE = "serve_system_alice"
SERVER = "node-serve-system-alice"
REPO = "https://git.example.org/serve-lab.git"
FLOATING_IP = "129.114.108.7"  # what the stand-in's associate_floating_ip attaches
JUPYTER_TOKEN = "0123abcd"  # in the stand-in's `./lab jupyter` output
JUPYTER_URL = f"http://{FLOATING_IP}:8888/lab?token={JUPYTER_TOKEN}"


def config(**changes: object) -> provisioning.ChameleonConfig:
    """Git mode by default here: upload mode would pack this whole checkout in every test."""
    return from_env(env={}, project="CHI-231095", **{"code_source": "git", "repo_url": REPO, **changes})


def call(name: str, *args: object, **kwargs: object) -> tuple[str, tuple[object, ...], dict[str, object]]:
    return (name, args, kwargs)


CONTEXT = [call("context.list_sites"), call("context.use_project", "CHI-231095"),
           call("context.use_site", "CHI@TACC")]
PREFLIGHT = [*CONTEXT, call("context.list_projects"), call("image.get_image", "CC-Ubuntu24.04-CUDA")]
SETUP_CMD = f"env CODE_DIR=serve-system-lab REPO_REF=main REPO_URL={REPO} bash node_setup.sh"
JUPYTER_CMD = "cd serve-system-lab && sg docker -c './lab jupyter'"
CONNECT_AND_SETUP = [
    call("Server.check_connectivity", host=FLOATING_IP, port=22, timeout=600, show="text"),
    call("Server.upload", str(NODE_SETUP_SCRIPT), "node_setup.sh"),
    call("Server.execute", SETUP_CMD),
    call("Server.execute", JUPYTER_CMD),
]
# calls that create, change or delete something on Chameleon (or run on the node)
CREATING = ("lease.Lease", "Lease.", "server.Server", "Server.", "network.get_or_create",
            "neutron.create_floatingip", "neutron.update_floatingip", "neutron.delete_floatingip",
            "network.deallocate")


def creating(calls: list[tuple[str, tuple[object, ...], dict[str, object]]]) -> list[str]:
    return [name for name, _, _ in calls if name.startswith(CREATING)]


def test_fresh_create_makes_exactly_these_calls(fake_chi, student) -> None:
    node = provisioning.launch(config(), chi=fake_chi.api)
    assert fake_chi.rec.calls == [
        *PREFLIGHT,
        call("lease.list_leases"),
        call("lease.Lease", LEASE, duration=timedelta(hours=2, minutes=50)),
        call("Lease.add_node_reservation", amount=1, node_type="gpu_p100"),
        call("Lease.submit", wait_for_active=False, show=None, idempotent=False),
        # waited for by reading its status (a Blazar read, not recorded) — not python-chi's wait()
        call("server.get_server_id", SERVER),
        call("server.Server", SERVER, reservation_id=f"res-{LEASE}", image_name="CC-Ubuntu24.04-CUDA",
             key_name=None),
        call("Server.submit", wait_for_active=False, show=None, idempotent=True),
        call("server.get_server", SERVER),  # submit() gave None: fetched again by name
        # until the lease's end (2 h 50 min, from a minute after now) less 15 min: server.server_wait
        call("Server.wait", status="ACTIVE", show="text", timeout=9240),
        call("Server.get_floating_ip"),
        call("network.get_network_id", "public"),  # a new IP for this run, never a free one of the project
        call("neutron.create_floatingip", {"floatingip": {"floating_network_id": "net-public",
                                                          "description": f"serve-system-lab: {SERVER}"}}),
        # recorded (with its id) before it is associated, by Neutron itself (python-chi's association
        # swallows Neutron's errors): the server's port, then the IP bound to it
        call("neutron.list_ports", {"device_id": "server-1"}),
        call("neutron.update_floatingip", f"fip-{FLOATING_IP}", {"floatingip": {"port_id": "port-server-1"}}),
        *CONNECT_AND_SETUP,
    ]
    assert node is not None and node.address == FLOATING_IP
    assert node.jupyter_url == JUPYTER_URL  # ./lab jupyter's last line, localhost → the floating IP


def test_the_nvtop_hint_says_where_its_ssh_works(fake_chi, student, capsys) -> None:
    """ssh cc@<ip> logs in with the server's key pair: the hub's (python-chi's default on Chameleon's
    Jupyter) unless key_name named another, so the hint says from where it works."""
    from servelab.lab import common

    node = provisioning.launch(config(), chi=fake_chi.api)
    capsys.readouterr()
    common.node_jupyter(node)
    out = capsys.readouterr().out
    assert f"SSH for nvtop: ssh cc@{FLOATING_IP}\n  (from a terminal in Chameleon's Jupyter, File → New → " \
           "Terminal: the server got the hub's key pair; from another machine add -i with the private key " \
           "of the key pair you gave as key_name)" in out
    assert JUPYTER_URL in out


def test_parameters_reach_the_calls(fake_chi, student) -> None:
    cfg = config(site="CHI@UC", node_type="gpu_rtx_6000", duration=60, image="CC-Ubuntu22.04-CUDA",
                 key_name="alice-key", lease_name="my-lease")
    provisioning.reserve(cfg, chi=fake_chi.api)
    assert call("context.use_site", "CHI@UC") in fake_chi.rec.calls
    assert call("server.get_keypair", "alice-key") in fake_chi.rec.calls  # checked before the lease
    assert call("image.get_image", "CC-Ubuntu22.04-CUDA") in fake_chi.rec.calls
    assert call("lease.Lease", "my-lease", duration=timedelta(minutes=60)) in fake_chi.rec.calls
    assert call("Lease.add_node_reservation", amount=1, node_type="gpu_rtx_6000") in fake_chi.rec.calls
    fake_chi.rec.calls.clear()
    provisioning.launch(cfg, chi=fake_chi.api, setup_node=False)
    assert call("server.Server", SERVER, reservation_id="res-my-lease", image_name="CC-Ubuntu22.04-CUDA",
                key_name="alice-key") in fake_chi.rec.calls


def test_existing_lease_and_server_are_reused(fake_chi, student) -> None:
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.lease.add_existing(LEASE, "TERMINATED")  # an old one with the same name is ignored
    fake_chi.server.add_existing(SERVER, "ACTIVE", fip=True)
    provisioning.launch(config(), chi=fake_chi.api)
    assert fake_chi.rec.calls == [
        *PREFLIGHT,
        call("lease.list_leases"),
        call("server.get_server_id", SERVER),
        call("server.get_server", SERVER),
        call("Server.wait", status="ACTIVE", show="text", timeout=6300),  # the lease ends in 2 h, less 15 min
        call("Server.get_floating_ip"),
        *CONNECT_AND_SETUP,
    ]


def test_server_in_error_is_reported_not_reused(fake_chi, student) -> None:
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.server.add_existing(SERVER, "ERROR")
    with pytest.raises(ProvisioningError, match=rf"{SERVER} exists but is in ERROR.*Delete it"):
        provisioning.launch(config(), chi=fake_chi.api)
    names = fake_chi.rec.names()
    assert names[-2:] == ["server.get_server_id", "server.get_server"]  # nothing after the check
    assert "server.Server" not in names and "Server.delete" not in names


def test_server_reaching_error_while_waited_for_is_an_error(fake_chi, student) -> None:
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    server = fake_chi.server.add_existing(SERVER, "BUILD")
    server.status_after_wait = "ERROR"
    with pytest.raises(ProvisioningError, match="is ERROR, not ACTIVE: delete it"):
        provisioning.launch(config(), chi=fake_chi.api)
    assert "Server.get_floating_ip" not in fake_chi.rec.names()


def test_lease_in_error_after_wait_is_an_error(fake_chi, student) -> None:
    fake_chi.lease.status_at_start = "ERROR"
    with pytest.raises(ProvisioningError, match=f"lease {LEASE} is ERROR, not ACTIVE"):
        provisioning.reserve(config(), chi=fake_chi.api)
    assert fake_chi.rec.names()[-1] == "Lease.submit"


def test_existing_lease_in_error_is_reported_before_waiting(fake_chi, student) -> None:
    fake_chi.lease.add_existing(LEASE, "ERROR")
    with pytest.raises(ProvisioningError, match="exists and is in ERROR: delete it"):
        provisioning.reserve(config(), chi=fake_chi.api)
    assert fake_chi.rec.calls == [*PREFLIGHT, call("lease.list_leases")]


def test_two_live_leases_with_one_name_are_refused(fake_chi, student) -> None:
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.lease.add_existing(LEASE, "PENDING")
    with pytest.raises(ProvisioningError, match="2 live leases"):
        provisioning.reserve(config(), chi=fake_chi.api)


def test_ssh_timeout_names_what_to_check(fake_chi, student) -> None:
    fake_chi.server.ssh_fails = True
    with pytest.raises(ProvisioningError, match=r"SSH on 129\.114\.108\.7:22 did not answer"):
        provisioning.launch(config(), chi=fake_chi.api)
    assert "Server.upload" not in fake_chi.rec.names()


def test_teardown_deletes_what_launch_created(fake_chi, student) -> None:
    provisioning.launch(config(), chi=fake_chi.api)
    fake_chi.rec.calls.clear()
    result = provisioning.teardown(config(), chi=fake_chi.api)
    assert fake_chi.rec.calls == [
        *CONTEXT,
        call("server.get_server_id", SERVER),
        call("server.get_server", SERVER),
        call("Server.delete", SERVER, delete_ips=False),  # python-chi's own IP release does nothing
        call("server.get_server_id", SERVER),  # waited until gone
        call("network.list_floating_ips"),
        call("neutron.delete_floatingip", f"fip-{FLOATING_IP}"),  # the one it allocated, by its id
        call("lease.list_leases"),
        call("Lease.delete", LEASE),
    ]
    assert result is not None and result.errors == [] and result.kept == []
    assert result.deleted == [f"server {SERVER}", f"floating IP {FLOATING_IP}", f"lease {LEASE}"]
    assert fake_chi.network.floating_ips == []


def test_teardown_keep_lease_and_nothing_there(fake_chi, student) -> None:
    provisioning.teardown(config(), keep_lease=True, chi=fake_chi.api)
    assert fake_chi.rec.calls == [*CONTEXT, call("server.get_server_id", SERVER)]


def test_teardown_keep_lease_says_the_lease_stays(fake_chi, student, capsys) -> None:
    provisioning.launch(config(), chi=fake_chi.api)
    result = provisioning.teardown(config(), keep_lease=True, chi=fake_chi.api)
    assert result is not None and result.deleted == [f"server {SERVER}", f"floating IP {FLOATING_IP}"]
    assert result.still_there == [f"lease {LEASE} (keep_lease; created by this lab)"]
    assert "--lease-id lease-1 " in result.delete_command
    assert "Still on Chameleon after this teardown" in capsys.readouterr().out


def test_plan_mode_calls_nothing_and_prints_the_plan(fake_chi, student, capsys) -> None:
    cfg = config()
    assert provisioning.launch(cfg, plan_only=True, chi=fake_chi.api) is None
    provisioning.reserve(cfg, plan_only=True, chi=fake_chi.api)
    provisioning.teardown(cfg, plan_only=True, chi=fake_chi.api)
    assert fake_chi.rec.calls == []
    out = capsys.readouterr().out
    for expected in (LEASE, "CHI@TACC", "gpu_p100", "2 h 50 min", "CC-Ubuntu24.04-CUDA", SERVER,
                     "floating IP", SETUP_CMD, JUPYTER_CMD, f"delete server {SERVER}",
                     f"delete lease {LEASE}"):
        assert expected in out
    plan_text = format_plan(provision_plan(cfg), "Provisioning plan (plan mode: nothing is created)")
    assert plan_text in out


def test_plan_mode_needs_no_project_and_no_python_chi(student, capsys) -> None:
    provisioning.launch(from_env(env={}), plan_only=True)  # chi=None: the real one is never imported
    assert "CHI_PROJECT, required for a real run" in capsys.readouterr().out


def test_settings_from_env_and_parameters(fake_chi, student) -> None:
    env = {"CHI_PROJECT": "CHI-1", "CHI_SITE": "CHI@UC", "CHI_LEASE_MINUTES": "90",
           "SERVELAB_REPO_URL": REPO, "CHI_LEASE_NAME": "env-lease"}
    cfg = from_env(env=env, lease_name="param-lease", project=None)
    assert (cfg.project, cfg.site, cfg.lease_name) == ("CHI-1", "CHI@UC", "param-lease")
    assert cfg.duration == timedelta(minutes=90) and cfg.server_name == "node-serve-system-alice"
    with pytest.raises(ProvisioningError, match="code_source='ftp'"):
        from_env(env={}, code_source="ftp")
    with pytest.raises(ProvisioningError, match="unknown provisioning setting"):
        from_env(env={}, flavour="x")
    with pytest.raises(ProvisioningError, match="CHI_PROJECT"):
        provisioning.reserve(from_env(env={}), chi=fake_chi.api)
    assert fake_chi.rec.calls == []
    with pytest.raises(ProvisioningError, match="SERVELAB_REPO_URL"):
        node_setup_command(from_env(env={}, code_source="git"))
    assert from_env(env={}).code_source == "upload"  # the default: this checkout is sent
    assert from_env(env={"OS_PROJECT_NAME": "CHI-7"}).project == "CHI-7"  # python-chi's own default
    assert from_env(env={"OS_PROJECT_NAME": "CHI-7", "CHI_PROJECT": "CHI-8"}).project == "CHI-8"
    with pytest.raises(ProvisioningError, match="CHI_LEASE_MINUTES='ninety' is not a whole number"):
        from_env(env={"CHI_LEASE_MINUTES": "ninety"})


def test_notebooks_charge_the_project_01_reserved_in(fake_chi, student, tmp_path: Path, capsys) -> None:
    """On the hub $OS_PROJECT_NAME is the first of the student's projects, not necessarily the class's: 01
    says which project it charges and where that came from; 02 and 08 take the project of the state file's
    live records (what 01 reserved) before $OS_PROJECT_NAME; a parameter or $CHI_PROJECT wins."""
    state = tmp_path / "state.json"
    hub = {"OS_PROJECT_NAME": "CHI-111111"}
    first = provisioning.configure(state=state, env=hub)
    assert first.project == "CHI-111111"
    assert ("Project charged: CHI-111111 (from $OS_PROJECT_NAME: the hub's default, the first of your "
            "projects; if the class uses another, set project)") in capsys.readouterr().out
    fake_chi.context.projects = ["CHI-111111", "CHI-231095"]
    cfg = provisioning.configure(state=state, env=hub, project="CHI-231095", code_source="git", repo_url=REPO)
    assert "Project charged: CHI-231095 (from the project parameter)" in capsys.readouterr().out
    provisioning.reserve(cfg, chi=fake_chi.api, state=state)  # notebook 01
    assert ("You are in 2 projects (CHI-111111, CHI-231095); this lab charges CHI-231095: to charge another, "
            "set project=... (CHI_PROJECT)") in capsys.readouterr().out
    later = provisioning.configure(state=state, env=hub)  # notebooks 02 and 08: no project given
    assert later.project == "CHI-231095"
    assert (f"Project charged: CHI-231095 (from {state}: the project this lab's lease and server were made "
            "in)") in capsys.readouterr().out
    chosen = provisioning.configure(state=state, env={**hub, "CHI_PROJECT": "CHI-999999"})
    assert chosen.project == "CHI-999999"
    assert (f"Note: {state} records live resources in project CHI-231095; this run does not see them, nor "
            "does its teardown: set project to CHI-231095 to work on them") in capsys.readouterr().out
    provisioning.teardown(later, chi=fake_chi.api, state=state)  # all deleted: nothing live any more
    assert provisioning.configure(state=state, env=hub).project == "CHI-111111"


def test_cli_teardown_uses_the_state_files_project(fake_chi, student, tmp_path: Path, monkeypatch,
                                                  capsys) -> None:
    """`python -m provisioning teardown --state …` on the hub (OS_PROJECT_NAME: the first project) deletes
    what reserve made in the class's project, which the state file records."""
    from provisioning import __main__ as cli

    state = tmp_path / "state.json"
    provisioning.reserve(config(), chi=fake_chi.api, state=state)  # in CHI-231095
    for var, value in {"OS_AUTH_TYPE": "v3oidcaccesstoken", "OS_ACCESS_TOKEN": "t",
                       "OS_PROJECT_NAME": "CHI-111111"}.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setattr("provisioning.checks.real_chi", lambda: fake_chi.api)
    assert cli.main(["teardown", "--state", str(state)]) == 0
    assert fake_chi.rec.names()[-1] == "Lease.delete"  # in another project the record would not match: kept
    assert f"Project charged: CHI-231095 (from {state}" in capsys.readouterr().out


def test_connect_finds_the_provisioned_node(fake_chi, student) -> None:
    with pytest.raises(ProvisioningError, match="run the server set-up step"):
        provisioning.connect(config(), chi=fake_chi.api)
    fake_chi.server.add_existing(SERVER, "ACTIVE", fip=True)
    node = provisioning.connect(config(), chi=fake_chi.api)
    assert node.address == FLOATING_IP and node.jupyter_url == ""
    assert node.ssh_connection().user == "cc"


def test_lease_creation_failure_says_what_to_try(fake_chi, student) -> None:
    def refuse(**kwargs: object) -> None:
        raise RuntimeError("Unable to make lease")

    original = fake_chi.lease.Lease

    def lease_that_fails(*args: object, **kwargs: object) -> object:
        lease = original(*args, **kwargs)
        lease.submit = refuse  # type: ignore[method-assign]
        return lease

    fake_chi.lease.Lease = lease_that_fails  # type: ignore[method-assign]
    with pytest.raises(ProvisioningError, match=r"no gpu_p100 node is free at CHI@TACC.*Host Calendar"):
        provisioning.reserve(config(), chi=fake_chi.api)


# ----------------------------------------------------------------------------- checks before creating
class Unauthorized(Exception):
    """keystoneauth1.exceptions.http.Unauthorized, by name (the hint is chosen by class name)."""


def no_key_pair_default(fake_chi) -> None:
    fake_chi.context.settings["keypair_public_key"] = None  # off Chameleon's Jupyter


@pytest.mark.parametrize(("change", "settings", "message"), [
    (no_key_pair_default, {}, r"no key pair for the server: set key_name=\.\.\. or CHI_KEY_NAME"),
    (None, {"key_name": "bob-key"},
     r"key pair 'bob-key' does not exist at CHI@TACC \(there: alice-key\): create or import it"),
    (None, {"image": "CC-Ubuntu99-CUDA"}, r"image 'CC-Ubuntu99-CUDA' does not exist at CHI@TACC"),
    (None, {"site": "CHI@Mars"}, r"site 'CHI@Mars' is not a Chameleon site \(known: CHI@TACC, CHI@UC"),
    (lambda f: setattr(f.context, "projects", ["CHI-1", "CHI-2"]), {},
     r"project CHI-231095 is not one of yours \(yours: CHI-1, CHI-2\)"),
    (lambda f: f.rec.failures.update({"context.list_projects": Unauthorized(
        "The request you have made requires authentication. (HTTP 401)\n(Request-ID: req-1)")}), {},
     r"checking your credentials with project CHI-231095 at CHI@TACC failed \(Unauthorized: The request "
     r"you have made requires authentication\. \(HTTP 401\)\): Chameleon refused the credentials"),
    (lambda f: f.rec.failures.update({"context.list_sites": ConnectionError("Max retries exceeded")}), {},
     r"looking up Chameleon's sites .* failed \(ConnectionError: Max retries exceeded\): Chameleon could "
     r"not be reached"),
    (None, {"repo_url": ""}, r"code_source='git' needs the lab's repository URL: .*SERVELAB_REPO_URL"),
    (lambda f: f.context.settings.update(keypair_private_key="/nowhere/id_rsa"), {},
     r"the SSH private key /nowhere/id_rsa \(OS_KEYPAIR_PRIVATE_KEY\) does not exist"),
])
@pytest.mark.parametrize("action", ["reserve", "launch", "preflight"])
def test_a_failed_check_creates_nothing(fake_chi, student, action, change, settings, message) -> None:
    if change:
        change(fake_chi)
    with pytest.raises(ProvisioningError, match=message) as caught:
        getattr(provisioning, action)(config(**settings), chi=fake_chi.api)
    assert "\n" not in str(caught.value)
    assert creating(fake_chi.rec.calls) == []  # no lease, no server, no SSH


def test_upload_mode_needs_the_labs_folder(fake_chi, student, tmp_path: Path) -> None:
    cfg = from_env(env={}, project="CHI-231095")
    with pytest.raises(ProvisioningError, match=rf"but {tmp_path} has no lab or provisioning/node_setup\.sh: "
                                                r"run from the lab's folder \(a clone, a Trovi import"):
        provisioning.launch(cfg, chi=fake_chi.api, root=tmp_path)
    assert fake_chi.rec.calls == []  # local checks come before any python-chi call


def test_preflight_passes_on_the_defaults_and_creates_nothing(fake_chi, student) -> None:
    provisioning.preflight(from_env(env={}, project="CHI-231095"), chi=fake_chi.api)  # upload mode
    assert fake_chi.rec.calls == PREFLIGHT


@pytest.mark.parametrize(("env", "message"), [
    ({}, r"no Chameleon credentials in the environment .*Chameleon's Jupyter.*openrc"),
    ({"OS_APPLICATION_CREDENTIAL_ID": "a", "OS_APPLICATION_CREDENTIAL_SECRET": "s"},
     r"OS_AUTH_TYPE is not set although OS_APPLICATION_CREDENTIAL_ID, OS_APPLICATION_CREDENTIAL_SECRET"),
    ({"OS_AUTH_TYPE": "v3applicationcredential", "OS_APPLICATION_CREDENTIAL_ID": "a"},
     r"OS_AUTH_TYPE=v3applicationcredential needs OS_APPLICATION_CREDENTIAL_SECRET"),
    ({"OS_AUTH_TYPE": "password", "OS_USERNAME": "u", "OS_PASSWORD": "p"},
     r"OS_AUTH_TYPE=password: python-chi reads credentials only for v3 .* OS_AUTH_TYPE=v3password"),
    ({"OS_AUTH_TYPE": "v3password", "OS_USERNAME": "u", "OS_PASSWORD": "p"},
     r"needs OS_USER_DOMAIN_NAME or OS_USER_DOMAIN_ID"),
])
def test_missing_credentials_are_named(env, message) -> None:
    with pytest.raises(ProvisioningError, match=message):
        check_credentials(env)


@pytest.mark.parametrize("env", [
    {"OS_AUTH_TYPE": "v3applicationcredential", "OS_APPLICATION_CREDENTIAL_ID": "a",
     "OS_APPLICATION_CREDENTIAL_SECRET": "s"},
    {"OS_AUTH_TYPE": "v3oidcaccesstoken", "OS_ACCESS_TOKEN": "t", "OS_PROJECT_NAME": "CHI-1"},
    {"OS_AUTH_TYPE": "v3password", "OS_USERNAME": "u", "OS_PASSWORD": "p", "OS_USER_DOMAIN_NAME": "d"},
])
def test_complete_credentials_pass(env) -> None:
    assert check_credentials(env) == env["OS_AUTH_TYPE"]


def test_real_python_chi_is_not_imported_without_credentials(student, monkeypatch) -> None:
    monkeypatch.setattr("provisioning.checks.real_chi", lambda: pytest.fail("python-chi was imported"))
    with pytest.raises(ProvisioningError, match="no Chameleon credentials"):
        provisioning.launch(config())
    with pytest.raises(ProvisioningError, match="no Chameleon credentials"):
        provisioning.teardown(config())


# ----------------------------------------------------------------------------- failures later on: one line
def test_a_python_chi_failure_while_creating_is_one_line(fake_chi, student) -> None:
    fake_chi.rec.failures["server.Server"] = RuntimeError("Invalid key_name provided.\n(HTTP 400)")
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    with pytest.raises(ProvisioningError) as caught:
        provisioning.launch(config(), chi=fake_chi.api)
    assert str(caught.value) == (f"launching or reusing server {SERVER} failed (RuntimeError: Invalid "
                                 "key_name provided.)")
    assert isinstance(caught.value.__cause__, RuntimeError)  # the original, for SERVELAB_DEBUG=1


@pytest.mark.parametrize(("failing", "message"), [
    ("neutron.create_floatingip", r"allocating a floating IP for this run failed \(RuntimeError: Quota "
                                  r"exceeded.*quota.*floating_ip / CHI_FLOATING_IP"),
    ("neutron.update_floatingip", r"associating floating IP 129\.114\.108\.7 with server "
                                  r".* Quota exceeded.*quota"),
])
def test_floating_ip_failure_names_the_quota(fake_chi, student, failing, message) -> None:
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.server.add_existing(SERVER, "ACTIVE")
    fake_chi.rec.failures[failing] = RuntimeError("Quota exceeded for resources")
    with pytest.raises(ProvisioningError, match=message):
        provisioning.launch(config(), chi=fake_chi.api)
    assert "Server.check_connectivity" not in fake_chi.rec.names()


def test_a_failing_node_command_stops_launch_in_one_line(fake_chi, student) -> None:
    fake_chi.server.exit_codes["node_setup.sh"] = 3  # e.g. the GPU check
    with pytest.raises(ProvisioningError, match=r"`env CODE_DIR=.* bash node_setup\.sh` failed on the node "
                                                r"with exit code 3: its output above says why"):
        provisioning.launch(config(), chi=fake_chi.api)
    assert fake_chi.rec.names()[-1] == "Server.execute"  # ./lab jupyter never ran
    assert call("Server.execute", JUPYTER_CMD) not in fake_chi.rec.calls


def test_jupyter_url_comes_from_the_last_line() -> None:
    out = "building\njupyter: http://localhost:8888/lab?token=old\nmore\njupyter: http://localhost:8888/lab?token=t\n"
    assert jupyter_url(out, "10.0.0.5") == "http://10.0.0.5:8888/lab?token=t"
    assert jupyter_url("jupyter: http://node.example:9999/lab?token=t", "10.0.0.5") == \
        "http://node.example:9999/lab?token=t"  # a real host name is kept
    with pytest.raises(ProvisioningError, match="'jupyter: <url>' line"):
        jupyter_url("docker: permission denied\n", "10.0.0.5")


def test_missing_jupyter_line_is_an_error(fake_chi, student) -> None:
    fake_chi.server.outputs["./lab jupyter"] = "started, but said nothing useful\n"
    with pytest.raises(ProvisioningError, match=r"finished without printing its 'jupyter: <url>' line.*"
                                                rf"ssh cc@{FLOATING_IP}"):
        provisioning.launch(config(), chi=fake_chi.api)


# ----------------------------------------------------------------------------- the command line
def run_cli(*args: str, env: dict[str, str], home: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8", **env}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "provisioning", *args], cwd=REPO_ROOT, env=clean,
                          capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - start


def test_cli_launch_without_credentials_fails_fast_in_one_line(tmp_path: Path) -> None:
    done, seconds = run_cli("launch", env={}, home=tmp_path)
    assert done.returncode == 1
    assert seconds < 10, f"took {seconds:.1f} s"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: no Chameleon credentials in the environment")
    assert "openrc" in lines[0] and "Chameleon's Jupyter" in lines[0]
    assert "Traceback" not in done.stdout + done.stderr


def test_cli_names_a_missing_project_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    creds = {"OS_AUTH_TYPE": "v3applicationcredential", "OS_APPLICATION_CREDENTIAL_ID": "a",
             "OS_APPLICATION_CREDENTIAL_SECRET": "s"}
    done, _ = run_cli("reserve", env=creds, home=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: no Chameleon project given: pass project=... (--project) or set CHI_PROJECT (e.g. "
        "CHI_PROJECT=CHI-123456); it is never asked for interactively"]
    debug, _ = run_cli("reserve", env={**creds, "SERVELAB_DEBUG": "1"}, home=tmp_path)
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "ProvisioningError" in debug.stderr


def test_cli_plan_needs_nothing(tmp_path: Path) -> None:
    done, _ = run_cli("plan", "--code-source", "git", env={}, home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "cannot run yet: code_source='git' needs the lab's repository URL" in done.stdout


# ----------------------------------------------------------------------------- the stand-in vs python-chi
def _shape(func: object) -> list[tuple[str, object, object]]:
    params = [p for p in inspect.signature(func).parameters.values() if p.name != "self"]  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in params]


STANDIN_ONLY = {"add_existing", "new_id", "allocate", "free"}  # the stand-in's own knobs


def test_standin_signatures_match_the_installed_python_chi(fake_chi) -> None:
    """Every method of the stand-in matches the real python-chi's name and signature (an upgrade that
    changes one fails here, not on the testbed). What python-chi *does* behind them is checked in
    test_python_chi_contract.py."""
    import chi.context
    import chi.image
    import chi.lease
    import chi.network
    import chi.server

    lease = fake_chi.lease.Lease("x", duration=timedelta(hours=1))
    server = fake_chi.server.Server("x")
    pairs = {type(fake_chi.context): chi.context, type(fake_chi.lease): chi.lease,
             type(lease): chi.lease.Lease, type(fake_chi.server): chi.server, type(server): chi.server.Server,
             type(fake_chi.image): chi.image, type(fake_chi.network): chi.network}
    compared = []
    for fake, real in pairs.items():
        for name, member in vars(fake).items():
            if name.startswith("_") or name in STANDIN_ONLY:
                continue
            if isinstance(member, property):  # attributes read by provisioning: python-chi has them too
                assert isinstance(getattr(real, name, None), property), f"{real.__name__}.{name}"
                continue
            if not callable(member):
                continue
            assert hasattr(real, name), f"python-chi has no {real.__name__}.{name}"
            assert _shape(member) == _shape(getattr(real, name)), f"{real.__name__}.{name} differs"
            compared.append(f"{real.__name__}.{name}")
    assert len(compared) >= 28, compared
    for name in ("get_network_id", "neutron", "get_floating_ip", "list_floating_ips",
                 "deallocate_floating_ip"):
        assert f"chi.network.{name}" in compared  # every network function provisioning calls


def test_cli_turns_real_python_chi_failures_into_one_line(tmp_path: Path) -> None:
    """The real python-chi and keystoneauth, kept off Chameleon: the site list comes from a local
    stand-in of api.chameleoncloud.org (CHI_RESOURCE_API_URL) whose one site points at a closed
    local port, so the credentials check fails inside keystoneauth — and still prints one line."""
    import http.server
    import json
    import socket
    import threading

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    site = {"name": "CHI@TACC", "web": f"http://127.0.0.1:{closed}/chi", "site_class": "core",
            "location": "here", "user_support_contact": "nobody"}
    body = json.dumps({"items": [site]}).encode()

    class Sites(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sites)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {"CHI_RESOURCE_API_URL": f"http://127.0.0.1:{server.server_address[1]}",
               "OS_AUTH_TYPE": "v3applicationcredential", "OS_APPLICATION_CREDENTIAL_ID": "id",
               "OS_APPLICATION_CREDENTIAL_SECRET": "secret", "USER": "alice"}
        done, seconds = run_cli("check", "--project", "CHI-231095", env=env, home=tmp_path)
    finally:
        server.shutdown()
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: checking your credentials with project CHI-231095 at CHI@TACC "
                               "failed (")
    assert "Traceback" not in done.stdout + done.stderr
    assert seconds < 30


def test_node_commands_run_with_a_timeout_and_a_hang_is_one_line(fake_chi, student) -> None:
    provisioning.launch(config(), chi=fake_chi.api)
    limits = {kw["config"].timeouts.command for kw in fake_chi.server.execute_kwargs}
    assert limits == {3600}  # every node command, not only the first
    fake_chi.server.hangs.add("node_setup.sh")
    fake_chi.server.servers.clear()
    with pytest.raises(ProvisioningError, match=r"did not finish on the node within 3600 s") as err:
        provisioning.launch(config(), chi=fake_chi.api)
    assert "\n" not in str(err.value)


def test_user_id_without_a_passwd_entry(monkeypatch) -> None:
    """A container run as the host's uid has no passwd entry and no USER: names still work."""
    import getpass

    from provisioning.config import user_id

    for var in ("CHI_USER", "USER", "LOGNAME", "LNAME", "USERNAME"):
        monkeypatch.delenv(var, raising=False)

    def no_entry() -> str:
        raise KeyError("getpwuid(): uid not found: 1000")

    monkeypatch.setattr(getpass, "getuser", no_entry)
    assert user_id() == "student"
