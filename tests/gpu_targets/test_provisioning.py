"""Provisioning against a recording stand-in of python-chi: the exact calls, reuse, errors, teardown."""

from __future__ import annotations

import subprocess
import tarfile
from datetime import timedelta
from pathlib import Path

import pytest

import provisioning
from provisioning import ProvisioningError, from_env
from provisioning.node import NODE_SETUP_SCRIPT, checkout_files, node_setup_command
from provisioning.plan import format_plan, provision_plan

LEASE = "serve_system_alice"
SERVER = "node-serve-system-alice"
REPO = "https://git.example.org/serve-lab.git"


def config(**changes: object) -> provisioning.ChameleonConfig:
    return from_env(env={}, project="CHI-231095", repo_url=REPO, **changes)


def call(name: str, *args: object, **kwargs: object) -> tuple[str, tuple[object, ...], dict[str, object]]:
    return (name, args, kwargs)


CONTEXT = [call("context.use_project", "CHI-231095"), call("context.use_site", "CHI@TACC")]
SETUP_CMD = f"env CODE_DIR=serve-system-lab REPO_REF=main REPO_URL={REPO} bash node_setup.sh"
BUILD_CMD = ("cd serve-system-lab && { test -f artifacts/food11.onnx || docker compose -f "
             "docker/docker-compose-triton.yaml run --rm --no-deps -v \"$PWD:/workspace\" -w /workspace "
             "-e SERVELAB_ROOT=/workspace --entrypoint python3 triton_server -m servelab.model build; }")
CONNECT_AND_SETUP = [
    call("Server.check_connectivity", host="129.114.108.7", port=22, timeout=600, show="text"),
    call("Server.upload", str(NODE_SETUP_SCRIPT), "node_setup.sh"),
    call("Server.execute", SETUP_CMD),
    call("Server.execute", BUILD_CMD),
]


def test_fresh_create_makes_exactly_these_calls(fake_chi, student) -> None:
    node = provisioning.launch(config(), chi=fake_chi.api)
    assert fake_chi.rec.calls == [
        *CONTEXT,
        call("lease.list_leases"),
        call("lease.Lease", LEASE, duration=timedelta(hours=2, minutes=50)),
        call("Lease.add_node_reservation", amount=1, node_type="gpu_p100"),
        call("Lease.submit", wait_for_active=False, show=None, idempotent=False),
        call("Lease.wait", status="active", show="text", timeout=600),
        call("server.get_server_id", SERVER),
        call("server.Server", SERVER, reservation_id=f"res-{LEASE}", image_name="CC-Ubuntu24.04-CUDA",
             key_name=None),
        call("Server.submit", wait_for_active=False, show=None, idempotent=True),
        call("server.get_server", SERVER),  # submit() gave None: fetched again by name
        call("Server.wait", status="ACTIVE", show="text", timeout=1200),
        call("Server.get_floating_ip"),
        call("Server.associate_floating_ip"),
        call("Server.get_floating_ip"),
        *CONNECT_AND_SETUP,
    ]
    assert node is not None and node.address == "129.114.108.7"


def test_parameters_reach_the_calls(fake_chi, student) -> None:
    cfg = config(site="CHI@UC", node_type="gpu_rtx_6000", duration=60, image="CC-Ubuntu22.04-CUDA",
                 key_name="alice-key", lease_name="my-lease")
    provisioning.reserve(cfg, chi=fake_chi.api)
    assert call("context.use_site", "CHI@UC") in fake_chi.rec.calls
    assert call("lease.Lease", "my-lease", duration=timedelta(minutes=60)) in fake_chi.rec.calls
    assert call("Lease.add_node_reservation", amount=1, node_type="gpu_rtx_6000") in fake_chi.rec.calls
    fake_chi.rec.calls.clear()
    provisioning.launch(cfg, chi=fake_chi.api, setup_node=False)
    assert call("server.Server", SERVER, reservation_id="res-my-lease", image_name="CC-Ubuntu22.04-CUDA",
                key_name="alice-key") in fake_chi.rec.calls


