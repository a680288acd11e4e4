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
# # 11. Let Triton's Model Analyzer search the configuration
#
# In 05, 06 and 07 you tuned the ONNX model's `config.pbtxt` by hand: how many instances (05, 06) and whether
# Triton combines waiting requests (07's `dynamic_batching`). NVIDIA's own next step, Part 3 of
# Triton's [Conceptual Guide](https://github.com/triton-inference-server/tutorials/tree/main/Conceptual_Guide/Part_3-optimizing_triton_configuration),
# hands that job to **Model Analyzer**: it writes variants of the config (instance count, max batch
# size, dynamic batching), starts a Triton of its own, measures each variant with perf_analyzer, and
# ranks them by an objective (inferences/s) under a constraint (a p99 latency budget).
#
# Here you state the constraint, let it search the same knobs, read what it found, and measure its
# pick beside your own configuration on the lab's Triton, the way 05, 06 and 07 measured.

# %% tags=["parameters"]
target = None  # local | docker; None: $SERVELAB_TARGET (docker in the node's Jupyter, see 02) or local
preset = "quick"
# the constraint:
constraint_concurrency = None  # None: 8 clients, each sending its next request when an answer comes
p99_budget_ms = None  # None: first 1.5 × your configuration's p99, then one between the p99s it measured
# Model Analyzer's search:
ma_max_instances = None  # instance counts 1 … this (None: preset)
ma_max_batch_size = None  # max batch sizes 1, 2, 4 … this (None: preset)
ma_search_mode = None  # "brute" or "quick" (None: brute)
ma_budget_s = None  # seconds the search may take before it is stopped (None: preset)
# perf_analyzer's settling, explained in 04 ("How perf_analyzer measures"); Model Analyzer's too:
window_requests = None  # requests per measurement window (None: preset)
settle = None  # "fixed" (one window per level) or "stable" (None: preset)
max_trials = None  # windows tried before giving up on "stable" (None: preset)
stability_pct = None  # how closely (percent) windows must agree for "stable" (None: preset)

# %%
from servelab.lab import common, exercise, params, step11_report, triton_edits, triton_steps
from servelab.lab import step11_model_analyzer as step

P = params.resolve(target, preset, constraint_concurrency=constraint_concurrency, p99_budget_ms=p99_budget_ms,
                   ma_max_instances=ma_max_instances, ma_max_batch_size=ma_max_batch_size,
                   ma_search_mode=ma_search_mode, ma_budget_s=ma_budget_s, window_requests=window_requests,
                   settle=settle, max_trials=max_trials, stability_pct=stability_pct)
P

# %% [markdown]
# ## Model Analyzer's own environment
# Model Analyzer is a Python package (`triton-model-analyzer`) with dependencies the lab does not
# use, so it lives in an environment of its own, pinned in `constraints-model-analyzer.txt`: `.venv-ma`
# on the local target, which the next cell makes the first time (`./lab setup --model-analyzer` does
# the same from a terminal), or `/opt/model-analyzer`, built into the Jupyter image on a Docker host
# (on a GPU host the search runs NVIDIA's SDK image instead, below). Either way it says in one line
# which one is ready.

# %%
on = step.ready(P)

# %% [markdown]
# ## Your configuration, measured
# The lab's Triton with the ONNX model, set as you left it in 05, 06 and 07: write its `instance_group` (06's
# two instances) and then 07's `dynamic_batching` block as `config.pbtxt` text, one change per cell. The
# lab parses each as Triton does, refuses a typo with its line, and reloads the model.

# %%
stack = common.open_stack(P)
triton = triton_steps.triton_up(stack, [step.MODEL])

# %%
triton_edits.edit_config(triton, step.MODEL, """
instance_group [
  {
    ### BEGIN SOLUTION
    count: 2
    ### END SOLUTION
    kind: KIND_GPU
    gpus: [ 0 ]
  }
]
""")

# %%
triton_edits.edit_config(triton, step.MODEL, """
### BEGIN SOLUTION
dynamic_batching {
  preferred_batch_size: [ 4, 6, 8 ]
  max_queue_delay_microseconds: 100
}
### END SOLUTION
""")
yours_config = triton_steps.live_config(triton, step.MODEL)  # kept: the notebook comes back to it

