"""`./lab run --target chameleon`: the node's whole life, with the recording python-chi and SSH shell.

Provisioning calls, the SSH commands in order (the remote `./lab run --target
docker` and the results fetch), the fetched results in this run's folder and
report, teardown after a failing step, and no SSH command at all when the
preflight fails.
"""

from __future__ import annotations

import base64
import io
import json
import re
import tarfile
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

import provisioning
from provisioning.config import from_env
from provisioning.times import to_utc
from servelab.lab.runner import run_chameleon
from servelab.remote.fetch import pack_command
from servelab.targets.chameleon import FETCH_MARGIN_S, STOP_INNER, remote_lab_command
from servelab.targets.detached import RemoteRun

REPO = "https://git.example.org/serve-lab.git"
REMOTE_LAB = ("cd serve-system-lab && sg docker -c "
              "'./lab run --target docker --preset quick --run-dir results/{name}'")
PACK = ("cd serve-system-lab/results && {{ test -d {name} || exit 3; }}; tar -czf {name}.tar.gz "
        "--warning=no-file-changed {name} $(ls {name}.log 2>/dev/null); [ $? -le 1 ]")


def config(**changes: object) -> provisioning.ChameleonConfig:
    return from_env(env={}, project="CHI-231095", **{"code_source": "git", "repo_url": REPO, **changes})


def node_run_folder(name: str, ok: bool = True) -> bytes:
    """What the node's `./lab run --target docker` leaves in results/<name>, packed as the node packs it."""
    files = {
        "run.json": json.dumps({"preset": "quick", "target": "docker", "ok": ok, "notebooks": [
            {"name": "03_fastapi", "seconds": 80.0, "ok": True, "error": ""},
            {"name": "04_triton_python", "seconds": 12.0, "ok": ok,
             "error": "" if ok else "04_triton_python.ipynb: cell 9 raised PerfAnalyzerError: boom"}]}),
        "03_fastapi.ipynb": json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}),
        "fastapi.jsonl": "",
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class RecordingShell:
    """The node over SSH: records each command; the detached lab run prints a line and exits
    ``lab_exit`` (after ``drop`` polls that fail like a dropped connection); the pack makes a tarball."""

    def __init__(self, lab_exit: int = 0, node_ok: bool = True, made_results: bool = True,
                 drop: int = 0) -> None:
        self.calls: list[tuple[str, str]] = []
        self.lab_exit = lab_exit
        self.node_ok = node_ok
        self.made_results = made_results
        self.drop = drop
        self.files: dict[str, bytes] = {}

    def capture(self, command: str, timeout: float) -> tuple[int, str]:
        if "setsid nohup" in command:  # RemoteRun.start_command around the lab's command
            self.calls.append(("start", command))
            return 0, "started\n"
        if "base64" in command:  # RemoteRun.poll_command
            self.calls.append(("poll", command.split("tail -c +", 1)[1].split(" ", 1)[0]))
            if self.drop:
                self.drop -= 1
                raise OSError("Socket is closed")
            offset = int(self.calls[-1][1]) - 1
            log = b"lab: 03_fastapi ok\n"[offset:]
            return 0, f"{self.lab_exit}\n" + base64.b64encode(log).decode() + "\n"
        raise AssertionError(f"unexpected command on the node: {command}")

    def run(self, command: str, timeout: float) -> int:
        self.calls.append(("run", command))
        if "tar -czf" in command:
            if not self.made_results:
                return 3
            name = command.split("test -d ", 1)[1].split()[0]
            tarball = command.split("tar -czf ", 1)[1].split()[0]  # a stop's second try packs under its own
            self.files[f"serve-system-lab/results/{tarball}"] = node_run_folder(name, self.node_ok)
            return 0
        raise AssertionError(f"unexpected command on the node: {command}")

    def get(self, remote_path: str, local_path: Path) -> None:
        self.calls.append(("get", remote_path))
        Path(local_path).write_bytes(self.files[remote_path])


def names(fake_chi) -> list[str]:
    return [name for name, _, _ in fake_chi.rec.calls]


def chameleon(tmp_path: Path, fake_chi, shell: RecordingShell, **options: object):
    shells: list[object] = []

    def shell_for(node: provisioning.Node) -> RecordingShell:
        shells.append(node)
        return shell

    run_dir, outcome, report = run_chameleon("quick", results_base=tmp_path, config=config(),
                                             chi=fake_chi.api, shell_for=shell_for, **options)
    return run_dir, outcome, report, shells


