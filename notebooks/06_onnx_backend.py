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
# # 6. An optimised backend: ONNX Runtime
#
# The Python backend runs our own Python code for every batch. Triton also has backends that
# run a model file directly, with no Python in the loop. `food_classifier_onnx` is just a
# `config.pbtxt` and `1/model.onnx`: backend `onnxruntime`, input a preprocessed FP32 tensor
# [3, 224, 224], output the 11 logits. The client now preprocesses and applies softmax itself.
#
# **On the `local` target** this Triton build has no ONNX Runtime backend. The deploy step
# serves the same `model.onnx` under the same name and inputs through a small generated
# Python-backend model that calls onnxruntime — close, but not the real backend: the Python
# overhead per batch is still there.

# %% tags=["parameters"]
target = None  # local | docker; None: $SERVELAB_TARGET (docker in the node's Jupyter, see 02) or local
preset = "quick"
onnx_concurrency_levels = None  # None: [1, 8, 16]
onnx_instances = None  # None: 2 (on each of GPUs 0 and 1 on the node)
# perf_analyzer's settling, explained in 04 ("How perf_analyzer measures"):
window_requests = None  # requests per measurement window (None: preset)
settle = None  # "fixed" (one window per level) or "stable" (None: preset)
max_trials = None  # windows tried before giving up on "stable" (None: preset)
stability_pct = None  # how closely (percent) windows must agree for "stable" (None: preset)
flask_requests = None

# %%
from servelab.lab import common, gourmetgram, params, triton_steps
from servelab.lab import step06_onnx_backend as step

P = params.resolve(target, preset, onnx_concurrency_levels=onnx_concurrency_levels,
                   onnx_instances=onnx_instances, window_requests=window_requests, settle=settle,
                   max_trials=max_trials,
                   stability_pct=stability_pct, flask_requests=flask_requests)
P

# %% [markdown]
# ## The ONNX model's config, as committed
# No `model.py` this time: the backend is `onnxruntime` and the model file is `1/model.onnx`.
# The input is no longer an image file but the preprocessed tensor.

# %%
triton_steps.show_staged_config("food_classifier_onnx")

# %%
stack = common.open_stack(P)
triton = triton_steps.triton_up(stack, ["food_classifier", "food_classifier_onnx"])
triton_steps.model_table(triton)

# %% [markdown]
# ## The client now preprocesses
# The server only runs the network, so the client decodes, resizes, crops and normalises the
# photo and sends a float32 tensor [1, 3, 224, 224] (3 × 224 × 224 × 4 bytes = 588 KiB; a sample
# photo's JPEG is about 30 KB), then turns the 11 logits it gets back into a label with softmax.
# GourmetGram's ONNX client, and the shared preprocessing it calls (the same as the Python
# backend's and FastAPI's):

# %%
common.show_code("flask_app/backends.py", "TritonOnnxBackend._infer")
common.show_code("servelab/core/preprocess.py", "preprocess")

# %%
triton_steps.triton_try(triton, "food_classifier_onnx")

# %% [markdown]
# **Predict.** The ONNX model runs in ONNX Runtime instead of Python + PyTorch. At the same
# concurrency, how will its compute time and its queue compare with the Python backend's?
#
# ## One instance at concurrency 1, 8 and 16
# Concurrency 1 is one request alone (its latency is the service time); then 8 and 16 clients.
# Each level is measured as in 04: a warm-up, then windows of `window_requests` requests.

# %%
onnx_one = triton_steps.concurrency_sweep(triton, "food_classifier_onnx", P, step="onnx_backend",
                                   levels=P.onnx_concurrency_levels)
onnx_one

# %% [markdown]
# ## Python backend vs ONNX backend at the same load
# The Python backend's sweep, at the same concurrency levels, measured the same way:

# %%
python_one = triton_steps.concurrency_sweep(triton, "food_classifier", P, step="python_vs_onnx",
                                     levels=P.onnx_concurrency_levels)
python_one

# %% [markdown]
# Both backends side by side, one line per concurrency level, so each comparison holds the load fixed:

# %%
step.plot_backends(python_one, onnx_one)

