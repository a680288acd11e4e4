"""The first cell of 01, 02 and 08 (servelab.lab.bootstrap): installs the pinned python-chi only where the lab
is not installed, once; says what it did; stops with one line. pip is a recording stand-in here; the real
install runs in tests/integration/lab/test_chameleon_jupyter.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jupytext
import pytest

from servelab.core.paths import REPO_ROOT
from servelab.lab import bootstrap
from servelab.lab.bootstrap import BootstrapError

PINS = {"python-chi": "1.2.10", "python-blazarclient": "4.6.0"}


def constraint(name: str) -> str:
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        if bootstrap.canonical(line.split("==")[0]) == bootstrap.canonical(name):
            return line.split("==")[1].strip()
    raise AssertionError(f"{name} not in constraints.txt")


def test_the_pins_are_constraints_txt_s_and_the_file_names_no_version() -> None:
    names = [line for line in (REPO_ROOT / bootstrap.REQUIREMENTS).read_text().splitlines()
             if line and not line.startswith("#")]
    assert names == ["python-chi", "python-blazarclient"]
    assert bootstrap.pins() == {name: constraint(name) for name in names}
    assert bootstrap.pins()["python-chi"].startswith("1.2.")  # associate_floating_ip returns the address


class Pip:
    """Records pip's command; an install makes ``have`` the pinned versions (or fails)."""

    def __init__(self, have: dict[str, str | None], returncode: int = 0, stderr: str = "") -> None:
        self.have, self.returncode, self.stderr = have, returncode, stderr
        self.calls: list[list[str]] = []

    def __call__(self, command: list[str], **_: Any) -> SimpleNamespace:
        self.calls.append(command)
        if self.returncode == 0:
            self.have.update(PINS)
        stdout = "Collecting python-chi==1.2.10\nSuccessfully installed python-chi-1.2.10\n"
        return SimpleNamespace(returncode=self.returncode, stderr=self.stderr, stdout=stdout)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """This interpreter's versions and whether the lab is installed, as the tests set them."""
    state = SimpleNamespace(have={"python-chi": None, "python-blazarclient": None}, lab_installed=False)
    monkeypatch.setattr(bootstrap, "pins", lambda root=None: dict(PINS))
    monkeypatch.setattr(bootstrap, "installed", lambda names: {n: state.have.get(n) for n in names})
    monkeypatch.setattr(bootstrap, "lab_installed", lambda root, environ: state.lab_installed)
    monkeypatch.delitem(sys.modules, "chi", raising=False)
    monkeypatch.delitem(sys.modules, "blazarclient", raising=False)
    return state