def test_the_whole_node_lifecycle_in_order(tmp_path: Path, fake_chi, student) -> None:
    shell = RecordingShell()
    run_dir, outcome, report, shells = chameleon(tmp_path, fake_chi, shell)
    name = run_dir.name
    assert outcome.ok, outcome.error
    assert [s.step for s in outcome.steps] == ["preflight", "reserve", "launch", "node run", "fetch",
                                               "teardown"]
    # provisioning: lease and server made, the node set up and its Jupyter started, then all deleted
    calls = names(fake_chi)
    for needed in ("lease.Lease", "Lease.submit", "server.Server", "Server.submit",
                   "neutron.update_floatingip", "Server.upload", "Server.execute", "Server.delete",
                   "Lease.delete"):
        assert needed in calls, needed
    assert calls.index("Server.execute") < calls.index("Server.delete") < calls.index("Lease.delete")
    executed = [args[0] for n, args, _ in fake_chi.rec.calls if n == "Server.execute"]
    assert executed[-1] == "cd serve-system-lab && sg docker -c './lab jupyter'"
    # SSH: the lab on the node as the docker target, then the results fetched
    # started with its own deadline: the lease's end (wall clock) less the fetch margin
    deadline = to_utc(fake_chi.lease.leases[0].end_date).timestamp() - FETCH_MARGIN_S
    start = RemoteRun("serve-system-lab", name).start_command(REMOTE_LAB.format(name=name), deadline=deadline,
                                                              inner_stop=STOP_INNER)
    assert shell.calls == [("start", start),
                           ("poll", "1"),
                           ("run", PACK.format(name=name)),
                           ("get", f"serve-system-lab/results/{name}.tar.gz")]
    assert shells[0].jupyter_url.startswith("http://129.114.108.7:8888/lab?token=")
    # the node's results are this run's: notebooks, data, its run.json kept beside ours
    assert (run_dir / "03_fastapi.ipynb").is_file() and (run_dir / "node-run.json").is_file()
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["target"] == "chameleon" and summary["ok"] is True
    assert [n["name"] for n in summary["notebooks"]] == ["03_fastapi", "04_triton_python"]
    assert report is not None and "teardown" in report.read_text()
    assert "<th>origin</th>" in report.read_text()  # what the run created or adopted, and its fate


def test_a_failing_node_run_is_fetched_reported_and_torn_down(tmp_path: Path, fake_chi, student) -> None:
    shell = RecordingShell(lab_exit=1, node_ok=False)
    run_dir, outcome, report, _ = chameleon(tmp_path, fake_chi, shell)
    assert not outcome.ok
    assert outcome.error.startswith("node run: ./lab run --target docker exited 1 on the node")
    steps = {s.step: s.ok for s in outcome.steps}
    assert steps == {"preflight": True, "reserve": True, "launch": True, "node run": False, "fetch": True,
                     "teardown": True}
    assert [c for c, _ in shell.calls] == ["start", "poll", "run", "get"]  # measured data is still fetched
    assert names(fake_chi)[-1] == "Lease.delete"
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["ok"] is False and "node run" in summary["error"]
    assert "PerfAnalyzerError: boom" in report.read_text()  # the node's failing notebook, in the report


def test_a_failing_launch_still_tears_down_and_sends_no_ssh(tmp_path: Path, fake_chi, student) -> None:
    fake_chi.server.exit_codes["./lab jupyter"] = 1
    shell = RecordingShell()
    _, outcome, _, shells = chameleon(tmp_path, fake_chi, shell)
    assert [(s.step, s.ok) for s in outcome.steps] == [
        ("preflight", True), ("reserve", True), ("launch", False), ("teardown", True)]
    assert "./lab jupyter" in outcome.error
    assert shells == [] and shell.calls == []
    assert "Server.delete" in names(fake_chi) and names(fake_chi)[-1] == "Lease.delete"


def test_a_failed_preflight_creates_nothing_and_sends_no_ssh(tmp_path: Path, fake_chi, student) -> None:
    fake_chi.image.images.clear()  # the image does not exist at the site
    shell = RecordingShell()
    _, outcome, report, shells = chameleon(tmp_path, fake_chi, shell)
    assert [(s.step, s.ok) for s in outcome.steps] == [("preflight", False)]
    assert "image" in outcome.error.lower()
    creating = ("lease.Lease", "Lease.", "server.Server", "Server.")
    assert not any(n.startswith(creating) for n in names(fake_chi))
    assert shells == [] and shell.calls == []
    assert report is not None  # the report still says which step failed
    assert "preflight" in report.read_text()


