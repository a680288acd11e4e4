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
# how perf_analyzer settles each measurement: see "How perf_analyzer measures" under "Load" below
window_requests = None  # requests per measurement window (None: preset)
settle = None  # "fixed" (one window per level) or "stable" (None: preset)
max_trials = None  # windows tried before giving up on "stable" (None: preset)
stability_pct = None  # how closely (percent) windows must agree for "stable" (None: preset)
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
# ## The model: `initialize` and `execute` of `model.py`
# `initialize` runs once per instance and picks the device from the instance's kind; `execute`
# gets a list of requests and returns one response per request, in order. (The whole file, with
# its helpers, is in the appendix at the end.)

# %%
common.show_code("models_staging/food_classifier/1/model.py", "TritonPythonModel.initialize",
                 "TritonPythonModel.execute")

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
#
# **How perf_analyzer measures** (the parameters `window_requests`, `settle`, `max_trials` and
# `stability_pct`). Each level starts with a short warm-up at the same load, not recorded. Then
# perf_analyzer counts `window_requests` requests per measurement window. With `settle="stable"` it
# measures window after window, up to `max_trials`, until three in a row agree within
# `stability_pct` percent; a level whose windows never agree still gets a row, labelled
# "(unsettled)" in the table. With `settle="fixed"` it measures one window per level, with no
# stability search. Each command is printed before it runs. The spread of a level's last three
# windows is kept with it: a verdict whose gap is inside that spread reads "too noisy to call".

# %% [markdown]
# **Predict.** At concurrency 1, 8 and 16, which of queue time and compute time will grow,
# and roughly by how much?
#
# **On the GPU node, now look at nvtop** in your SSH session while the next cell runs: how busy is
# GPU 0 while requests wait in the queue?

# %%
sweep = triton_steps.concurrency_sweep(triton, "food_classifier", P, step="python_concurrency")
sweep

# %%
triton_steps.plot_breakdown(sweep, title="Python backend: where the time goes")

# %% [markdown]
# The statistics after the sweep, taken the same way. Every client sent one image per request and
# the model has no dynamic batching yet: which batch sizes do you expect in `batch_stats`?

# %%
stats_after = triton_steps.stats_json(triton, "food_classifier")
triton_steps.stats_change(stats_before, stats_after)

# %% [markdown]
# **Reading it.** Did compute time per request stay about the same from level to level while the
# queue time changed? One instance handles one request at a time: does queue time come near
# *(concurrency − 1) × compute time*, what that would give? What this run shows:

# %%
common.what_this_run_shows(step, "Triton Python backend")

# %% [markdown]
# **Expected on the GPU node** (the original lab's P100 run,
# [snippets/triton.md](https://github.com/teaching-on-testbeds/serve-system-chi/blob/main/snippets/triton.md);
# figures in docs/decisions/2026-11-24-gpu-expectations.md): compute infer stays near 19 ms at
# concurrency 1, 8 and 16 while the queue grows to 132 ms at 8 and 283 ms at 16; throughput stays
# at 52 infer/s, and nvtop shows the GPU mostly idle: the delay is queuing, not a lack of compute.

# %%
common.reference("triton", triton_steps.TRITON_COLUMNS, rules=step, effects=["Triton Python backend"],
                 step="python_concurrency")

# %% [markdown]
# ## Client-side batching
# One client sends `client_batch` images in each request. Real users send one image at a time, so
# this shows what a batch costs the server, not a way to serve them.
#
# **Predict.** One client now sends 16 images per request. Will images per second go up a lot,
# a little, or not at all — on this machine, and on a GPU?

# %%
batched = step.client_batch(triton, "food_classifier", P)
batched

# %% [markdown]
# What this run shows:

# %%
common.what_this_run_shows(step, "Client batch")

# %% [markdown]
# **Expected on the GPU node** (the original lab's P100 run,
# [snippets/triton.md](https://github.com/teaching-on-testbeds/serve-system-chi/blob/main/snippets/triton.md);
# figures in docs/decisions/2026-11-24-gpu-expectations.md): a batch of 16 costs little more than
# one image: one client, 52 images/s sending single images and 657 images/s sending batches of 16.

# %%
common.reference("triton", triton_steps.TRITON_COLUMNS, rules=step, effects=["Client batch"],
                 step="python_client_batch")

# %% [markdown]
# ## The web app through Triton
# GourmetGram switches to Triton (`food_classifier`) by configuration alone.

# %%
flask = gourmetgram.flask_up(stack, "triton")
gourmetgram.flask_uploads(flask, P, step="triton_python")

# %%
triton_steps.triton_down(stack)

# %% [markdown]
# **Try:** set `concurrency_levels = [1, 2, 4, 8]` in the parameters cell and run the notebook
# again. At each level, does the queue time follow *(concurrency − 1) × compute time*?

# %% [markdown]
# ## Questions
# 1. At concurrency 16, how much of a request's latency was queue and how much compute? Was the
#    machine (CPU, or GPU on the node) busy all that time?
# 2. `execute` receives a list of requests. What would change if Triton handed it several at once?
# 3. What did a batch of 16 images do to images per second on this machine, and what does that say
#    about what a batch costs here, next to the P100's figures above?

# %% [markdown]
# ## Appendix: the whole `model.py`
# With the helpers `initialize` and `execute` call: `_classify` (the forward pass and softmax),
# `_response`, and how the stub finds the lab's code.

# %%
triton_steps.show_model_code("food_classifier")