# %% [markdown]
# **What to look for.** At the same concurrency, how do the two backends' compute times compare,
# and their queues? If one request takes less compute, what should happen to the time the others
# wait behind it? What this run shows:

# %%
common.what_this_run_shows(step, "inference time")

# %% [markdown]
# **Expected on the GPU node** (the original lab's P100 run,
# [snippets/triton.md](https://github.com/teaching-on-testbeds/serve-system-chi/blob/main/snippets/triton.md);
# figures in docs/decisions/2026-11-24-gpu-expectations.md): one ONNX instance at concurrency 1
# computes a request in 4.6 ms (the Python backend: 18.6 ms) and serves 138 infer/s (52), with the
# GPU busier in nvtop.

# %%
common.reference("triton", triton_steps.TRITON_COLUMNS, rules=step, effects=["inference time"],
                 step=["python_vs_onnx", "onnx_backend"])

# %% [markdown]
# ## Two instances on each of GPUs 0 and 1
# The original lab's change to `instance_group`: `count: 2`, `gpus: [0, 1]` on the two-GPU node.
# On a host with one GPU the same step is two instances on GPU 0; on a CPU, two instances sharing
# the cores. `scaled` holds this host's values; as in 05, the edit is a call with the config's
# fields, and the sweep that follows measures what is live.
#
# **Predict.** Will two instances serve more than one here? On the GPU node?

# %%
scaled = step.scaled_step(stack, P)
scaled

# %%
count = scaled["count"]  # 2 unless onnx_instances is set in the parameters cell: change me
triton_steps.set_instances(triton, "food_classifier_onnx", count=count, kind=scaled["kind"],
                           gpus=scaled["gpus"])

# %% [markdown]
# **On the GPU node, now look at nvtop** while the next cell runs: how busy are both GPUs now?

# %%
onnx_two = step.sweep_live(triton, "food_classifier_onnx", P, step="onnx_scaling",
                           levels=P.onnx_concurrency_levels)
onnx_two

# %% [markdown]
# One instance against two, compared at each concurrency level (bars side by side, one line each):

# %%
triton_steps.plot_breakdown(common.concat(onnx_one, onnx_two), title="ONNX backend: 1 vs 2 instances")

# %% [markdown]
# **Reading it.** Did the second instance change throughput at each concurrency here? Is any
# queue time left at concurrency 16, and what does that say about arrivals against the instances'
# service rate? What this run shows:

# %%
common.what_this_run_shows(step, "two instances")

# %% [markdown]
# **Expected on the GPU node** (the original lab's P100 run,
# [snippets/triton.md](https://github.com/teaching-on-testbeds/serve-system-chi/blob/main/snippets/triton.md);
# figures in docs/decisions/2026-11-24-gpu-expectations.md): with `count: 2, gpus: [0, 1]` both
# GPUs are fully used; 1182 infer/s at concurrency 8 and 1257 at 16, where 6.8 ms of queue
# remains: requests arrive faster than the instances serve them.

# %%
common.reference("triton", triton_steps.TRITON_COLUMNS, rules=step, effects=["two instances"],
                 step="onnx_scaling")

# %% [markdown]
# ## The web app on the ONNX model
# This version of GourmetGram preprocesses the photo itself, sends the tensor to
# `food_classifier_onnx` and applies softmax to the logits it gets back.

# %%
flask = gourmetgram.flask_up(stack, "triton_onnx")
gourmetgram.flask_uploads(flask, P, step="triton_onnx")

# %%
triton_steps.triton_down(stack)

# %% [markdown]
# **Try:** set `onnx_concurrency_levels = [1, 4, 8, 16, 32]` in the parameters cell and run the
# notebook again. At which concurrency does queue time appear with one instance, and with two?

# %% [markdown]
# ## Questions
# 1. How did the ONNX backend's compute time compare with the Python backend's, and what did that
#    do to the queue at concurrency 16?
# 2. The ONNX model takes a preprocessed tensor: where does the preprocessing happen now, and what
#    does that cost the client?
# 3. Did two instances help on this machine? What would you expect on the two-GPU node?
