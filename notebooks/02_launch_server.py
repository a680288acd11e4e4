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
# `nvtop` (a `top` for GPUs). The script also checks the GPUs (name, driver, compute
# capability) against what the lab's images need, and stops with what to do if they do not fit.
#
# On Chameleon these cells run from Chameleon's own Jupyter environment.

# %% [markdown]
# ## The lab's code in this kernel
# As in notebook 01: the lab's code on the import path and, in Chameleon's Jupyter, the python-chi
# version the lab is tested with (a second run only checks). There, set `target = "chameleon"`.

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
project = None  # None: $CHI_PROJECT, else the project notebook 01 reserved in (the state file)
site = None
lease_name = None  # as in notebook 01; None: serve_system_<your user name>
lease_id = None  # the lease to use, as in notebook 01; None: $CHI_LEASE_ID, else found by lease_name
floating_ip = None  # a free floating IP of the project to use (kept); None: one allocated for this run
code_source = None  # "upload" (this folder, from git or not: Trovi, a zip) or "git"; None: upload
repo_url = None  # for code_source "git": the lab's repository, cloned on the node
weights = None  # trained Food-11 weights for the node's model (a URL); None: the lab's stand-in
weights_sha256 = None  # a weights file that needs unpickling is used only when this is its sha256

# %%
import provisioning
from servelab.lab import common, params

P = params.resolve(target, preset, project=project, site=site, lease_name=lease_name, lease_id=lease_id,
                   floating_ip=floating_ip, code_source=code_source, repo_url=repo_url, weights=weights,
                   weights_sha256=weights_sha256)
config = provisioning.configure(project=P.project, site=P.site, lease_name=P.lease_name, lease_id=P.lease_id,
                                floating_ip=P.floating_ip, code_source=P.code_source, repo_url=P.repo_url,
                                weights=P.weights, weights_trusted=P.weights_sha256)
common.settings(config)

# %% [markdown]
# ## The set-up script
# One idempotent script does the node's set-up over SSH: it installs Docker Engine 27.5.1 from Docker's
# apt repository, whose signing key it keeps only when the key's fingerprint is the one written in the
# script (the version of the docker CLI in the node's Jupyter image; a Docker already on
# the node is kept if it can serve that CLI) and adds the user to the `docker` group, installs the
# NVIDIA container toolkit (1.17.8 or newer: older ones let a container escape to the node) and points
# Docker's runtime at it, sets Docker's cgroup driver to
# `cgroupfs` when `exec-opts` is not set (a workaround for nvidia-container-toolkit issue 48), makes
# Docker publish a port given without an address on 127.0.0.1 only (`"ip": "127.0.0.1"`),
# restarts Docker and installs `nvtop`. Running it twice changes nothing the second time, and a run
# stopped part-way (this cell stopped, the connection lost) is finished by the next: it waits for whatever
# holds the apt/dpkg lock (unattended-upgrades runs after boot), names it while it waits, and runs
# `dpkg --configure -a` when `dpkg --audit` reports an install left half-done. Its `main`, the steps
# in order (each a function above it in the file):

# %%
common.show_file("provisioning/node_setup.sh", lines=16, start="main() {")

# %% [markdown]
# ## Server, floating IP, SSH, set-up
# Image `CC-Ubuntu24.04-CUDA` on the lease's reservation. A server with the same name is
# reused; one left in ERROR is reported with what to do (delete it first), never reused.
# On `local` and `docker` this prints the plan only.
#
# The last step, `./lab jupyter` on the node, builds the images notebook 03 needs first (the Jupyter
# server's, FastAPI with PyTorch and with ONNX Runtime, GourmetGram; the model artefacts in the PyTorch
# one when none came with the code) and starts the node's Jupyter server; Triton's image (its NGC
# base alone is about 15 GB, pulled at once in the background) and the LLM engines' build after them
# in the background while you work. Each image prints a line when it
# starts and when it is ready (and one a minute while it builds); the builds' own output goes to
# `.servelab-build/<image>.log` in the lab's folder on the node (`~/serve-system-lab`), and
# `./lab images --status` there says where each build is. A notebook whose images are still building
# waits for them, saying which and how long it has waited. The order and what each step is expected
# to take on the node: `docs/decisions/2026-11-25-node-ready-for-03.md`.
#
# Interrupting this cell (the stop button) stops it at once, in any step: the SSH session of the command
# running on the node is closed (the node may finish what it was doing by itself), and nothing is
# deleted. The lease, the server and its floating IP stay, recorded in the state file: run the cell again
# to go on (the server is reused, and the set-up script finishes what an interrupted run left), or run
# notebook 08 to delete them.

# %%
from provisioning import times

started = times.utcnow()
node = provisioning.launch(config, plan_only=P.plan)
node

# %% [markdown]
# ## Time budget
# How long the set-up took, and the time left in the lease for the notebooks (the lease's end, read
# from Chameleon).

# %%
from provisioning.budget import time_budget

print(time_budget(config, started) if node is not None else
      "plan mode: on Chameleon this prints how long the set-up took and the time left in the lease")

# %% [markdown]
# ## Next: the node's own Jupyter server
# The set-up ended by starting a Jupyter server **on the node** (`./lab jupyter`: its own
# compose project, running as your user, with the GPUs and the Docker socket). The node's
# notebooks (00's table) run there, with `target = "docker"` (their default there): the benchmarks,
# perf_analyzer and the utilisation sampler then run on the same machine as the servers. Measured from here,
# every request would also cross the network, and the GPU figures would be this machine's.
# Come back here for notebook 08.
#
# Also open an SSH session to the node from a terminal in Chameleon's Jupyter (File → New → Terminal:
# the node accepts the hub's key; the next cell prints the command), start `nvtop` in it and
# keep it open beside the node's Jupyter. The notebooks say when to look, in a paragraph that
# starts **On the GPU node, now look at nvtop**: 04 while the concurrency sweep runs, 05 during each
# instance step, 06 while two ONNX instances take the load, 07 while the batching runs go.
#
# What you measure there (`results/`) and the notebooks you save there stay **on the node**, and go
# with it when the server is deleted or the lease ends. Notebook 08 copies them here before it deletes
# anything; the next cell also prints the one line that copies them here at any time while the lease
# runs (in any of the lab's notebooks here, e.g. a new cell of this one).

# %%
common.node_jupyter(node, config)

# %% [markdown]
# ## What answers on the node's public address
# The node keeps its public address for the whole lease, and anyone on the internet can try every port of
# it. Only three may answer: SSH, the node's Jupyter server (port 8888, over TLS, behind its token) and
# GourmetGram (port 80, once notebook 03 starts it). Every other server of the lab (FastAPI, Triton, whose
# model control runs code, the LLM engines) listens on the node's loopback only, and you open their pages
# through the node's Jupyter (`/proxy/8000/docs` after its address). This cell lists what listens on the
# node and stops, in one line, if anything else answers on its public address.

# %%
from provisioning.exposure import check_exposure

public = check_exposure(node, config)

