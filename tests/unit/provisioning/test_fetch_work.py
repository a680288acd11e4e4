"""A student's work on the node reaches the hub before anything is deleted (notebook 08), and whenever
a notebook asks while the lease runs (02 prints the line).

The node is a stand-in: a folder as the login user's home, where the pack command really runs
(bash, tar) and from which the tarball is copied; the python-chi calls are the recording stand-in's.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

import provisioning
from provisioning import ProvisioningError, from_env
from servelab.core.paths import REPO_ROOT

SERVER = "node-serve-system-alice"
LEASE = "serve_system_alice"
NODE_FILES = {  # the lab's folder on the node after a class: measurements and saved notebooks
    "results/fastapi.csv": "experiment,p50_ms\nfastapi,12.5\n",
    "results/fastapi.jsonl": '{"experiment": "fastapi"}\n',
    "results/20261201-100000-quick/run.json": "{}\n",
    "results/20261201-100000-quick.tar.gz": "an earlier pack: not fetched again",
    "notebooks/03_fastapi.ipynb": '{"cells": ["measured on the P100"]}\n',
    "notebooks/Untitled 1.ipynb": '{"cells": ["my own notes"]}\n',
    "notebooks/03_fastapi.py": "# its jupytext pair, saved with it\n",
    "notebooks/mine/week 2/Untitled 2.ipynb": '{"cells": ["saved in a sub-folder"]}\n',  # issue 42
    "notebooks/mine/plot.png": "a figure the student saved\n",
    "notebooks/.ipynb_checkpoints/03_fastapi-checkpoint.ipynb": "Jupyter's autosave: not fetched\n",
    "notebooks/mine/.ipynb_checkpoints/Untitled 2-checkpoint.ipynb": "not fetched either\n",
    "notebooks/__pycache__/x.cpython-311.pyc": "not fetched\n",
    "Untitled.ipynb": '{"cells": ["made from the node Jupyter\'s launcher"]}\n',  # the folder's top
    "servelab/x.py": "x = 1\n",
}


class StandInNode:
    """``NodeShell`` on a local folder that plays the node's home: commands run in bash there."""

    def __init__(self, home: Path, stuck: threading.Event | None = None) -> None:
        self.home, self.stuck = home, stuck
        self.commands: list[str] = []

    def run(self, command: str, timeout: float) -> int:
        self.commands.append(command)
        env = {**os.environ, "HOME": str(self.home)}
        # the pack itself is never the slow part here (a loaded CI machine may take over a second for it)
        done = subprocess.run(["bash", "-c", command], cwd=self.home, env=env, timeout=max(timeout, 60))
        return done.returncode

    def capture(self, command: str, timeout: float) -> tuple[int, str]:
        raise AssertionError("the fetch only packs and copies")

    def get(self, remote_path: str, local_path: Path) -> None:
        if self.stuck is not None:  # a connection that hangs
            self.stuck.wait(60)
        shutil.copy(self.home / remote_path, local_path)


def node_home(tmp_path: Path, files: dict[str, str] = NODE_FILES) -> Path:
    home = tmp_path / "node-home"
    for rel, text in files.items():
        path = home / "serve-system-lab" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return home


def config() -> provisioning.ChameleonConfig:
    return from_env(env={}, project="CHI-231095", code_source="git", repo_url="https://x/lab.git")


def launched(fake_chi) -> None:
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    provisioning.launch(config(), chi=fake_chi.api, setup_node=False)


