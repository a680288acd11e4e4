"""The multi-node plan for notebook 10: one lease for all nodes, a Ray head and workers with the
ports a security group must open, and bad input refused."""

from __future__ import annotations

import pytest

from provisioning.config import ChameleonConfig
from provisioning.ray_cluster import head_command, ray_cluster_plan, worker_command


def test_two_nodes_make_one_cluster() -> None:
    steps = ray_cluster_plan(ChameleonConfig(project="CHI-1", server_name="node-x"), nodes=2)
    names = [s.name for s in steps]
    assert names == ["lease", "servers", "network", "node-setup", "ray-head", "ray-worker", "notebook",
                     "teardown"]
    assert "2 × gpu_p100" in steps[0].detail
    assert "ray start --head --port=6379 --num-gpus=2" in steps[4].detail
    assert "--address=<private ip of node-x-0>:6379" in steps[5].detail and "node-x-1" in steps[5].detail
    assert "4 GPUs" in steps[6].detail


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        ray_cluster_plan(ChameleonConfig(project="CHI-1"), nodes=1)
    with pytest.raises(ValueError, match="without a port"):
        worker_command("10.0.0.1:6379")
    assert "--include-dashboard=false" in head_command()


def test_the_command_line_prints_the_cluster_plan(capsys: pytest.CaptureFixture[str]) -> None:
    from provisioning.__main__ import main

    assert main(["plan", "--nodes", "2", "--project", "CHI-1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Ray cluster over 2 nodes") and "ray start --head" in out and "ray_address" in out
    with pytest.raises(SystemExit) as exit_:
        main(["plan", "--nodes", "0", "--project", "CHI-1"])
    assert exit_.value.code == 2 and "--nodes 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["reserve", "--nodes", "2", "--project", "CHI-1"])
    assert "plan only" in capsys.readouterr().err
