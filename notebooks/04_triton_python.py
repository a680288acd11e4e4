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
client_batch = None  # None: 16
# how perf_analyzer settles each measurement: see "How perf_analyzer measures" under "Load" below
window_requests = None  # requests per measurement window (None: preset)
settle = None  # "fixed" (one window per level) or "stable" (None: preset)
max_trials = None  # windows tried before giving up on "stable" (None: preset)
stability_pct = None  # how closely (percent) windows must agree for "stable" (None: preset)
flask_requests = None

# %%
from servelab.lab import common, exercise, gourmetgram, params, triton_edits, triton_steps
from servelab.lab import step04_triton_python as step

P = params.resolve(target, preset, client_batch=client_batch,
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
# **Predict.** From one client to the highest concurrency of your sweep, will the compute time per
# request stay flat (the highest level's less than twice the first's)? At the highest concurrency, will
# a request wait longer in the queue than it computes? Set `guess` to "yes" or "no" for each in the
# next cell and run it: the lab records your guesses, and a cell after the measurement sets each beside
# what this run measured.

# %% tags=["prediction"]
guess_flat, guess_queue = None, None  # "yes" or "no" each
### BEGIN SOLUTION
guess_flat, guess_queue = "yes", "yes"
### END SOLUTION
exercise.predict(step, "compute time stays flat", guess_flat)
exercise.predict(step, "queue time exceeds compute time", guess_queue)

# %% [markdown]
# ## Your perf_analyzer command
# You write the sweep. The command below names the model (`-m`), the server (`-u`), the requests'
# input (`--input-data`), the windows as the lab counts them (`--measurement-mode count_windows` and
# the preset's sizes; `--stability-percentage 1000` accepts windows at any spread, because perf_analyzer
# stops a range at its first level that does not settle, and the lab weighs the windows' spread as
# noise instead), `-v` (every window printed: the lab reads their spread) and `-f sweep.csv`, the
# table perf_analyzer writes. What it lacks is the load: add
# `--concurrency-range START:END:STEP` for one client, about 8 and about 16 (perf_analyzer steps from
# START to END by STEP). The command runs exactly as written, in the run's `perf/` folder, and its
# table lands in the run's data beside the lab's own measurements. First where the server and the
# input data are:

# %%
url, inputs = triton_edits.perf_url(triton, "food_classifier")

# %% [markdown]
# **On the GPU node, now look at nvtop** in your SSH session while the next cell runs: how busy is
# GPU 0 while requests wait in the queue?

# %%
command = f"""perf_analyzer -m food_classifier -u {url} --input-data {inputs} -b 1
    ### BEGIN SOLUTION
    --concurrency-range 1:15:7
    ### END SOLUTION
    --measurement-mode count_windows --measurement-request-count {P.window_requests}
    --stability-percentage 1000 --max-trials {P.max_trials} -v -f sweep.csv"""
sweep = triton_edits.perf_analyzer(triton, command, step="python_concurrency")
sweep

# %%
triton_edits.check_levels(sweep, step, "concurrency", 3,
                          "add --concurrency-range START:END:STEP to the command above (e.g. 1:15:7) and "
                          "run it again")

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

# %%
exercise.compare(step, "compute time stays flat")
exercise.compare(step, "queue time exceeds compute time")

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
# **Predict.** One client now sends 16 images per request: on this machine, will it send at least
# 1.5 times the images per second it sent as single images? (And on a GPU?)

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "no"
### END SOLUTION
exercise.predict(step, "Client batch 16 raises throughput", guess)

# %%
batched = step.client_batch(triton, "food_classifier", P)
batched

# %% [markdown]
# What this run shows:

# %%
common.what_this_run_shows(step, "Client batch")

# %%
exercise.compare(step, "Client batch 16 raises throughput")

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
# **Try:** change your command's range to `--concurrency-range 1:8:1` and run the notebook again. At
# each level, does the queue time follow *(concurrency − 1) × compute time*?

# %% [markdown]
# ## Questions
# 1. At concurrency 16, how much of a request's latency was queue and how much compute? Was the
#    machine (CPU, or GPU on the node) busy all that time?
# 2. `execute` receives a list of requests. What would change if Triton handed it several at once?
# 3. What did a batch of 16 images do to images per second on this machine, and what does that say
#    about what a batch costs here, next to the P100's figures above?

# %% [markdown] tags=["answer"]
# **Your answer to 1.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
top = sweep.iloc[-1]
exercise.model_answer(1, f"at concurrency {top['concurrency']:.0f} a request waited {top['queue_ms']:.1f} ms "
                         f"in the queue and computed for {top['compute_infer_ms']:.1f} ms, of a p50 latency "
                         f"of "
                         f"{top['p50_ms']:.1f} ms; the machine's CPU was {top['cpu_util_pct']:.0f} % busy "
                         "meanwhile: one instance computes one request at a time, so the others queue while "
                         "cores may sit idle.")

# %% [markdown] tags=["answer"]
# **Your answer to 2.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
stats = triton_steps.stats_change(stats_before, stats_after, say=False)
exercise.model_answer(2, f"the server ran {int(stats['executions'].sum())} executions of batch sizes "
                         f"{', '.join(str(int(s)) for s in stats['batch_size'])} in the sweep: without "
                         "dynamic batching Triton hands execute one request at a time. Handed several, "
                         "execute would stack them into one forward pass (model.py already loops over the "
                         "list), so one pass serves several requests and the queue shrinks where a batch "
                         "costs little more than one image.")

# %% [markdown] tags=["answer"]
# **Your answer to 3.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
single, many = sweep["throughput"].iloc[0], batched["throughput"].iloc[-1]
exercise.model_answer(3, f"{step.read_client_batch(common.concat(sweep, batched))}: "
                         + ("a batch cost about as much as its images one by one here, so images per second "
                            "hardly moved" if many < 1.5 * single else "a batch cost less than its images "
                            "one by one here")
                         + "; on the P100 one client sent 52 images/s as single images and 657 as batches "
                         "of 16 (docs/decisions/2026-11-24-gpu-expectations.md): there a batch costs little "
                         "more than one image.")

# %% [markdown]
# ## Appendix: the whole `model.py`
# With the helpers `initialize` and `execute` call: `_classify` (the forward pass and softmax),
# `_response`, and how the stub finds the lab's code.

# %%
triton_steps.show_model_code("food_classifier")