def test_the_nodes_results_and_notebooks_reach_the_hub(fake_chi, student, tmp_path: Path, capsys) -> None:
    launched(fake_chi)
    home = node_home(tmp_path)
    node = StandInNode(home)
    servers: list[object] = []

    def shell_for(server: object) -> StandInNode:
        servers.append(server)
        return node

    calls_before = len(fake_chi.rec.calls)
    fetched = provisioning.fetch_work(config(), chi=fake_chi.api, shell_for=shell_for)
    assert fetched is not None and getattr(servers[0], "name", "") == SERVER
    here = Path(os.environ["SERVELAB_RESULTS"]) / "from-node"  # the hub's results/from-node
    assert fetched.folder == here
    assert sorted(fetched.files) == ["notebooks/03_fastapi.ipynb", "notebooks/03_fastapi.py",
                                     "notebooks/Untitled 1.ipynb", "notebooks/mine/plot.png",
                                     "notebooks/mine/week 2/Untitled 2.ipynb",
                                     "notebooks/top-level/Untitled.ipynb",
                                     "results/20261201-100000-quick/run.json", "results/fastapi.csv",
                                     "results/fastapi.jsonl"]
    assert (here / "notebooks" / "top-level" / "Untitled.ipynb").read_text() == NODE_FILES["Untitled.ipynb"]
    assert (here / "results" / "fastapi.csv").read_text() == NODE_FILES["results/fastapi.csv"]
    assert (here / "notebooks" / "03_fastapi.ipynb").read_text() == NODE_FILES["notebooks/03_fastapi.ipynb"]
    assert (here / "notebooks" / "mine" / "week 2" / "Untitled 2.ipynb").read_text() == \
        NODE_FILES["notebooks/mine/week 2/Untitled 2.ipynb"]  # any depth (issue 42)
    assert not list(here.rglob(".ipynb_checkpoints")) and not list(here.rglob("__pycache__"))
    assert not (here / "servelab").exists()
    # read-only on Chameleon: the server looked up, nothing created or deleted
    assert [name for name, _, _ in fake_chi.rec.calls[calls_before:]] == [
        "context.list_sites", "context.use_project", "context.use_site", "server.get_server_id",
        "server.get_server"]
    out = capsys.readouterr().out
    shown_here = "$SERVELAB_RESULTS/from-node"  # no machine's absolute path in what a notebook prints
    assert (f"Copying results/ and notebooks/ of ~/serve-system-lab from server {SERVER} to {shown_here} "
            "(up to 5 min)") in out
    assert (f"3 files of results/ → {shown_here}/results, 6 files of notebooks/ (4 notebooks) → "
            f"{shown_here}/notebooks") in out
    # the results overview 08 ends with reads what came from the node
    from servelab.lab import common

    assert list(common.results_overview(fetched.results)["experiment"]) == ["fastapi"]
    # a second fetch later in the lease brings the newer state
    (home / "serve-system-lab" / "results" / "fastapi.csv").write_text("experiment,p50_ms\nfastapi,9.0\n")
    provisioning.fetch_work(config(), chi=fake_chi.api, shell_for=shell_for)
    assert (here / "results" / "fastapi.csv").read_text().endswith("9.0\n")


def test_a_fetch_that_hangs_ends_at_its_limit_and_deletes_nothing(fake_chi, student, tmp_path: Path) -> None:
    launched(fake_chi)
    stuck = threading.Event()
    try:
        with pytest.raises(ProvisioningError) as caught:
            provisioning.fetch_work(config(), chi=fake_chi.api, limit_s=0.5,
                                    shell_for=lambda server: StandInNode(node_home(tmp_path), stuck))
    finally:
        stuck.set()
    message = str(caught.value)
    assert message.startswith("copying results/ and notebooks/ of ~/serve-system-lab from the node failed "
                              "(FetchTimeout: copying results/ and notebooks/ of ~/serve-system-lab from the "
                              "node did not finish within 0.5 s): nothing was deleted; run it again")
    assert message.endswith("when the node cannot be reached (server in ERROR, SSH refused), fetch_first = "
                            "False in notebook 08's parameters tears down without them")  # issue 42
    assert "\n" not in message
    deleting = ("Server.delete", "Lease.delete", "neutron.delete_floatingip")
    assert not [name for name, _, _ in fake_chi.rec.calls if name in deleting]


