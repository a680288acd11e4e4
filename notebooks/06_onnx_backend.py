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
# `config.pbtxt` and `1/model.onnx`: the lab's model build exported the same MobileNetV2 to
# `model.onnx`, and you write the `config.pbtxt` that makes Triton serve it with its ONNX Runtime
# backend. Its input is a preprocessed FP32 tensor [3, 224, 224] and its output the 11 logits, so
# the client now preprocesses and applies softmax itself.
#
# **On the `local` target** this Triton build has no ONNX Runtime backend. The deploy step
# serves the same `model.onnx` under the same name and inputs through a small generated
# Python-backend model that calls onnxruntime — close, but not the real backend: the Python
# overhead per batch is still there. The cell that loads your config says so when it happens.

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
from servelab.lab import common, exercise, gourmetgram, params, triton_edits, triton_steps
from servelab.lab import step06_onnx_backend as step

P = params.resolve(target, preset, onnx_concurrency_levels=onnx_concurrency_levels,
                   onnx_instances=onnx_instances, window_requests=window_requests, settle=settle,
                   max_trials=max_trials,
                   stability_pct=stability_pct, flask_requests=flask_requests)
P

# %% [markdown]
# ## The ONNX model's folder, with `model.onnx` in place
# Triton starts with the Python backend's `food_classifier` from 04 and 05. Then `model.onnx` goes
# into Triton's model repository, in the folder layout Triton reads:
#
# ```
# models/food_classifier_onnx/
# ├── 1
# │   └── model.onnx
# └── config.pbtxt      ← you write this one
# ```
#
# No `model.py` this time. The next cell lists what your config must match: the names, element
# types and shapes of `model.onnx`'s input and output, as ONNX Runtime reads them from the file.

# %%
stack = common.open_stack(P)
triton = triton_steps.triton_up(stack, ["food_classifier"], later=["food_classifier_onnx"])
triton_edits.onnx_in_place(triton, "food_classifier_onnx")

# %% [markdown]
# ## You write the ONNX model's `config.pbtxt`
# Write the whole `config.pbtxt` of `food_classifier_onnx` as text in the cell below, in the format of
# the Python model's config from 04 (`models_staging/food_classifier/config.pbtxt`; every field is
# described in [Triton's model configuration guide](https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md)):
# - `backend`: the one that runs a `model.onnx` file, ONNX Runtime's, `"onnxruntime"`;
# - `max_batch_size`: the most images one batch holds (16, as in the Python model). The first
#   dimension of `model.onnx`'s tensors, `batch`, is then Triton's, so `dims` leave it out;
# - one `input` and one `output`, each with its `name`, `data_type` (Triton's spelling, shown
#   above) and `dims`, exactly as `model.onnx` has them;
# - an `instance_group` with one instance on GPU 0 (`KIND_GPU`; on a machine without a GPU it
#   becomes `KIND_CPU`, and the cell says so).
#
# The lab reads your text as Triton does and refuses one that `model.onnx` cannot serve by (a typo, an
# unknown backend, a name, shape or data type that `model.onnx` does not have) with its line and what
# to change; the model then stays as it was. A config it takes is deployed as this target serves an
# ONNX model, loaded, and shown against the config the lab's developers staged.

# %%
triton_edits.write_model_config(triton, "food_classifier_onnx", """
### BEGIN SOLUTION
name: "food_classifier_onnx"
backend: "onnxruntime"
max_batch_size: 16
input [
  {
    name: "input"
    data_type: TYPE_FP32
    dims: [ 3, 224, 224 ]
  }
]
output [
  {
    name: "output"
    data_type: TYPE_FP32
    dims: [ 11 ]
  }
]
instance_group [
  {
    count: 1
    kind: KIND_GPU
    gpus: [ 0 ]
  }
]
# the staged config's GPU setting (its comments say why; a CPU ignores it)
parameters {
  key: "cudnn_conv_algo_search"
  value: { string_value: "1" }
}
### END SOLUTION
""")