# %% [markdown]
# Measured at the constraint's load: `constraint_concurrency` clients, each sending its next request
# as soon as an answer comes back, as in 05.

# %%
yours = step.measure_configuration(triton, P, step.YOURS, "yours")
yours

# %% [markdown]
# ## State the constraint
# A service promises its users a latency: here, a p99 at the constraint's concurrency. Unless you set
# `p99_budget_ms`, the first budget is half again your configuration's p99, so the question becomes:
# within that budget, which configuration serves the most requests per second, and is it yours?

# %%
bound = step.budget(yours, P)

# %% [markdown]
# ## What Model Analyzer will do
# Its **brute** search walks the space: instance counts 1 to `ma_max_instances`, and for each, max
# batch sizes 1, 2, 4 … up to `ma_max_batch_size`, every variant with `dynamic_batching` on (Triton's
# defaults: no preferred sizes, no delay); it leaves a row of batch sizes early once its throughput
# plateaus. It also measures the model's own config as deployed (one instance, max batch 16, no dynamic
# batching). Each configuration runs at `constraint_concurrency` clients, with perf_analyzer's count
# windows sized as in this notebook.
#
# The command carries the search; the YAML file (`-f`) carries how this machine launches Triton and
# perf_analyzer, on ports of its own: on `local` the same server binary and backends the lab's local
# Triton uses; on `docker` a container of the lab's own Triton image, which Model Analyzer starts
# through the Docker socket from a container of its own, beside this one: this Jupyter image on a CPU
# host; on a GPU host NVIDIA's SDK image on GPU 0, because Model Analyzer sees a GPU only through
# NVIDIA's DCGM library, which that image carries. There the model and its variants are KIND_GPU on
# Triton's onnxruntime backend, as your Triton serves them. The lab's Triton stays up, idle, while
# Model Analyzer runs its own.
#
# **Predict.** Which configuration will Model Analyzer rank first under the budget: how many
# instances, which max batch size? Will it be yours? Will it find any configuration within the budget?
# Set your guess to "yes" or "no".

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step11_report, "Model Analyzer found a configuration within the p99 budget", guess)

# %%
planned = step.plan_search(P, bound, on, triton)

# %% [markdown]
# ## The search
# One progress step per configuration while it runs (a couple of minutes at the quick preset). When
# it is done: every configuration it measured, in its own order (the ones within the budget first,
# ranked by inferences/s).

# %%
found = step.run_search(planned)
found

# %% [markdown]
# ## A budget that binds
# A budget every configuration meets shapes nothing: the pick is then simply the fastest. So the
# budget here is set from what the search measured on this machine: a whole ms halfway between the two
# p99s either side of the middle, which the configurations above the middle do not meet (with
# `p99_budget_ms` set, yours instead). The same measurements are then ranked under it the way Model
# Analyzer ranks: those within the budget first, by inferences/s (nothing is measured twice). The
# table, recorded in the run's `model_analyzer.csv`, is that ranking; its pick goes on the lab's Triton
# below.
#
# **Predict.** Under the tighter budget, will it rank the same configuration first? Set your guess to
# "yes" or "no": will at least one configuration Model Analyzer measured miss the budget (so that the
# budget decides the ranking)?

# %% tags=["prediction"]
guess_binds = None  # "yes" or "no"
### BEGIN SOLUTION
guess_binds = "yes"
### END SOLUTION
exercise.predict(step11_report, "The p99 budget binds", guess_binds)

# %%
bound = step.binding_budget(found, P)
found = step.rank(planned, bound, found)
found

# %%
step11_report.plot_search(found)

# %% [markdown]
# ## Its summary
# Model Analyzer ends with a report of its own: one sentence, a table of the configurations it ranks
# first, and throughput-against-latency plots, saved as HTML in the run's folder (under
# `model-analyzer/`). Open it from the link below.

# %%
step.summary(planned)

# %% [markdown]
# What this run shows about the search:

# %%
common.what_this_run_shows(step11_report, "found a configuration")

# %%
exercise.compare(step11_report, "Model Analyzer found a configuration within the p99 budget")
exercise.compare(step11_report, "The p99 budget binds")