def test_nothing_on_the_node_or_no_node_is_said_in_a_line(fake_chi, student, tmp_path: Path, capsys) -> None:
    assert provisioning.fetch_work(config(), chi=fake_chi.api) is None  # no server (deleted, lease ended)
    assert f"No server named {SERVER} in project CHI-231095 at CHI@TACC: nothing to fetch" in \
        capsys.readouterr().out
    launched(fake_chi)
    empty = tmp_path / "empty-home"
    (empty / "serve-system-lab").mkdir(parents=True)
    fetched = provisioning.fetch_work(config(), chi=fake_chi.api, shell_for=lambda server: StandInNode(empty))
    assert fetched is not None and fetched.files == []
    assert "The node has no results/ and notebooks/ of ~/serve-system-lab yet: nothing to fetch" in \
        capsys.readouterr().out


def test_plan_mode_says_what_it_would_copy(student, capsys) -> None:
    assert provisioning.fetch_work(config(), plan_only=True) is None
    assert "Plan mode: on Chameleon this copies the node's results/ and its saved notebooks to" in \
        capsys.readouterr().out


def test_08_fetches_before_anything_is_stopped_or_deleted_and_02_prints_the_line(fake_chi, student,
                                                                                capsys) -> None:
    """08's code cells in order: the fetch comes before the stacks are stopped and the teardown; 02's last
    cell (``common.node_jupyter``) prints the one line any notebook here can run while the lease runs."""
    source = (REPO_ROOT / "notebooks" / "08_teardown.py").read_text()
    found = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)]
    calls = [ast.unparse(node.func) for node in sorted(found, key=lambda n: (n.lineno, n.col_offset))]
    order = [name for name in calls if name in ("provisioning.fetch_work", "common.stop_stacks",
                                                "provisioning.teardown")]
    assert order == ["provisioning.fetch_work", "common.stop_stacks", "provisioning.teardown"]
    from servelab.lab import common

    common.node_jupyter(None)
    assert f"\n  {provisioning.FETCH_LINE}" in capsys.readouterr().out
    assert provisioning.FETCH_LINE == "import provisioning; provisioning.fetch_work()"
    # with 02's settings: a site or server set in 02's parameters is the one the line looks at
    from dataclasses import replace

    common.node_jupyter(None, replace(config(), site="CHI@UC"))
    line = capsys.readouterr().out.splitlines()[-1].strip()
    assert line == ("import provisioning; provisioning.fetch_work(provisioning.configure("
                    "project='CHI-231095', site='CHI@UC', server_name='node-serve-system-alice', "
                    "show=False))")
    exec(line.replace("provisioning.fetch_work(", "print(").replace(", show=False))", ", show=False).site)"),
         {})  # the line runs as printed: configure takes these settings
    assert capsys.readouterr().out.strip() == "CHI@UC"


def live_node_recorded(config_: provisioning.ChameleonConfig) -> Path:
    """The default state file as 01 and 02 leave it: a lease and a server created, still live."""
    from provisioning.state import CREATED, State

    records = State()
    records.record("lease", LEASE, "lease-1", CREATED, config_)
    records.record("server", SERVER, "server-1", CREATED, config_)
    return records.path


def test_08_left_in_plan_mode_refuses_while_a_node_is_recorded_live(student, monkeypatch) -> None:
    """Issue 42: on the hub, ``target`` left unset means local, so 08 ran in plan mode: it printed what it
    would copy and a teardown plan that listed the live server and lease, and passed. Nothing was copied
    or deleted; the node kept the student's results until the lease ended, and took them with it. The
    notebook itself runs here, as a script, with the state file 01 and 02 left."""
    path = live_node_recorded(config())
    monkeypatch.delenv("SERVELAB_TARGET", raising=False)
    monkeypatch.chdir(REPO_ROOT / "notebooks")
    source = (REPO_ROOT / "notebooks" / "08_teardown.py").read_text()
    with pytest.raises(ProvisioningError) as caught:
        exec(compile(source, "08_teardown.py", "exec"), {"__name__": "__main__"})  # Run All
    message = str(caught.value)
    from servelab.core.paths import shown

    assert message == (f"plan mode copies and deletes nothing, but {shown(str(path))} records live lease "
                       f"{LEASE} (project CHI-231095, created by this lab), server {SERVER} (project "
                       "CHI-231095, created by this lab): they hold their reservation (a started lease its "
                       "node, charged to the project) until the lease ends; set target = \"chameleon\" in "
                       "the parameters cell and run this notebook again")
    with pytest.raises(ProvisioningError, match='set target = "chameleon"'):
        provisioning.teardown(config(), plan_only=True)  # the teardown cell alone refuses the same way


