"""Notebook 02's last cell: what listens on the node (``ss -Hltn`` over SSH, the recording python-chi's
node answering) is checked against the lab's allowlist; anything else on a public address stops it in one
line that names it; plan mode says what it would do."""

from __future__ import annotations

import pytest

import provisioning
from provisioning.exposure import check_exposure
from provisioning.node import JupyterAccess
from servelab.core.exposure import LISTENING_COMMAND

NODE = """\
LISTEN 0      4096         0.0.0.0:8888       0.0.0.0:*
LISTEN 0      128          0.0.0.0:22         0.0.0.0:*
LISTEN 0      128             [::]:22            [::]:*
LISTEN 0      4096   127.0.0.53%lo:53         0.0.0.0:*
LISTEN 0      4096       127.0.0.1:8000       0.0.0.0:*
"""


def config() -> provisioning.ChameleonConfig:
    return provisioning.from_env(env={}, project="CHI-231095", code_source="git",
                                 repo_url="https://git.example.org/serve-lab.git")


def node(fake_chi) -> provisioning.Node:
    launched = provisioning.launch(config(), chi=fake_chi.api)
    assert launched is not None and isinstance(launched.jupyter, JupyterAccess)
    return launched


def test_only_the_allowlist_answers_on_the_nodes_public_address(fake_chi, student, capsys) -> None:
    fake_chi.server.outputs[LISTENING_COMMAND] = NODE
    launched = node(fake_chi)
    capsys.readouterr()
    public = check_exposure(launched, config())
    out = capsys.readouterr().out
    assert [(item.address, item.port) for item in public] == [("0.0.0.0", 22), ("::", 22), ("0.0.0.0", 8888)]
    assert f"$ {LISTENING_COMMAND}" in out  # the student sees the listing itself
    assert (f"On the node's public address {launched.address} only these answer: 22 (SSH), 8888 (the node's "
            "Jupyter server (TLS, token)); every other server of the lab listens on its loopback") in out


@pytest.mark.parametrize("listening", ["0.0.0.0:8000", "[::]:8002", "10.52.0.12:8001"])
def test_anything_else_on_a_public_address_stops_the_notebook_in_one_line(fake_chi, student,
                                                                         listening: str) -> None:
    fake_chi.server.outputs[LISTENING_COMMAND] = NODE + f"LISTEN 0 4096 {listening} 0.0.0.0:*\n"
    with pytest.raises(provisioning.ProvisioningError) as refused:
        check_exposure(node(fake_chi), config())
    line = str(refused.value)
    assert "\n" not in line and listening in line and "beyond the lab's allowlist" in line
    assert "publish it on 127.0.0.1 only" in line


def test_plan_mode_says_what_it_would_check(capsys) -> None:
    assert check_exposure(None, config()) == []
    assert "plan mode: on Chameleon this lists what listens on the node (ss -Hltn over SSH)" in \
        capsys.readouterr().out


def test_a_classmates_server_of_the_same_name_is_never_adopted(fake_chi, student) -> None:
    """In a class project a server of the name the lab gives may be another user's: adopting it (and
    deleting it with delete_adopted) is refused in one line; one's own is reused."""
    theirs = fake_chi.server.add_existing("node-serve-system-alice", "ACTIVE", fip=True)
    fake_chi.lease.add_existing("serve_system_alice", "ACTIVE")
    fake_chi.server.made_by[theirs.id] = "user-bob"
    with pytest.raises(provisioning.ProvisioningError) as refused:
        provisioning.launch(config(), chi=fake_chi.api)
    assert str(refused.value).startswith("server node-serve-system-alice belongs to another user (user-bob), "
                                         "not to you (user-alice): it is never reused, nor deleted")
    assert "Server.execute" not in fake_chi.rec.names() and "Server.delete" not in fake_chi.rec.names()
    fake_chi.server.made_by[theirs.id] = "user-alice"
    assert provisioning.launch(config(), chi=fake_chi.api) is not None


def test_the_nodes_host_key_is_recorded_at_first_contact_and_verified_after(fake_chi, student, tmp_path,
                                                                          capsys) -> None:
    """python-chi accepts any host key; the lab records the node's at first contact, and the same server
    presenting another one later stops the step in one line, before anything is sent."""
    import json

    from provisioning.hostkeys import KNOWN_HOSTS

    state = tmp_path / "run" / "chameleon-state.json"
    node = provisioning.launch(config(), chi=fake_chi.api, state=state)
    assert node is not None and node.known_hosts == state.parent / KNOWN_HOSTS
    known = json.loads(node.known_hosts.read_text())[node.address]
    assert known["server"] == str(node.server.id) and known["sha256"].startswith("SHA256:")
    said = capsys.readouterr().out
    assert f"SSH host key of {node.address} recorded at first contact: {known['sha256']}" in said
    provisioning.launch(config(), chi=fake_chi.api, state=state)  # the same key: goes on
    fake_chi.server.host_keys[node.address] = (
        "ssh-ed25519", "AAAAC3NzaC1lZDI1NTE5AAAAICAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4/")
    executed = fake_chi.rec.names().count("Server.execute")
    with pytest.raises(provisioning.ProvisioningError, match="presented another SSH host key"):
        provisioning.launch(config(), chi=fake_chi.api, state=state)
    assert fake_chi.rec.names().count("Server.execute") == executed  # nothing sent to it


def test_a_fabric_connection_of_the_lab_accepts_only_the_recorded_key(tmp_path) -> None:
    import json

    import paramiko
    from fabric import Connection

    from provisioning.hostkeys import KNOWN_HOSTS, pin

    public = "AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f"
    path = tmp_path / KNOWN_HOSTS
    path.write_text(json.dumps({"10.0.0.5": {"server": "s-1", "type": "ssh-ed25519", "key": public}}))
    connection = pin(Connection("10.0.0.5", user="cc"), "10.0.0.5", path)
    assert isinstance(connection.client._policy, paramiko.RejectPolicy)
    assert connection.client.get_host_keys().lookup("10.0.0.5")["ssh-ed25519"].get_base64() == public
