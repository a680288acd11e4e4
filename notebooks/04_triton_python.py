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
# # 4. Triton Inference Server with the Python backend
#
# Triton serves models from a **model repository**: one folder per model holding a
# `config.pbtxt` and numbered version folders. Our first model, `food_classifier`, uses the
# *Python backend*: `1/model.py` is a class whose `initialize` loads the network onto the
# device its instance was given, and whose `execute` receives a *list* of requests, runs them
# as one batch and returns one response per request.
#
# The config names the backend, the largest batch (16), the input (the image file as a
# string), the outputs (label, probability) and the **instance group**: how many copies of
# the model run, and where.

# %% tags=["parameters"]
target = None  # local | docker; None: $SERVELAB_TARGET (docker in the node's Jupyter, see 02) or local
preset = "quick"
concurrency_levels = None  # None: [1, 8, 16]
client_batch = None  # None: 16
window_requests = None  # requests per perf_analyzer window (None: preset)
settle = None  # "fixed" (one window per level) or "stable" (None: preset)
max_trials = None
stability_pct = None
flask_requests = None

# %%
from servelab.lab import common, gourmetgram, params, triton_steps
from servelab.lab import step04_triton_python as step

P = params.resolve(target, preset, concurrency_levels=concurrency_levels, client_batch=client_batch,
                   window_requests=window_requests, settle=settle,
                   max_trials=max_trials, stability_pct=stability_pct,
                   flask_requests=flask_requests)
P

# %% [markdown]
# ## The model repository entry, as committed
# Every field of the staged `config.pbtxt` is explained in its comments. Read it before the
# server loads it.

# %%
triton_steps.show_staged_config("food_classifier")

# %% [markdown]
# ## The model: `model.py`, whole
# `initialize` runs once per instance and picks the device from the instance's kind; `execute`
# gets a list of requests and returns one response per request, in order.

# %%
triton_steps.show_model_code("food_classifier")

# %% [markdown]
# ## Start Triton and deploy the model
# Deploying copies the staged model folder into the live repository (the lab's
# `cp -r models_staging/food_classifier models/`). On a CPU target the GPU instance group
# becomes a CPU one, and the deploy prints each adaptation. The server's start command is
# printed too (`tritonserver …` on `local`, `docker compose … up` on the GPU node).

# %%
stack = common.open_stack(P)
triton = triton_steps.triton_up(stack, ["food_classifier"])
triton_steps.model_table(triton)

# %% [markdown]
# The config as the server now reads it (the deploy's adapted copy):

# %%
triton_steps.show_config(triton, "food_classifier")

# %% [markdown]
# ## One request
# A sample photo, base64-encoded, through Triton's client library. This is how GourmetGram calls
# this model (its `TritonBackend`): one `INPUT_IMAGE` string in, `FOOD_LABEL` and `PROBABILITY` out.

# %%
common.show_code("flask_app/backends.py", "TritonBackend._infer")

# %%
triton_steps.triton_try(triton, "food_classifier")

# %% [markdown]
# ## The server's statistics
# Triton counts, per model, every inference, every execution (forward pass) and the time each
# stage took. The counts are cumulative since the model loaded; read them before and after a
# run and take the difference, as the lab does around every perf_analyzer run.

# %%
stats_before = triton_steps.stats_json(triton, "food_classifier")

# %% [markdown]
# ## Load: one client, then 8 and 16
# `perf_analyzer` keeps `concurrency` requests in flight and measures latency and throughput.
# Triton also reports where each request's time went on the server: waiting in the **queue**,
# or **compute** (input, inference, output). CPU (and GPU) utilisation is sampled meanwhile.

# %% [markdown]
# **Predict.** At concurrency 1, 8 and 16, which of queue time and compute time will grow,
# and roughly by how much?

# %%
sweep = triton_steps.concurrency_sweep(triton, "food_classifier", P, step="python_concurrency")
sweep

# %%
triton_steps.plot_breakdown(sweep, title="Python backend: where the time goes")

# %% [markdown]
# The statistics after the sweep: every request of every level, in executions of one image each
# (no dynamic batching yet: `batch_stats` has only batch size 1).

# %%
stats_after = triton_steps.stats_json(triton, "food_classifier")
triton_steps.stats_change(stats_before, stats_after)

# %% [markdown]
# **Reading it.** Compute time per request stays about the same at every concurrency, but
# queue time grows to roughly *(concurrency − 1) × compute time*: the server handles one
# request at a time and the rest wait. On the GPU node the GPU is mostly idle meanwhile — the
# delay is queuing, not a lack of compute. What this run shows:

# %%
common.what_this_run_shows(step, "Triton Python backend")

# %% [markdown]
# ## Client-side batching
# One client sends 16 images in each request. On a GPU a batch of 16 costs little more than one
# image, so throughput (images/s) jumps. Real users, though, send one image at a time.
#
# **Predict.** One client now sends 16 images per request. Will images per second go up a lot,
# a little, or not at all — on this machine, and on a GPU?

# %%
batched = step.client_batch(triton, "food_classifier", P)
batched

# %% [markdown]
# **On CPU** a batch costs about its size times one image, so client batching barely raises
# throughput here; on the GPU node, expect it to. This run:

# %%
common.what_this_run_shows(step, "Client batch")

# %% [markdown]
# ## The web app through Triton
# GourmetGram switches to Triton (`food_classifier`) by configuration alone.

# %%
flask = gourmetgram.flask_up(stack, "triton")
gourmetgram.flask_uploads(flask, P, step="triton_python")

# %%
triton_steps.triton_down(stack)

# %% [markdown]
# ## Questions
# 1. At concurrency 16, how much of a request's latency was queue and how much compute? Was the
#    machine (CPU, or GPU on the node) busy all that time?
# 2. `execute` receives a list of requests. What would change if Triton handed it several at once?
# 3. Why does a client batch help on a GPU but hardly on this CPU?
