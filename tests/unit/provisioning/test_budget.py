"""Notebook 02's time budget, on the recording stand-in of python-chi and its fake clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from provisioning import from_env, times
from provisioning.budget import time_budget
from servelab.core.lab_steps import core_on_the_node, optional_on_the_node


def _config() -> Any:
    return from_env(env={}, project="CHI-231095", site="CHI@TACC")


def test_the_budget_says_what_set_up_took_and_what_is_left(fake_chi: Any, student: str) -> None:
    fake_chi.lease.add_existing("serve_system_alice", "ACTIVE")  # started an hour ago, 3 h long
    started = times.utcnow()
    fake_chi.clock.sleep(25 * 60)
    lines = time_budget(_config(), started, chi=fake_chi.api).splitlines()
    assert lines[0] == ("Set-up took 25 min (server, floating IP, SSH, node set-up, the images notebook 03 "
                        "needs, the node's Jupyter server).")
    assert lines[1] == ("The lease ends 2026-11-23 11:00 CST at CHI@TACC (18:00 CET here): 1 h 35 min left "
                        f"for notebooks {core_on_the_node()} ({optional_on_the_node()} if there is time) and "
                        "08's teardown.")
    assert len(lines) == 3 and "./lab images --status" in lines[2]
    assert not [c for c in fake_chi.rec.names() if "create" in c.lower() or "submit" in c.lower()]


def test_less_than_an_hour_left_says_what_to_do(fake_chi: Any, student: str) -> None:
    lease = fake_chi.lease.add_existing("serve_system_alice", "ACTIVE")
    started = times.utcnow()
    fake_chi.clock.sleep(timedelta(hours=1, minutes=20).total_seconds())
    text = time_budget(_config(), started, lease=lease)  # the lease in hand: no look-up
    assert ": 40 min left for notebooks" in text
    assert "Less than an hour left: extend the lease now" in text and "run notebook 08 before it ends" in text
    assert fake_chi.rec.calls == []


def test_no_lease_found_is_said(fake_chi: Any, student: str) -> None:
    text = time_budget(_config(), times.utcnow(), chi=fake_chi.api)
    assert ("The lease's end is unknown (no live lease serve_system_alice found): see Reservations → Leases "
            "in Chameleon's GUI.") in text
