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
# # 2. Launch and set up the server
#
# With an active lease, we start a bare-metal server on the reserved node, give it a public
# (floating) IP address, wait until it answers SSH, and install what the lab needs on it:
# the lab's code, Docker, the NVIDIA container toolkit (so containers can use the GPUs) and
# `nvtop` (a `top` for GPUs).
#
# On Chameleon these cells run from Chameleon's own Jupyter environment.

# %% tags=["parameters"]
target = "local"  # local | docker | chameleon
preset = "quick"
lease_name = None  # None: serve-system-<your user name>
site = None
project = None

# %%
from servelab import params, steps

P = params.resolve(target, preset, lease_name=lease_name, site=site, project=project)
P

# %% [markdown]
# ## The server
# Image `CC-Ubuntu24.04-CUDA`, on the lease's reservation. A server with the same name is
# reused; one left in ERROR must be deleted first (the code says so and stops).
# On `local` and `docker` this is the plan only.

# %%
server = steps.launch_server(P)
server

# %% [markdown]
# ## Setting up the node
# One idempotent script does the set-up over SSH: clone the lab, install Docker, add the
# user to the `docker` group, install the NVIDIA container toolkit and point Docker's runtime
# at it, switch Docker's cgroup driver to `cgroupfs` when `exec-opts` is not set (a workaround
# for nvidia-container-toolkit issue 48), restart Docker, install `nvtop`. Running it twice
# changes nothing the second time.

# %%
steps.setup_node(P, server)

# %% [markdown]
# ## Next
# Open an SSH session to the node (`ssh cc@<floating IP>`) and keep it open: you will
# watch `nvtop` there while the benchmarks run.
