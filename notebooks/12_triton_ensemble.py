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
# # 12. Preprocessing in the server: a Triton ensemble
#
# Since 06, every client of the ONNX model preprocesses the photo itself: it decodes the JPEG,
# resizes, crops and normalises it, and sends a float32 tensor of 3 × 224 × 224 values, about
# twenty times the bytes of the JPEG; it then applies softmax to the 11 logits it gets back.
# GourmetGram does that work too. The Python backend of 04 took the JPEG, but ran all of it, the
# network included, in Python.
#
# Triton closes that gap with an **ensemble**: a model with no code and no file of its own whose
# config chains other models, so one request goes in and one answer comes out, and each step
# runs on its own backend and device. Here: `food_preprocess` (decode and normalise, Python
# backend, on the CPU) → `food_classifier_onnx` (06's model, on its ONNX Runtime backend and its GPU) →
# `food_postprocess` (softmax and the label). You write the ensemble's `config.pbtxt`, check that
# it answers as the Python backend does, and measure it against the Python backend and against a
# client that preprocesses for the ONNX model: throughput and latency, the bytes a request carries,
# the client's CPU, and where Triton spends each request's time.
#
# This notebook needs only what 04 and 06 taught; in a lease it comes after the core, if there is
# time (00's table).

# %% tags=["parameters"]
target = None  # local | docker; None: $SERVELAB_TARGET (docker in the node's Jupyter, see 02) or local
preset = "quick"
ensemble_concurrency_levels = None  # clients sending back to back (None: preset)
ensemble_requests = None  # requests per pipeline and level, over the sample photos (None: preset)
flask_requests = None  # uploads through GourmetGram (None: preset)
# perf_analyzer's settling, explained in 04 ("How perf_analyzer measures"):
window_requests = None  # requests per measurement window (None: preset)
settle = None  # "fixed" (one window per level) or "stable" (None: preset)
max_trials = None  # windows tried before giving up on "stable" (None: preset)
stability_pct = None  # how closely (percent) windows must agree for "stable" (None: preset)

# %%
from servelab.lab import common, exercise, gourmetgram, params, triton_steps
from servelab.lab import step12_triton_ensemble as step

P = params.resolve(target, preset, ensemble_concurrency_levels=ensemble_concurrency_levels,
                   ensemble_requests=ensemble_requests, flask_requests=flask_requests,
                   window_requests=window_requests, settle=settle, max_trials=max_trials,
                   stability_pct=stability_pct)
P

# %% [markdown]
# ## The two new models
# `food_preprocess` takes the image file's bytes as they are (`TYPE_UINT8`, any length: `dims: [ -1 ]`)
# and returns the tensor `food_classifier_onnx` takes, by the same preprocessing every other path of
# the lab runs. `food_postprocess` takes the 11 logits and returns what `food_classifier` returns.

# %%
triton_steps.show_staged_config("food_preprocess")
triton_steps.show_model_code("food_preprocess")

# %%
triton_steps.show_staged_config("food_postprocess")
triton_steps.show_model_code("food_postprocess")

# %% [markdown]
# The lab's Triton with the Python backend (the reference answers), the ONNX model and the two new
# models, deployed as the other notebooks deploy them:

# %%
stack = common.open_stack(P)
triton = triton_steps.triton_up(stack, list(step.MODELS))

# %% [markdown]
# ## Write the ensemble's config.pbtxt
# An ensemble is `platform: "ensemble"`; its `input` and `output` are what clients see; its
# `ensemble_scheduling` lists the steps. In each step, `input_map` and `output_map` connect the
# member's own tensor names (the key) to the ensemble's tensors (the value): a tensor that only
# the steps name (`pixels`, `logits` below) never leaves the server. Read the members' configs
# above, then write the three steps (preprocess, classify, postprocess) where the cell says: the cell
# after it loads what you wrote, and Triton refuses a name that does not fit, with its reason.