# %%
triton_edits.check_model(triton, "food_classifier_onnx", step, "onnxruntime")
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
# concurrency, will its compute time per request be lower than the Python backend's? Set your guess to
# "yes" or "no". (And its queue: what would follow?)

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step, "The ONNX backend's inference time is lower", guess)

# %% [markdown]
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

# %%
exercise.compare(step, "The ONNX backend's inference time is lower")

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
# the cores. `scaled` holds this host's values; as in 05 you write the `instance_group` of
# `food_classifier_onnx`'s `config.pbtxt` as text (the node's values below; `KIND_GPU` on a machine
# without a GPU becomes `KIND_CPU`), and the sweep that follows measures what is live.
#
# **Predict.** Will two instances serve more inferences per second than one here, at the highest
# concurrency (more than 1.1 times)? On the GPU node? Set your guess for this machine to "yes" or "no".

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "no"
### END SOLUTION
exercise.predict(step, "ONNX backend: two instances serve more than one", guess)

# %%
scaled = step.scaled_step(stack, P)
scaled

# %%
triton_edits.edit_config(triton, "food_classifier_onnx", """
instance_group [
  {
    ### BEGIN SOLUTION
    count: 2
    gpus: [ 0, 1 ]
    ### END SOLUTION
    kind: KIND_GPU
  }
]
""")

# %%
triton_edits.check_instances(triton, "food_classifier_onnx", step, 2,
                             "write count: 2 in the instance_group above and run it again")

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

# %%
exercise.compare(step, "ONNX backend: two instances serve more than one")

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
triton_steps.require_loaded(triton, "food_classifier_onnx")
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

# %% [markdown] tags=["answer"]
# **Your answer to 1.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
py16, ox16 = python_one.iloc[-1], onnx_one.iloc[-1]
exercise.model_answer(1, f"at concurrency {ox16['concurrency']:.0f} a request computed for "
                         f"{ox16['compute_infer_ms']:.1f} ms on the ONNX backend and "
                         f"{py16['compute_infer_ms']:.1f} ms on the Python backend, and queued "
                         f"{ox16['queue_ms']:.1f} ms against {py16['queue_ms']:.1f} ms: every request waits "
                         "behind the ones before it, so the queue follows the compute time per request.")

# %% [markdown] tags=["answer"]
# **Your answer to 2.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
ox1 = onnx_one.iloc[0]
exercise.model_answer(2, "on the client: GourmetGram's TritonOnnxBackend decodes, resizes, crops and "
                         "normalises the photo and sends a float32 tensor of 3 × 224 × 224 × 4 bytes "
                         f"(588 KiB against a JPEG of tens of KB); one request took {ox1['p50_ms']:.1f} ms "
                         f"at p50 of which the server computed {ox1['compute_infer_ms']:.1f} ms: the rest is "
                         "the request's transfer and the client's work, which the client now pays for.")

# %% [markdown] tags=["answer"]
# **Your answer to 3.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
one_top, two_top = onnx_one.iloc[-1], onnx_two.iloc[-1]
exercise.model_answer(3, f"at concurrency {one_top['concurrency']:.0f} one instance served "
                         f"{one_top['throughput']:.1f} infer/s and two served {two_top['throughput']:.1f} "
                         f"(CPU {one_top['cpu_util_pct']:.0f} % and {two_top['cpu_util_pct']:.0f} % busy): "
                         + ("two helped here" if two_top["throughput"] > 1.1 * one_top["throughput"] else
                            "two did not help here: one instance already kept the cores busy")
                         + ". On the node each instance has a GPU of its own, so two should serve more "
                           "until arrivals no longer outrun them "
                           "(docs/decisions/2026-11-24-gpu-expectations.md: "
                           "the P100 run's two instances on each GPU served 1182 infer/s at concurrency 8).")