# %% [markdown]
# ## Its pick on the lab's Triton, beside yours
# Model Analyzer's numbers come from its own Triton and windows. To compare like with like, its pick
# goes on the lab's Triton (one change: the instance group, max batch size and `dynamic_batching` of
# the variant it ranks first) and is measured as yours was; then yours a second time, right after, so
# that both were measured under the same conditions on this shared machine.
#
# **Predict.** Measured by the lab, will the pick serve more images/s than yours? Will it stay within
# the budget? Set each guess to "yes" or "no".

# %% tags=["prediction"]
guess_more, guess_within = None, None  # "yes" or "no" each
### BEGIN SOLUTION
guess_more, guess_within = "yes", "yes"
### END SOLUTION
exercise.predict(step11_report, "Model Analyzer's pick serves more than your configuration", guess_more)
exercise.predict(step11_report, "Model Analyzer's pick stays within the p99 budget", guess_within)

# %%
applied = step.apply_pick(triton, planned, found)

# %%
pick = step.measure_pick(triton, P, applied)
pick

# %%
yours_again = step.measure_yours_again(triton, P, yours_config, applied)
yours_again

# %%
step11_report.side_by_side()

# %% [markdown]
# **Reading it.** Where does each configuration's time go at this load: the queue or the compute?
# Which knob made the difference, if any: the instances (05), the batch size, or the batching (07)?
# What this run shows:

# %%
common.what_this_run_shows(step11_report, "pick")

# %%
exercise.compare(step11_report, "Model Analyzer's pick serves more than your configuration")
exercise.compare(step11_report, "Model Analyzer's pick stays within the p99 budget")

# %% [markdown]
# **Expected on a GPU** (Triton's Conceptual Guide, Part 3, linked at the top, and Model Analyzer's
# [documentation](https://github.com/triton-inference-server/model_analyzer/blob/main/docs/config_search.md)):
# there the search runs Triton's own onnxruntime backend on KIND_GPU instances, and its summary adds
# each configuration's GPU memory, utilisation and power (the whole GPU's, which your idle Triton
# shares: its memory is in every figure). A batch costs little more than one image on
# a GPU (07's expectation, docs/decisions/2026-11-24-gpu-expectations.md), so the larger max batch
# sizes with dynamic batching are the variants to watch there. The lab has not yet run this search on
# a GPU (docs/decisions/2026-11-28-model-analyzer.md says what only a GPU can check).

# %%
triton_steps.triton_down(stack)

# %% [markdown]
# **Try:** set `p99_budget_ms` to about your configuration's p99 (printed above) and run the notebook
# again. Does Model Analyzer still find a configuration within it, and is it the same one?

# %% [markdown]
# ## Questions
# 1. Which configuration did Model Analyzer rank first, and which knob separates it from yours?
# 2. Set Model Analyzer's own numbers for its pick beside the lab's measurement of it: why can two
#    measurements of one configuration on this machine disagree?
# 3. Model Analyzer measured every configuration at one concurrency. What would a constraint at
#    another load (concurrency 1, or 16) change in what it ranks first?

# %% [markdown] tags=["answer"]
# **Your answer to 1.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
said = exercise.evidence(step11_report, "Model Analyzer found a configuration within the p99 budget")
exercise.model_answer(1, f"this run: {said}. Its first row is its pick: compare its instance count, max "
                         "batch size and dynamic batching with yours (the rows above); the knob that differs "
                         "is the one that made the difference, if its throughput is outside the noise.")

# %% [markdown] tags=["answer"]
# **Your answer to 2.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
said = exercise.evidence(step11_report, "Model Analyzer's pick serves more than your configuration")
exercise.model_answer(2, f"the lab's measurement: {said}. Model Analyzer measured on a Triton of its own, "
                         "with its own windows, at another time of this shared machine: the other engineers' "
                         "load, the windows' length and a cold start differ between two measurements of one "
                         "configuration, so they agree only within their noise.")

# %% [markdown] tags=["answer"]
# **Your answer to 3.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
said = exercise.evidence(step11_report, "Model Analyzer's pick stays within the p99 budget")
exercise.model_answer(3, f"at the constraint's concurrency: {said}. At concurrency 1 there is no queue, so "
                         "the batch size that serves most would matter little and the fewest instances "
                         "would do; at 16, queueing grows, so more instances or dynamic batching within the "
                         "budget would rank first, and a budget set at one load says nothing of another.")
