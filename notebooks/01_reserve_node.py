# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1. Reserve the node
#
# On Chameleon, hardware is reserved ahead of use with a **lease**. This lab needs one
# `gpu_p100` node (two P100 GPUs) at CHI@TACC for 2 h 50 min. The lease is named after you,
# so that you — and your instructor — can find it among everyone else's.
#
# The original lab makes the lease by hand in the Horizon web interface. Here it is code
# (python-chi), so it can be repeated and checked.
#
# Three ways to get your lease:
# - **Now** (the default): a lease that starts at once.
# - **For the class slot**: set `lease_start`, e.g. `"2026-12-01 09:00"` in the site's time zone
#   (US Central for CHI@TACC), or `"+2h"` from now.
# - **Reserved ahead in the GUI**: a lease with your `lease_name` is found and used (adopted);
#   or give its id as `lease_id` (GUI: Reservations → Leases). Notebook 08 keeps such a lease.
#   The original lab names it `serve_system_<netID>` in the GUI; this lab looks for
#   `serve_system_<your user name>` unless you set `lease_name`.
#
# A lease this notebook reserves ahead is the lab's own: notebook 08 deletes it once it has started.

# %% [markdown]
# ## The lab's code in this kernel
# Jupyter starts this kernel in `notebooks/`. The next cell puts the lab's code (the folder above) on
# the import path and, in Chameleon's Jupyter, installs the python-chi version the lab is tested with:
# about a minute the first time, later runs only check. There, also set `target = "chameleon"` in the
# parameters cell: any other target only shows what would be created.

# %%
import sys
from pathlib import Path

if (Path.cwd().parent / "servelab").is_dir():  # the kernel starts in notebooks/: the lab is one folder up
    sys.path.insert(0, str(Path.cwd().parent))
try:
    from servelab.lab import bootstrap
except ModuleNotFoundError:
    raise ModuleNotFoundError(f"the lab's code is neither installed here nor around {Path.cwd()}: "
                              "open this notebook in notebooks/ of a copy (git clone) of the lab") from None
bootstrap.ensure()

# %% tags=["parameters"]
target = None  # local | docker | chameleon; None: $SERVELAB_TARGET (docker in the node's Jupyter) or local
preset = "quick"
project = None  # e.g. "CHI-123456"; None: $CHI_PROJECT, else the hub's first project of yours
site = None  # None: CHI@TACC
node_type = None  # None: gpu_p100
lease_name = None  # None: serve_system_<your user name>; the original lab's is serve_system_<netID>
lease_minutes = None  # None: 170 (2 h 50 min)
lease_start = None  # e.g. "2026-12-01 09:00" (the site's time zone) or "+2h"; None: $CHI_LEASE_START or now
lease_id = None  # adopt a lease reserved ahead in the GUI; None: $CHI_LEASE_ID, else found by lease_name

# %%
import provisioning
from servelab.lab import common, params

P = params.resolve(target, preset, project=project, site=site, node_type=node_type,
                   lease_name=lease_name, lease_minutes=lease_minutes, lease_start=lease_start,
                   lease_id=lease_id)
P

# %% [markdown]
# ## What to reserve, and which project pays
# Parameters win over environment variables (`CHI_PROJECT`, `CHI_SITE`, …), which win over
# the lab's defaults. Nothing here opens a chooser or asks a question, so it also runs headless.
#
# The lease's hours are charged to a **project**. Chameleon's Jupyter sets `OS_PROJECT_NAME` to the
# *first* of your projects; if you are in several, that may not be your class's. The next cell
# prints the project it will charge and where that came from; set `project` to change it. Notebooks
# 02 and 08 then use the same project (it is recorded in `results/chameleon-state.json`).

# %%
config = provisioning.configure(project=P.project, site=P.site, node_type=P.node_type,
                                lease_name=P.lease_name, duration=P.lease_minutes,
                                lease_start=P.lease_start, lease_id=P.lease_id)
common.settings(config)

# %% [markdown]
# ## Plan mode
# Only the `chameleon` target talks to Chameleon. On `local` and `docker` the next cell runs
# in **plan mode**: it prints exactly what it would create and calls nothing.

# %%
common.plan_mode(P)

# %% [markdown]
# ## Create (or reuse) the lease and wait until it is active
# A new lease starts *Pending* and becomes *Active* at its start time. A lease with the same
# name (or the id in `lease_id`) is reused, not duplicated.
#
# If the lease starts within 30 minutes (`CHI_LEASE_WAIT_MINUTES`), the cell waits for it. If it
# starts later, the cell says when (the site's time and yours) and stops waiting: the lease stays
# reserved and nothing is deleted. Run this cell again after it starts, then go on to notebook 02.
#
# What the lab creates or reuses is written to `results/chameleon-state.json`: notebook 08 reads
# it to delete only what the lab created. The lease is written there before Blazar is asked for it: if
# you interrupt this cell while the lease is being made, the file still says so, and running the cell
# again goes on with that lease (notebook 08 deletes it).

# %%
lease = provisioning.reserve(config, plan_only=P.plan)

# %% [markdown]
# While you wait for the lease to become active, read the notebooks that follow: the reserved
# time is short, and every minute spent reading on the node is a minute not measuring.
