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

# %% tags=["parameters"]
target = "local"  # local | docker | chameleon
preset = "quick"
lease_name = None  # None: serve-system-<your user name>
site = None  # None: CHI@TACC
node_type = None  # None: gpu_p100
lease_hours = None  # None: 2 h 50 min
project = None  # None: from the environment (OS_PROJECT_NAME)

# %%
from servelab import params, steps

P = params.resolve(target, preset, lease_name=lease_name, site=site, node_type=node_type,
                   lease_hours=lease_hours, project=project)
P

# %% [markdown]
# ## Plan mode
# Only the `chameleon` target talks to Chameleon. On `local` and `docker` the next cell runs
# in **plan mode**: it shows exactly what it would create and calls nothing.

# %%
P.plan

# %% [markdown]
# ## Create (or reuse) the lease and wait until it is active
# A new lease starts as *Pending* and becomes *Active* at its start time; an existing lease
# with the same name is reused rather than duplicated.

# %%
lease = steps.reserve_node(P)
lease

# %% [markdown]
# While you wait for the lease to become active, read notebooks 02–08: the reserved
# time is short, and every minute spent reading on the node is a minute not measuring.
