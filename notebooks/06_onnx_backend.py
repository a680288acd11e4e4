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
onnx_instances = None  # None: 2 (over GPUs 0 and 1)
window_requests = None  # requests per perf_analyzer window (None: preset)
settle = None  # "fixed" (one window per level) or "stable" (None: preset)
max_trials = None
stability_pct = None
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
# photo and sends a float32 tensor [1, 3, 224, 224] (3 × 224 × 224 × 4 bytes = 588 KiB, more
# than a photo's JPEG), then turns the 11 logits it gets back into a label with softmax.
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
# Warm-up first, then a fixed number of requests per window, for stable numbers.

# %%
onnx_one = triton_steps.concurrency_sweep(triton, "food_classifier_onnx", P, step="onnx_backend",
                                   levels=P.onnx_concurrency_levels)
onnx_one

# %% [markdown]
# ## Python backend vs ONNX backend at the same load

# %%
python_one = triton_steps.concurrency_sweep(triton, "food_classifier", P, step="python_vs_onnx",
                                     levels=P.onnx_concurrency_levels)
step.plot_backends(python_one, onnx_one)

# %% [markdown]
# **What to look for.** The ONNX model's inference time should be much lower than the Python
# backend's at the same concurrency, so the queue drains faster; on the GPU node utilisation rises
# too. This run:

# %%
common.what_this_run_shows(step, "inference time")

# %% [markdown]
# ## Two instances (over GPUs 0 and 1)
# **Predict.** Will two instances serve more than one here? On the GPU node?

# %%
onnx_two = step.scale_and_sweep(triton, "food_classifier_onnx", P.onnx_instances, P, step="onnx_scaling",
                                  levels=P.onnx_concurrency_levels)
onnx_two

# %%
triton_steps.plot_breakdown(common.concat(onnx_one, onnx_two), title="ONNX backend: 1 vs 2 instances")

# %% [markdown]
# **Reading it.** On the GPU node both GPUs are now busy; at concurrency 16 some queuing stays
# because requests still arrive faster than two instances serve them. On this CPU two instances
# share the same cores, so expect little gain. This run:

# %%
common.what_this_run_shows(step, "two instances")

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
# ## Questions
# 1. How much lower was the ONNX backend's compute time than the Python backend's, and what did
#    that do to the queue at concurrency 16?
# 2. The ONNX model takes a preprocessed tensor: where does the preprocessing happen now, and what
#    does that cost the client?
# 3. Did two instances help on this machine? What would you expect on the two-GPU node?