# %%
ensemble_config = """
name: "food_classifier_ensemble"
# Not a backend: Triton's own scheduler runs the steps below.
platform: "ensemble"
# At most each member's max_batch_size (16 for all three).
max_batch_size: 16
# What the client sends: the image file's bytes, as GourmetGram received them (no base64, no tensor).
input [
  {
    name: "IMAGE"
    data_type: TYPE_UINT8
    dims: [ -1 ]
  }
]
# What the client gets back: food_classifier's answer.
output [
  {
    name: "FOOD_LABEL"
    data_type: TYPE_STRING
    dims: [ 1 ]
  },
  {
    name: "PROBABILITY"
    data_type: TYPE_FP32
    dims: [ 1 ]
  }
]
# Each step names a model and maps its tensors: input_map { key: <the member's input> value: <an
# ensemble tensor> }, output_map { key: <the member's output> value: <an ensemble tensor> }. A tensor
# named only here ("pixels", "logits") lives inside the server: it never crosses the network.
ensemble_scheduling {
  step [
    ### BEGIN SOLUTION
    {
      model_name: "food_preprocess"
      model_version: -1
      input_map { key: "IMAGE" value: "IMAGE" }
      output_map { key: "PIXELS" value: "pixels" }
    },
    {
      model_name: "food_classifier_onnx"
      model_version: -1
      input_map { key: "input" value: "pixels" }
      output_map { key: "output" value: "logits" }
    },
    {
      model_name: "food_postprocess"
      model_version: -1
      input_map { key: "LOGITS" value: "logits" }
      output_map { key: "FOOD_LABEL" value: "FOOD_LABEL" }
      output_map { key: "PROBABILITY" value: "PROBABILITY" }
    }
    ### END SOLUTION
  ]
}
"""

# %%
step.deploy_ensemble(triton, ensemble_config)
triton_steps.model_table(triton)

# %% [markdown]
# **Predict.** For each of the three ways to get an answer (the Python backend with the JPEG as
# base64 text, the ONNX model with the client preprocessing, the ensemble with the JPEG's bytes),
# how many bytes does one request carry, and which one costs the client the most CPU? Then set each
# guess to "yes" or "no": will a request to the ensemble carry a small fraction of the tensor the
# preprocessing client sends, and will the ensemble's client spend less CPU per request?

# %% tags=["prediction"]
guess_bytes, guess_cpu = None, None  # "yes" or "no" each
### BEGIN SOLUTION
guess_bytes, guess_cpu = "yes", "yes"
### END SOLUTION
exercise.predict(step, "A request to the ensemble carries the image file", guess_bytes)
exercise.predict(step, "With the ensemble the client spends less CPU per request", guess_cpu)

# %% [markdown]
# One photo each way:

# %%
step.try_each(triton)

# %% [markdown]
# ## The same answers?
# The ensemble runs the ONNX export of the model the Python backend runs in PyTorch, after the same
# preprocessing. Every sample photo both ways: the same class, and how far apart the probabilities are.

# %%
step.compare_answers(triton)

# %% [markdown]
# ## The server's side: perf_analyzer
# perf_analyzer sends the ensemble the sample photos' bytes in turn (distinct inputs, as real
# clients send), at each of `ensemble_concurrency_levels`; Triton's statistics split each request's
# time into the ensemble's queue and compute.

# %%
step.perf_ensemble(triton, P)

# %% [markdown]
# ## Three ways, measured from the client
# perf_analyzer sends ready-made inputs, so it cannot show what the client's own work costs. Here the
# lab's client does what a real one does for every request (base64, or decoding and normalising and
# a softmax, or nothing but the file), over all the sample photos, at each of
# `ensemble_concurrency_levels`; it counts the bytes each request carries and its own CPU time,
# and reads Triton's statistics for every model the request passed through.
#
# **Predict.** At one client, which is fastest? With more clients? Set your guess to "yes" or "no":
# with one client, will the ensemble answer about as fast (a p50 within a quarter) as the client that
# preprocesses itself?

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step, "One request alone: the ensemble answers about as fast", guess)

# %%
pipelines = step.measure_pipelines(triton, P)
pipelines

# %%
step.plot_pipelines(pipelines)

# %% [markdown]
# Where the ensemble's time goes, from Triton's statistics for each member: the time a request
# waited for the member's instance and the time it computed there.

# %%
step.member_times(pipelines)

# %% [markdown]
# **What to look for.** What does each request carry now, and what did the client stop doing? Which
# member holds the most of the ensemble's compute, and where does a queue form with more clients (one
# instance of each member)? What this run shows:

