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
# # Serving a food classifier: where does the time go?
#
# A prediction served over the network is not only the model's forward pass. A request that
# arrives while the server is still busy with earlier ones **waits in a queue** before any
# computation starts. For a busy service, how much of what a user waits is that queue, and how
# much is the model? That is what this lab measures.
#
# You serve a Food-11 image classifier (MobileNetV2, 11 classes) and measure what several
# *system-level* changes do to that waiting time, one notebook per step: the table after the
# parameters lists them.

# %% [markdown]
# ## What you need
#
# - A Chameleon account and membership of a project, with an SSH key pair at the site.
# - One bare-metal node of type `gpu_p100` (two NVIDIA P100 GPUs) at **CHI@TACC**, for about
#   three hours: the lease is 2 h 50 min.
# - Read the whole lab before the lease starts — the reservation is short.
#
# **Where each notebook runs.** The steps the table below puts in Chameleon's Jupyter run here, with
# `target="chameleon"`: they reserve, launch and release the node. Notebook 02 ends by starting
# a second Jupyter server *on the node*; the steps the table puts there run there with
# `target="docker"`, so every client and every measurement of CPU and GPU use is taken on the machine
# that runs the servers, not across the network.
#
# The same notebooks also run without Chameleon: `target="docker"` on any machine with Docker
# and an NVIDIA GPU (`./lab jupyter` starts the same Jupyter server there), and
# `target="local"` (the default) runs everything as plain processes on this machine's CPU.
# The `local` target is what CI uses to check the lab.

# %% tags=["parameters"]
target = None  # local | docker | chameleon; None: $SERVELAB_TARGET (docker in the node's Jupyter) or local
preset = "quick"  # quick (minutes, CI) | full (the lab's real sizes)

# %%
from servelab.lab import params
from servelab.lab import step00_introduction as step

P = params.resolve(target, preset)
P

# %% [markdown]
# ## The steps
# Every step of the lab, from its registry (`servelab/core/lab_steps.py`): where it runs, when in the
# lease, what it is about. A lease must hold the *core*; the steps *if there is time* start and stop
# their own engines on the node, so they come before 08 gives the node back. The headless run
# (`./lab run`) runs them in that order too, 08 last, so that 08's summary lists everything the run
# measured.

# %%
step.lab_steps()

# %% [markdown]
# ## The machine these notebooks run on
# Every number in this lab depends on the hardware. Each measurement is stored with these facts.

# %%
step.machine_facts()

# %% [markdown]
# ## What each lesson needs, and what to expect where
# Each row: a lesson, what it needs (some need a GPU, one needs two), what to expect on the GPU
# node, and what a CPU-only run (`target="local"`) does with it. What *this* run shows is never
# written in advance: every experiment notebook prints it from its own measurements, in a cell
# that calls `common.what_this_run_shows`.
#
# **Expected on the GPU node** is the original lab's recorded runs on its two-P100 node
# ([serve-system-chi](https://github.com/teaching-on-testbeds/serve-system-chi)), and Triton's
# documentation for how batches form; each figure and where it comes from is in
# docs/decisions/2026-11-24-gpu-expectations.md. The later notebooks quote them where they matter,
# under the same label.

# %%
step.lessons()

# %% [markdown]
# ## The model files
# The lab serves a MobileNetV2 with 11 outputs, as PyTorch weights and as an ONNX export.
# (Without internet access the lab builds a deterministic stand-in; latency depends on the
# architecture, not on the weights.)

# %%
step.check_artifacts()
