"""Notebook 02's time budget: what the node's set-up took and how much of the lease is left.

The caller takes ``times.utcnow()`` before ``launch`` (server, floating IP, SSH, node set-up, the
images notebook 03 needs, the node's Jupyter server); the lease's end is read from Blazar (read-only
calls). Each step's expected minutes on the node: docs/decisions/2026-11-25-node-ready-for-03.md
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from provisioning import times
from provisioning.checks import select_context, start_chi
from provisioning.chi_api import ChiApi
from provisioning.config import ChameleonConfig
from provisioning.lease import find_lease
from servelab.core.lab_steps import LAB_STEPS, core_on_the_node, optional_on_the_node, ranges

LOW_LEFT_S = 3600  # below this, say what to do before the lease ends


def time_budget(config: ChameleonConfig, started: datetime, chi: ChiApi | None = None,
                lease: Any | None = None) -> str:
    """Lines for people: the set-up's duration since ``started``, the lease's end and the time left
    (``lease``: the lease when the caller has it; else it is looked up as ``launch`` does)."""
    now = times.utcnow()
    lines = [f"Set-up took {times.show_span((now - started).total_seconds())} (server, floating IP, SSH, "
             "node set-up, the images notebook 03 needs, the node's Jupyter server)."]
    if lease is None:
        chi = start_chi(config, chi)
        select_context(config, chi)
        lease = find_lease(config, chi)
    end = times.to_utc(getattr(lease, "end_date", None)) if lease is not None else None
    if end is None:
        name = config.lease_id or config.lease_name
        lines.append(f"The lease's end is unknown (no live lease {name} found): see Reservations → Leases "
                     "in Chameleon's GUI.")
    else:
        left = (end - now).total_seconds()
        lines.append(f"The lease ends {times.show_time(end, config.site)}: {times.show_span(left)} left for "
                     f"notebooks {core_on_the_node()} ({optional_on_the_node()} if there is time) and "
                     f"{ranges(s.number for s in LAB_STEPS if s.last)}'s teardown.")
        if left < LOW_LEFT_S:
            lines.append("Less than an hour left: extend the lease now if Chameleon allows it (GUI: "
                         "Reservations → Leases → Update Lease), or plan to run notebook 08 before it ends; "
                         "at its end Chameleon deletes the server and everything on it.")
    lines.append("Meanwhile the node builds Triton's and the LLM engines' images in the background: notebook "
                 "03 needs neither, and the later ones wait for theirs when they start (on the node, "
                 "`./lab images --status` shows each build).")
    return "\n".join(lines)