def test_keep_node_leaves_the_server_and_lease(tmp_path: Path, fake_chi, student, capsys) -> None:
    _, outcome, _, _ = chameleon(tmp_path, fake_chi, RecordingShell(), keep_node=True)
    assert outcome.ok and [s.step for s in outcome.steps][-1] == "fetch"
    assert "Server.delete" not in names(fake_chi) and "Lease.delete" not in names(fake_chi)
    assert "--keep-node" in capsys.readouterr().out


def test_no_results_on_the_node_is_a_clear_fetch_failure(tmp_path: Path, fake_chi, student) -> None:
    _, outcome, _, _ = chameleon(tmp_path, fake_chi, RecordingShell(lab_exit=2, made_results=False))
    steps = {s.step: (s.ok, s.detail) for s in outcome.steps}
    assert steps["fetch"][0] is False and "no results/" in steps["fetch"][1]
    assert steps["teardown"][0] is True


class SleepingLaptop(RecordingShell):
    """The node's run goes on; at the third poll the controller's laptop has slept for three hours: the
    wall clock (provisioning's, the stand-in's) jumps past the lease's end, the monotonic one stands
    still. ``node_stops`` says whether the node's watchdog has stopped the run by then."""

    def __init__(self, fake_chi, node_stops: bool) -> None:
        super().__init__()
        self.fake_chi = fake_chi
        self.node_stops = node_stops
        self.polls = 0

    def capture(self, command: str, timeout: float) -> tuple[int, str]:
        if "base64" in command:
            self.polls += 1
            self.calls.append(("poll", str(self.polls)))
            if self.polls == 3:
                self.fake_chi.clock.at += timedelta(hours=3)
            if self.polls > 50:  # (a deadline on the monotonic clock would never come)
                raise AssertionError("the controller still follows the run hours past the lease's end")
            status = "deadline" if self.node_stops and self.polls >= 3 else "running"
            return 0, f"{status}\n\n"
        if "kill -TERM" in command and "setsid" not in command:
            self.calls.append(("stop", command))
            return 0, ""
        return super().capture(command, timeout)


@pytest.mark.parametrize("node_stops", [True, False], ids=["the node stopped it", "the controller stops it"])
def test_a_suspended_controller_still_stops_the_node_run_at_the_lease_end(
        tmp_path: Path, fake_chi, student, monkeypatch, node_stops: bool) -> None:
    monkeypatch.setattr(time, "monotonic", lambda: 1000.0)  # stands still while the laptop sleeps
    shell = SleepingLaptop(fake_chi, node_stops)
    _, outcome, _, _ = chameleon(tmp_path, fake_chi, shell)
    steps = {s.step: (s.ok, s.detail) for s in outcome.steps}
    by = "the node" if node_stops else "the controller"
    assert steps["node run"] == (False, "the node's lab run was stopped at the lease's end less 15 min kept "
                                        f"for the fetch (by {by}): what it finished is in this run's folder")
    assert steps["fetch"][0] and steps["teardown"][0]  # what it measured is fetched, then all deleted
    assert [c for c, _ in shell.calls if c == "stop"] == ([] if node_stops else ["stop"])
    assert shell.polls == 3  # the first poll after waking acted on the deadline
    assert names(fake_chi)[-1] == "Lease.delete"


class InterruptedShell(RecordingShell):
    """Ctrl-C (KeyboardInterrupt) while the controller follows the node's run; the node has measured part
    of the lab. ``stuck`` makes the copy hang (a dead connection) until the test ends."""

    def __init__(self, stuck: threading.Event | None = None) -> None:
        super().__init__(node_ok=False)
        self.stuck = stuck

    def capture(self, command: str, timeout: float) -> tuple[int, str]:
        if "base64" in command:
            self.calls.append(("poll", ""))
            raise KeyboardInterrupt
        return super().capture(command, timeout)

    def get(self, remote_path: str, local_path: Path) -> None:
        if self.stuck is not None:
            self.calls.append(("get", remote_path))
            self.stuck.wait(60)
            return
        super().get(remote_path, local_path)


