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
project = None
site = None
lease_name = None

# %%
import provisioning
from servelab.lab import common, params

P = params.resolve(target, preset, project=project, site=site, lease_name=lease_name)
P

# %%
common.stop_stacks(P)

# %%
config = provisioning.from_env(project=P.project, site=P.site, lease_name=P.lease_name)
provisioning.teardown(config, plan_only=P.plan)

# %% [markdown]
# ## What this run measured
# Every measurement was stored as data; the headless run turns it into one report.

# %%
common.results_overview()
