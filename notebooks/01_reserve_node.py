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
project = None  # None: $CHI_PROJECT, e.g. "CHI-123456"
site = None  # None: CHI@TACC
node_type = None  # None: gpu_p100
lease_name = None  # None: serve_system_<your user name>
lease_minutes = None  # None: 170 (2 h 50 min)

# %%
import provisioning
from servelab.lab import params

P = params.resolve(target, preset, project=project, site=site, node_type=node_type,
                   lease_name=lease_name, lease_minutes=lease_minutes)
P

# %% [markdown]
# ## What to reserve
# Parameters win over environment variables (`CHI_PROJECT`, `CHI_SITE`, …), which win over
# the lab's defaults. Nothing here opens a chooser or asks a question, so it also runs headless.

# %%
config = provisioning.from_env(project=P.project, site=P.site, node_type=P.node_type,
                               lease_name=P.lease_name, duration=P.lease_minutes)
config

# %% [markdown]
# ## Plan mode
# Only the `chameleon` target talks to Chameleon. On `local` and `docker` the next cell runs
# in **plan mode**: it prints exactly what it would create and calls nothing.

# %%
P.plan

# %% [markdown]
# ## Create (or reuse) the lease and wait until it is active
# A new lease starts *Pending* and becomes *Active* at its start time. A lease with the same
# name is reused, not duplicated.

# %%
lease = provisioning.reserve(config, plan_only=P.plan)

# %% [markdown]
# While you wait for the lease to become active, read notebooks 02–08: the reserved
# time is short, and every minute spent reading on the node is a minute not measuring.