# %%
common.what_this_run_shows(step)

# %%
exercise.compare(step, "A request to the ensemble carries the image file")
exercise.compare(step, "With the ensemble the client spends less CPU per request")
exercise.compare(step, "One request alone: the ensemble answers about as fast")

# %% [markdown]
# **Expected on the GPU node** (an expectation from how an ensemble works, not a measurement:
# Triton's [ensemble models](https://github.com/triton-inference-server/server/blob/main/docs/user_guide/architecture.md#ensemble-models)
# and [Conceptual Guide, Part 5](https://github.com/triton-inference-server/tutorials/tree/main/Conceptual_Guide/Part_5-Model_Ensembles)):
# the request still carries the JPEG and the client still does no preprocessing; the classifier
# member computes on the GPU while `food_preprocess` decodes on the CPU, so with more clients the
# preprocessing member, with its one CPU instance, is where a queue can form. Between machines,
# a request's bytes cost network time that this run, with client and server on one machine, does
# not pay.

# %% [markdown]
# ## GourmetGram on the ensemble
# This version of GourmetGram sends the uploaded file's bytes to `food_classifier_ensemble` and shows
# the label and probability it gets back: no preprocessing and no softmax in the app.

# %%
common.show_code("flask_app/backends.py", "TritonEnsembleBackend._infer")

# %%
flask = gourmetgram.flask_up(stack, "triton_ensemble")
gourmetgram.flask_uploads(flask, P, step="triton_ensemble")

# %%
triton_steps.triton_down(stack)

# %% [markdown]
# **Try:** give `food_preprocess` two instances (`count: 2` in its config) and set
# `ensemble_concurrency_levels = [1, 4, 8]` in the parameters cell: does the ensemble's queue move?

# %% [markdown]
# ## Questions
# 1. How many bytes did one request carry each way, and what part of the client's work did the
#    ensemble take over?
# 2. Which member of the ensemble held most of its compute, and which one queued with more clients?
# 3. Between a phone and a data centre, which of the three ways would you choose, and why?

# %% [markdown] tags=["answer"]
# **Your answer to 1.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
one = pipelines[pipelines["concurrency"] == pipelines["concurrency"].min()].set_index("pipeline")
kb, cpu = one["request_kb"], one["client_cpu_ms"]
exercise.model_answer(1, f"at one client a request carried {kb['python']:.1f} KB to the Python backend (the "
                         f"JPEG as base64 text), {kb['client']:.0f} KB to the ONNX model (the preprocessed "
                         f"tensor) and {kb['ensemble']:.1f} KB to the ensemble (the file's bytes); the "
                         f"client's CPU per request was {cpu['client']:.2f} ms preprocessing itself and "
                         f"{cpu['ensemble']:.2f} ms with the ensemble. The ensemble took over decoding, "
                         "resizing and normalising the image (food_preprocess) and the softmax and label "
                         "(food_postprocess).")

# %% [markdown] tags=["answer"]
# **Your answer to 2.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
members = step.member_times(pipelines)
top = members[members["concurrency"] == members["concurrency"].max()].set_index("member")
exercise.model_answer(2, f"at {top['concurrency'].iloc[0]:g} clients the members computed "
                         + ", ".join(f"{m} {top.loc[m, 'compute_ms']:.2f} ms" for m in top.index)
                         + " per request and queued "
                         + ", ".join(f"{m} {top.loc[m, 'queue_ms']:.2f} ms" for m in top.index)
                         + f": {top['compute_ms'].idxmax()} held the most compute and "
                         f"{top['queue_ms'].idxmax()} queued the most. Each member has one instance, so "
                         "requests wait there while it is busy with another.")

# %% [markdown] tags=["answer"]
# **Your answer to 3.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
exercise.model_answer(3, f"a phone on a slow uplink gains most from the ensemble: each request carries the "
                         f"{kb['ensemble']:.1f} KB file instead of a "
                         f"{kb['client']:.0f} KB tensor, and the phone does no "
                         "preprocessing. Inside a data centre, bytes are cheap, and a client that "
                         "preprocesses itself spares the server's CPU (or GPU) that work; the Python backend "
                         "with base64 pays a third more bytes than the file for no gain.")