def test_existing_lease_and_server_are_reused(fake_chi, student) -> None:
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.lease.add_existing(LEASE, "TERMINATED")  # an old one with the same name is ignored
    fake_chi.server.add_existing(SERVER, "ACTIVE", fip="129.114.108.7")
    provisioning.launch(config(), chi=fake_chi.api)
    assert fake_chi.rec.calls == [
        *CONTEXT,
        call("lease.list_leases"),
        call("Lease.wait", status="active", show="text", timeout=600),
        call("server.get_server_id", SERVER),
        call("server.get_server", SERVER),
        call("Server.wait", status="ACTIVE", show="text", timeout=1200),
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
    fake_chi.lease.status_after_wait = "ERROR"
    with pytest.raises(ProvisioningError, match=f"lease {LEASE} is ERROR, not ACTIVE"):
        provisioning.reserve(config(), chi=fake_chi.api)
    assert fake_chi.rec.names()[-1] == "Lease.wait"


def test_existing_lease_in_error_is_reported_before_waiting(fake_chi, student) -> None:
    fake_chi.lease.add_existing(LEASE, "ERROR")
    with pytest.raises(ProvisioningError, match="exists and is in ERROR: delete it"):
        provisioning.reserve(config(), chi=fake_chi.api)
    assert fake_chi.rec.names() == ["context.use_project", "context.use_site", "lease.list_leases"]


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


def test_teardown_deletes_server_then_lease(fake_chi, student) -> None:
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.server.add_existing(SERVER, "ACTIVE", fip="129.114.108.7")
    provisioning.teardown(config(), chi=fake_chi.api)
    assert fake_chi.rec.calls == [
        *CONTEXT,
        call("server.get_server_id", SERVER),
        call("server.get_server", SERVER),
        call("Server.delete", SERVER),
        call("server.get_server_id", SERVER),  # waited until gone
        call("lease.list_leases"),
        call("Lease.delete", LEASE),
    ]


def test_teardown_keep_lease_and_nothing_there(fake_chi, student) -> None:
    provisioning.teardown(config(), keep_lease=True, chi=fake_chi.api)
    assert fake_chi.rec.names() == ["context.use_project", "context.use_site", "server.get_server_id"]


def test_plan_mode_calls_nothing_and_prints_the_plan(fake_chi, student, capsys) -> None:
    cfg = config()
    assert provisioning.launch(cfg, plan_only=True, chi=fake_chi.api) is None
    provisioning.reserve(cfg, plan_only=True, chi=fake_chi.api)
    provisioning.teardown(cfg, plan_only=True, chi=fake_chi.api)
    assert fake_chi.rec.calls == []
    out = capsys.readouterr().out
    for expected in (LEASE, "CHI@TACC", "gpu_p100", "2 h 50 min", "CC-Ubuntu24.04-CUDA", SERVER,
                     "floating IP", SETUP_CMD, BUILD_CMD, f"delete server {SERVER}", f"delete lease {LEASE}"):
        assert expected in out
    plan_text = format_plan(provision_plan(cfg), "Provisioning plan (plan mode: nothing is created)")
    assert plan_text in out


def test_plan_mode_needs_no_project_and_no_python_chi(student, capsys) -> None:
    provisioning.launch(from_env(env={}), plan_only=True)  # chi=None: the real one is never imported
    assert "CHI_PROJECT, required for a real run" in capsys.readouterr().out


def test_settings_from_env_and_parameters(student) -> None:
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
        provisioning.reserve(from_env(env={}))
    with pytest.raises(ProvisioningError, match="SERVELAB_REPO_URL"):
        node_setup_command(from_env(env={}))


def test_upload_mode_sends_the_checkout(fake_chi, student, tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    (root / "servelab").mkdir(parents=True)
    (root / "servelab" / "x.py").write_text("x = 1\n")
    (root / "artifacts").mkdir()
    (root / "artifacts" / "food11.onnx").write_bytes(b"onnx")  # gitignored, still sent
    (root / "notes.tmp").write_text("untracked, not sent")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "servelab/x.py"], cwd=root, check=True)
    assert [str(p) for p in checkout_files(root)] == ["artifacts/food11.onnx", "servelab/x.py"]

    cfg = config(code_source="upload")
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.server.add_existing(SERVER, "ACTIVE", fip="129.114.108.7")
    from provisioning.node import run_node_setup

    server = fake_chi.server.servers[SERVER]
    run_node_setup(server, cfg, tmp_path / "work", root=root)
    assert fake_chi.rec.calls == [
        call("Server.upload", str(NODE_SETUP_SCRIPT), "node_setup.sh"),
        call("Server.upload", str(tmp_path / "work" / "serve-system-lab.tar.gz"), "serve-system-lab.tar.gz"),
        call("Server.execute",
             "env CODE_DIR=serve-system-lab REPO_REF=main CODE_TARBALL=serve-system-lab.tar.gz "
             "bash node_setup.sh"),
    ]
    with tarfile.open(tmp_path / "work" / "serve-system-lab.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["artifacts/food11.onnx", "servelab/x.py"]


def test_connect_finds_the_provisioned_node(fake_chi, student) -> None:
    with pytest.raises(ProvisioningError, match="run the server set-up step"):
        provisioning.connect(config(), chi=fake_chi.api)
    fake_chi.server.add_existing(SERVER, "ACTIVE", fip="129.114.108.7")
    node = provisioning.connect(config(), chi=fake_chi.api)
    assert node.address == "129.114.108.7"
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