def test_ctrl_c_during_the_node_run_fetches_what_the_node_has_then_tears_down(tmp_path: Path, fake_chi,
                                                                             student, capsys) -> None:
    shell = InterruptedShell()
    run_dir, outcome, _, _ = chameleon(tmp_path, fake_chi, shell)
    steps = [(s.step, s.ok, s.detail) for s in outcome.steps]
    assert [(name, ok) for name, ok, _ in steps] == [("preflight", True), ("reserve", True), ("launch", True),
                                                     ("stopped", False), ("fetch", True), ("teardown", True)]
    assert steps[4][2] == f"after the stop: 3 files from the node's results/{run_dir.name}"
    assert [c for c, _ in shell.calls] == ["start", "poll", "run", "get"]  # packed and copied, then deleted
    assert (run_dir / "03_fastapi.ipynb").is_file()  # the notebook it had finished
    assert "[fetch] the run was stopped: fetching what the node has measured so far (up to 3 min, " \
           "connecting included; Ctrl-C again skips it), then the teardown" in capsys.readouterr().out
    assert names(fake_chi)[-1] == "Lease.delete"


class CutCopyShell(RecordingShell):
    """The lab ran through; Ctrl-C lands while the results are being copied back, the first time only."""

    def get(self, remote_path: str, local_path: Path) -> None:
        if not any(c == "get" for c, _ in self.calls):
            self.calls.append(("get", remote_path))
            raise KeyboardInterrupt
        super().get(remote_path, local_path)


def test_a_stop_during_the_fetch_fetches_once_more_then_tears_down(tmp_path: Path, fake_chi, student) -> None:
    """Ctrl-C in the fetch after a finished run used to go straight to the teardown: hours measured,
    nothing copied. The stop's own fetch (time-limited) copies them."""
    shell = CutCopyShell()
    run_dir, outcome, _, _ = chameleon(tmp_path, fake_chi, shell)
    steps = [(s.step, s.ok) for s in outcome.steps]
    assert steps[-3:] == [("stopped", False), ("fetch", True), ("teardown", True)], steps
    gets = [path for c, path in shell.calls if c == "get"]
    assert len(gets) == 2 and gets[1].endswith("-stopped.tar.gz")  # never the tarball the cut try wrote
    assert (run_dir / "03_fastapi.ipynb").is_file()
    assert names(fake_chi)[-1] == "Lease.delete"


def test_the_fetch_after_a_stop_is_time_limited(tmp_path: Path, fake_chi, student, monkeypatch) -> None:
    from servelab.targets import chameleon as node_run

    monkeypatch.setattr(node_run, "STOPPED_FETCH_S", 0.5)
    stuck = threading.Event()
    try:
        _, outcome, _, _ = chameleon(tmp_path, fake_chi, InterruptedShell(stuck))
    finally:
        stuck.set()
    steps = {s.step: (s.ok, s.detail) for s in outcome.steps}
    assert steps["fetch"][0] is False
    detail = steps["fetch"][1]
    assert detail.startswith("copying results/") and "did not finish within 0.5 s" in detail
    assert steps["teardown"][0] and names(fake_chi)[-1] == "Lease.delete"


def test_a_lease_ending_too_soon_for_the_lab_is_a_clear_node_run_failure(tmp_path: Path, fake_chi,
                                                                       student) -> None:
    lease = fake_chi.lease.add_existing("serve_system_alice", "ACTIVE")
    lease.end_date = (fake_chi.clock.now() + timedelta(minutes=20)).replace(tzinfo=None)  # Blazar's naive UTC
    shell = RecordingShell()
    _, outcome, _, _ = chameleon(tmp_path, fake_chi, shell)
    steps = {s.step: (s.ok, s.detail) for s in outcome.steps}
    assert steps["node run"] == (False, "the lease ends in 20 min, too soon for the lab and the fetch "
                                        "(15 min kept for it): extend the lease (GUI: Reservations → "
                                        "Leases → Update) or reserve a longer one")
    assert not any(c == "start" for c, _ in shell.calls)  # nothing started on the node
    assert steps["teardown"][0]


def test_remote_commands_quote_their_arguments() -> None:
    command = remote_lab_command("my lab", "20261122-120000-quick", "full", ["04", "05"])
    assert command == ("cd 'my lab' && sg docker -c './lab run --target docker --preset full --run-dir "
                       "results/20261122-120000-quick --only 04 05'")
    assert pack_command("my lab", "x").startswith("cd 'my lab'/results && { test -d x || exit 3; }; ")


