"""Parameters: presets, and a bad value fails at the parameters cell with a message saying what to fix."""

from __future__ import annotations

import pytest

from servelab.lab import runner as lab
from servelab.lab.params import ParameterError, resolve


def test_presets_fill_in_sizes() -> None:
    quick = resolve("local", "quick", seq_requests=None, rate_fractions=None)
    full = resolve("local", "full", seq_requests=None, rate_fractions=None)
    assert quick.seq_requests < full.seq_requests == 100
    assert full.rate_fractions[-1] < 1.5
    assert resolve("local", "quick", seq_requests=7).seq_requests == 7


def test_lease_parameters_pass_as_given() -> None:
    """The notebooks' lease parameters: None leaves them to the environment (provisioning.from_env)."""
    left = resolve("chameleon", lease_start=None, lease_id=None, delete_adopted=None)
    assert (left.lease_start, left.lease_id, left.delete_adopted) == (None, None, False)
    lease_id = "0f6b8a3e-5d2c-4b7a-9e1f-2a3b4c5d6e7f"
    for start in ("2026-12-01 09:00", "2026-12-01T15:00Z", "2026-12-01T09:00-06:00", "+2h", "+30m", "now"):
        given = resolve("chameleon", lease_start=start, lease_id=lease_id, delete_adopted=True)
        assert (given.lease_start, given.lease_id, given.delete_adopted) == (start, lease_id, True)


def test_provisioning_parameters_of_01_02_08_pass_as_given() -> None:
    """project, lease_name (the original lab's serve_system_<netID>), floating_ip, code_source and repo_url:
    None leaves them to the environment and the state file (provisioning.configure)."""
    left = resolve("chameleon", project=None, lease_name=None, floating_ip=None, code_source=None,
                   repo_url=None)
    assert [left.project, left.lease_name, left.floating_ip, left.code_source, left.repo_url] == [None] * 5
    given = resolve("chameleon", project="CHI-251409", lease_name="serve_system_ab1234",
                    floating_ip="129.114.108.42", code_source="git",
                    repo_url="https://github.com/teaching-on-testbeds/serve-system-chi.git")
    assert (given.project, given.lease_name, given.floating_ip, given.code_source) == (
        "CHI-251409", "serve_system_ab1234", "129.114.108.42", "git")
    ssh = "git@github.com:you/lab.git"
    assert resolve("chameleon", repo_url=ssh).repo_url == ssh


def test_plan_mode_everywhere_but_chameleon() -> None:
    assert resolve("local").plan and resolve("docker").plan and not resolve("chameleon").plan


@pytest.mark.parametrize(("given", "hint"), [
    ({"target": "moon"}, "target='moon' is unknown: set target to one of 'local', 'docker', 'chameleon'"),
    ({"preset": "huge"}, "preset='huge' is unknown"),
    ({"seq_requests": -5}, "seq_requests=-5 is not a whole number between 1 and"),
    ({"seq_requests": 2.5}, "seq_requests=2.5 is not a whole number"),
    ({"concurrency_levels": [16, 8]}, "must be strictly increasing"),
    ({"concurrency_levels": []}, "must be a list of at least 1"),
    ({"rate_fractions": [0.5, -1]}, "rate_fractions[1]=-1 must be a number above 0"),
    ({"client_batch": 64}, "client_batch=64 is not a whole number between 1 and 16"),
    ({"conc_requests": 4, "concurrency": 16}, "raise conc_requests or lower concurrency"),
    ({"settle": "maybe"}, "settle='maybe' is not one of 'fixed', 'stable'"),
    ({"windows": 3}, "unknown parameter 'windows'"),
    ({"lease_start": "tomorrow 9am"}, "lease_start='tomorrow 9am' is not valid: set it to text like "
                                      "'2026-12-01 09:00'"),
    ({"lease_id": "my-lease"}, "lease_id='my-lease' is not valid"),
    ({"delete_adopted": "yes"}, "delete_adopted='yes' is not True or False"),
    ({"floating_ip": "129.114.108"}, "floating_ip='129.114.108' is not valid: set it to text like "
                                     "'129.114.108.7'"),
    ({"code_source": "zip"}, "code_source='zip' is not one of 'upload', 'git'"),
    ({"repo_url": "../serve-system-lab"}, "repo_url='../serve-system-lab' is not valid: set it to text like "
                                          "'https://github.com/you/serve-system-lab.git'"),
    ({"project": "CHI 123"}, "project='CHI 123' is not valid"),
])
def test_bad_values_say_what_to_fix(given: dict, hint: str) -> None:
    target = given.pop("target", "local")
    preset = given.pop("preset", "quick")
    with pytest.raises(ParameterError) as info:
        resolve(target, preset, **given)
    assert hint in str(info.value)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bad_size_fails_at_the_parameters_cell(tmp_path) -> None:
    """Through the main command's path: the run stops at the validation cell, naming it and the fix."""
    outcome = lab.run(preset="quick", only=["03"], results_base=tmp_path,
                      extra={"seq_requests": 0}, report=False)
    failure = outcome.failure
    assert failure is not None and failure.name == "03_fastapi"
    assert "params.resolve" in failure.error
    assert "ParameterError" in failure.error and "seq_requests=0 is not a whole number" in failure.error
    assert (outcome.run_dir / "03_fastapi.ipynb").is_file(), "the partly executed notebook is kept"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_unknown_target_fails_at_the_parameters_cell(tmp_path) -> None:
    outcome = lab.run(preset="quick", only=["00"], results_base=tmp_path, extra={"target": "moon"},
                      report=False)
    assert outcome.failure is not None
    assert "params.resolve" in outcome.failure.error and "target='moon' is unknown" in outcome.failure.error


def test_runner_refuses_unknown_target_before_running() -> None:
    with pytest.raises(ParameterError, match="target='moon'"):
        lab.run(target="moon", only=["00"])


def test_cli_exit_code_names_the_problem(capsys: pytest.CaptureFixture[str]) -> None:
    assert lab.main(["run", "--preset", "huge", "--only", "00"]) == 2
    assert "preset='huge' is unknown" in capsys.readouterr().err


def test_lab_run_makes_its_folder_where_servelab_results_says(tmp_path, monkeypatch) -> None:
    """``SERVELAB_RESULTS=/somewhere ./lab run`` puts the run's folder there, not under results/."""
    from servelab.lab.runner import new_run_dir

    monkeypatch.setenv("SERVELAB_RESULTS", str(tmp_path / "elsewhere"))
    run_dir = new_run_dir("quick")
    assert run_dir.parent == tmp_path / "elsewhere" and run_dir.name.endswith("-quick")
    explicit = new_run_dir("quick", path=tmp_path / "named")
    assert explicit == tmp_path / "named" and explicit.is_dir()