NODE_REFUSAL = (
    "this is the node's Jupyter (target docker, from $SERVELAB_TARGET): the teardown runs in Chameleon's "
    "Jupyter (the hub), where notebooks 01 and 02 ran and recorded the lease and the server: open "
    "notebooks/08_teardown.ipynb there, set target = \"chameleon\" and run it; nothing was copied, stopped "
    "or deleted here (on a Docker host of your own, set target = \"docker\" to stop its stacks)")


def test_08_in_the_nodes_jupyter_refuses_in_one_line_and_does_nothing(student, monkeypatch, capsys) -> None:
    """Issue 53, finding 2: in the node's Jupyter, ``target = None`` means docker ($SERVELAB_TARGET, set by
    its container) and the hub's state file is not there: 08 printed its plan, stopped the node's stacks and
    passed. A student who took that for the teardown lost their work at the lease's end, and the node stayed
    held. The notebook runs here, as a script (Run All), with the node's environment."""
    from servelab.lab import common

    monkeypatch.setenv("SERVELAB_TARGET", "docker")
    stopped: list[object] = []
    monkeypatch.setattr(common, "stop_stacks", lambda p: stopped.append(p))
    monkeypatch.chdir(REPO_ROOT / "notebooks")
    assert not provisioning.State().path.exists()  # the node has no state file
    source = (REPO_ROOT / "notebooks" / "08_teardown.py").read_text()
    with pytest.raises(ProvisioningError) as caught:
        exec(compile(source, "08_teardown.py", "exec"), {"__name__": "__main__"})  # Run All
    assert str(caught.value) == NODE_REFUSAL and "\n" not in str(caught.value)
    assert stopped == [] and not provisioning.State().path.exists()
    assert "Plan mode" not in capsys.readouterr().out  # nothing of the teardown ran


@pytest.mark.parametrize(("target", "environment"), [("docker", "docker"), ("docker", None), (None, None)])
def test_08_with_a_given_target_or_off_the_container_goes_on(student, monkeypatch, target,
                                                             environment) -> None:
    """A target given (the headless run passes it; a Docker host of one's own sets docker) or no container
    setting: the refusal does not apply."""
    from servelab.lab import params

    if environment:
        monkeypatch.setenv("SERVELAB_TARGET", environment)
    else:
        monkeypatch.delenv("SERVELAB_TARGET", raising=False)
    p = params.resolve(target)
    provisioning.not_in_the_nodes_jupyter(p.target, p.target_from)  # no error
    assert f"${params.TARGET_VARIABLE}" == provisioning.NODE_TARGET_FROM


def test_plan_mode_passes_once_nothing_is_recorded_live(student, capsys) -> None:
    from provisioning.state import DELETED, State

    live_node_recorded(config())
    records = State()
    for entry in records.resources:
        records.set_fate(entry, DELETED, "deleted")
    assert provisioning.fetch_work(config(), plan_only=True) is None
    assert provisioning.teardown(config(), plan_only=True) is None
    assert "Plan mode: on Chameleon this copies" in capsys.readouterr().out


def test_fetch_first_false_goes_on_without_the_node(fake_chi, student, capsys) -> None:
    """08's way past a fetch that cannot succeed (the node unreachable): nothing copied, said in a line."""
    launched(fake_chi)
    calls_before = len(fake_chi.rec.calls)
    assert provisioning.fetch_work(config(), chi=fake_chi.api, skip=True) is None
    assert fake_chi.rec.calls[calls_before:] == []
    assert (f"fetch_first = False: nothing is copied from server {SERVER}; its results/ and notebooks go "
            "with it at the teardown") in capsys.readouterr().out
    source = (REPO_ROOT / "notebooks" / "08_teardown.py").read_text()
    assert "fetch_first = True" in source and "skip=not P.fetch_first" in source