def test_the_pack_takes_the_folder_and_its_log_and_unpack_keeps_the_log(tmp_path: Path) -> None:
    """pack_command run for real: the run folder and results/<run>.log; no folder is exit 3."""
    import subprocess

    from servelab.remote.fetch import NO_RUN_FOLDER, unpack

    results = tmp_path / "lab" / "results"
    (results / "run1").mkdir(parents=True)
    (results / "run1" / "run.json").write_text("{}")
    (results / "run1.log").write_text("lab: 03_fastapi ok\n")
    assert subprocess.run(["bash", "-c", pack_command("lab", "run1")], cwd=tmp_path).returncode == 0
    out = tmp_path / "out"
    assert sorted(unpack(results / "run1.tar.gz", "run1", out)) == ["node-run.log", "run.json"]
    assert (out / "node-run.log").read_text() == "lab: 03_fastapi ok\n"
    missing = subprocess.run(["bash", "-c", pack_command("lab", "run2")], cwd=tmp_path)
    assert missing.returncode == NO_RUN_FOLDER


def test_the_cli_refuses_a_run_dir_for_chameleon(capsys) -> None:
    from servelab.lab.runner import main

    assert main(["run", "--target", "chameleon", "--run-dir", "/tmp/x"]) == 2
    assert "--run-dir" in capsys.readouterr().err


def test_unpack_keeps_to_the_run_folder(tmp_path: Path) -> None:
    from servelab.remote.fetch import unpack

    def pack(*members: str) -> Path:
        tarball = tmp_path / "x.tar.gz"
        with tarfile.open(tarball, "w:gz") as tar:
            for member in members:
                info = tarfile.TarInfo(member)
                info.size = 1
                tar.addfile(info, io.BytesIO(b"x"))
        return tarball

    out = tmp_path / "out"
    assert unpack(pack("run/a.csv", "other/b.csv", "/etc/c"), "run", out) == ["a.csv"]
    assert sorted(p.name for p in out.iterdir()) == ["a.csv"]
    with pytest.raises(tarfile.TarError):  # tarfile's data filter: nothing lands outside the run
        unpack(pack("run/../../evil"), "run", out)


Member = tuple[str, bytes | tuple[str, str] | None]  # (name, content)
FIFO = ("fifo", "")  # content of a named pipe


def _tarball(path: Path, *members: Member) -> Path:
    """A .tar.gz of ``(name, content)``: bytes a file, None a folder, ``("symlink" | "hardlink", target)``
    a link, FIFO a named pipe."""
    kinds = {"symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE}
    with tarfile.open(path, "w:gz") as tar:
        for name, content in members:
            info = tarfile.TarInfo(name)
            if isinstance(content, bytes):
                info.size, info.mode = len(content), 0o4777  # setuid, writable by all: cleared
                tar.addfile(info, io.BytesIO(content))
                continue
            if content is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
            else:
                info.type, info.linkname = kinds[content[0]], content[1]
            tar.addfile(info)
    return path


def test_unpack_checks_members_itself_where_tarfile_has_no_data_filter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python 3.11.2 (Debian 12's python3) has no ``filter=``: unpack checks every member itself."""
    from servelab.remote.fetch import unpack

    monkeypatch.delattr(tarfile, "data_filter")
    out = tmp_path / "out"
    good = _tarball(tmp_path / "good.tar.gz", ("run", None), ("run/sub", None), ("run/sub/a.csv", b"1,2\n"),
                    ("run/report.html", b"<p>"), ("other/b.csv", b"x"))
    assert unpack(good, "run", out) == ["sub", "sub/a.csv", "report.html"]
    assert (out / "sub" / "a.csv").read_bytes() == b"1,2\n" and (out / "report.html").read_bytes() == b"<p>"
    assert (out / "report.html").stat().st_mode & 0o7777 == 0o755  # as the data filter leaves it
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "sub"]
    cases: list[tuple[str, list[Member], str]] = [
        ("dotdot", [("run/a.csv", b"x"), ("run/../../evil", b"x")], "'../../evil' is a path with .."),
        ("symlink", [("run/a.csv", b"x"), ("run/passwd", ("symlink", "/etc/passwd"))], "'passwd' is a link"),
        ("hardlink", [("run/a.csv", b"x"), ("run/b", ("hardlink", "run/a.csv"))], "'b' is a link"),
        ("fifo", [("run/pipe", FIFO)], "'pipe' is not a regular file or folder"),
    ]
    for name, members, why in cases:
        target = tmp_path / f"out-{name}"
        with pytest.raises(tarfile.TarError, match=re.escape(why)) as info:
            unpack(_tarball(tmp_path / f"{name}.tar.gz", *members), "run", target)
        assert "nothing unpacked" in str(info.value)
        assert not target.exists(), "a refused tarball unpacks nothing, not even its good members"
