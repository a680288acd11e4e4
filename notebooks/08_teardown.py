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
# # 8. Tear down
#
# Stop every stack this lab started, then — on Chameleon — delete the server and the lease.
# (The original lab leaves that to the lease's end; giving the node back early frees it for
# someone else.) On `local` and `docker` the Chameleon part runs in plan mode.

# %% tags=["parameters"]
target = "local"  # local | docker | chameleon
preset = "quick"
lease_name = None
site = None
project = None

# %%
from servelab import params, steps

P = params.resolve(target, preset, lease_name=lease_name, site=site, project=project)
P

# %%
stack = steps.open_stack(P)
stack.down()

# %%
steps.release_node(P)

# %% [markdown]
# ## What this run measured
# Every measurement was stored as data; the headless run turns them into one report.

# %%
steps.results_overview()