def test_installs_the_pins_into_this_kernel_and_says_so(world: SimpleNamespace,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    pip = Pip(world.have)
    bootstrap.ensure(run=pip)
    assert pip.calls == [[sys.executable, "-m", "pip", "install", "--disable-pip-version-check",
                          "--progress-bar", "off", "python-chi==1.2.10", "python-blazarclient==4.6.0"]]
    out = capsys.readouterr().out
    assert f"$ {sys.executable} -m pip install" in out and "Successfully installed python-chi-1.2.10" in out
    assert "Collecting" not in out
    assert "python-chi 1.2.10, python-blazarclient 4.6.0" in out.splitlines()[-1]
    bootstrap.ensure(run=pip)  # a second run: no pip
    assert len(pip.calls) == 1
    assert "Already installed, nothing to do" in capsys.readouterr().out


def test_an_older_hub_python_chi_is_replaced(world: SimpleNamespace) -> None:
    world.have.update({"python-chi": "1.1.0", "python-blazarclient": "4.6.0"})
    pip = Pip(world.have)
    bootstrap.ensure(run=pip)
    assert pip.calls and world.have == PINS


def test_where_the_lab_is_installed_nothing_is(world: SimpleNamespace,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The local venv has the pins; the node's Jupyter container has no python-chi and never provisions."""
    world.lab_installed = True
    pip = Pip(world.have)
    bootstrap.ensure(run=pip)
    assert pip.calls == []
    out = capsys.readouterr().out
    assert "nothing installed" in out and "python-chi (not installed)" in out and "python-chi 1.2.10" in out


def test_a_failed_install_is_one_line(world: SimpleNamespace) -> None:
    pip = Pip(world.have, returncode=1,
              stderr="Looking in indexes\nERROR: No matching distribution found for python-chi==1.2.10\n"
                     "ERROR: later lines repeat it\n")
    with pytest.raises(BootstrapError) as info:
        bootstrap.ensure(run=pip)
    message = str(info.value)
    assert "\n" not in message and "No matching distribution found for python-chi==1.2.10" in message
    assert sys.executable in message


def test_an_already_imported_python_chi_asks_for_a_restart(world: SimpleNamespace,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    world.have.update({"python-chi": "1.1.0", "python-blazarclient": None})
    monkeypatch.setitem(sys.modules, "chi", SimpleNamespace())
    with pytest.raises(BootstrapError, match=r"restart the kernel \(Kernel > Restart Kernel\)"):
        bootstrap.ensure(run=Pip(world.have))


def test_metadata_in_the_checkout_does_not_make_the_lab_installed(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """An editable install leaves servelab.egg-info in the checkout, which the first cell puts on sys.path."""
    root, site = tmp_path / "checkout", tmp_path / "site-packages"
    (root / "servelab.egg-info").mkdir(parents=True)
    metadata = "Metadata-Version: 2.1\nName: servelab\nVersion: 0.1.0\n"
    (root / "servelab.egg-info" / "PKG-INFO").write_text(metadata)
    site.mkdir()
    monkeypatch.setattr(sys, "path", [str(root), str(site)])
    assert not bootstrap.lab_installed(root, environ={})
    assert bootstrap.lab_installed(root, environ={"PYTHONPATH": str(root)})  # the node's Jupyter container
    (site / "servelab-0.1.0.dist-info").mkdir()
    (site / "servelab-0.1.0.dist-info" / "METADATA").write_text(metadata)
    assert bootstrap.lab_installed(root, environ={})  # pip install -e . (the local venv)


def first_code_cell(name: str) -> str:
    nb = jupytext.read(REPO_ROOT / "notebooks" / f"{name}.py")
    return next(c.source for c in nb.cells if c.cell_type == "code")


def test_01_02_08_start_with_the_same_cell() -> None:
    cells = {name: first_code_cell(name) for name in ("01_reserve_node", "02_launch_server", "08_teardown")}
    assert len(set(cells.values())) == 1 and "bootstrap.ensure()" in cells["01_reserve_node"]


@pytest.mark.parametrize(("where", "found"), [("notebooks", True), ("elsewhere", False)])
def test_the_first_cell_finds_the_checkout_or_says_where_to_open_the_notebook(tmp_path: Path, where: str,
                                                                             found: bool) -> None:
    """Run without site-packages (-S): nothing of the lab installed, as in Chameleon's Jupyter."""
    cell = first_code_cell("01_reserve_node").replace("bootstrap.ensure()", "print(bootstrap.ROOT)")
    cwd = REPO_ROOT / "notebooks" if found else tmp_path
    done = subprocess.run([sys.executable, "-S", "-c", cell], cwd=cwd, capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin"})
    if found:
        assert done.returncode == 0 and done.stdout.strip() == str(REPO_ROOT), done.stderr
    else:
        assert done.returncode == 1
        last = done.stderr.strip().splitlines()[-1]
        assert last == ("ModuleNotFoundError: the lab's code is neither installed here nor around "
                        f"{tmp_path}: open this notebook in notebooks/ of a copy (git clone) of the lab")


def test_the_checkout_is_named_without_the_machine_s_path(tmp_path: Path, monkeypatch) -> None:
    """The first cell said "The lab's code: /work/main": a machine's absolute path in a student's notebook."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "work" / "lab").mkdir(parents=True)
    assert bootstrap.where(tmp_path / "home" / "work" / "lab") == "~/work/lab"
    assert bootstrap.where(tmp_path / "srv" / "serve-lab") == "the folder 'serve-lab'"
