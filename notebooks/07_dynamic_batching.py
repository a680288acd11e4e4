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
# # 7. Bursty traffic and dynamic batching
#
# Back to **one instance**. Until now clients sent a new request as soon as the previous
# answer came back. Real users arrive on their own schedule. Here requests arrive at a fixed
# *rate*, either evenly spaced (constant) or at random times with the same average rate
# (Poisson, which is how independent users behave).
#
# The rates are fractions of this machine's **measured capacity** — what one instance serves
# at most — so the experiment means the same thing on a GPU node and on a laptop CPU.

# %% tags=["parameters"]
target = None  # local | docker; None: $SERVELAB_TARGET (docker in the node's Jupyter, see 02) or local
preset = "quick"
capacity_concurrency = None  # concurrency used to measure capacity
base_rate_fraction = None  # constant vs Poisson at this fraction of capacity
rate_fractions = None  # Poisson rates for the dynamic-batching runs
preferred_batch_sizes = None  # None: [4, 6, 8]
max_queue_delay_us = None  # None: 100
window_requests = None  # requests per perf_analyzer window (None: preset)
settle = None  # "fixed" (one window per level) or "stable" (None: preset)
max_trials = None
stability_pct = None

# %%
from servelab.lab import common, params, triton_steps
from servelab.lab import step07_dynamic_batching as step

P = params.resolve(target, preset, capacity_concurrency=capacity_concurrency,
                   base_rate_fraction=base_rate_fraction, rate_fractions=rate_fractions,
                   preferred_batch_sizes=preferred_batch_sizes, max_queue_delay_us=max_queue_delay_us,
                   window_requests=window_requests, settle=settle,
                   max_trials=max_trials, stability_pct=stability_pct)
P

# %%
stack = common.open_stack(P)
triton = triton_steps.triton_up(stack, ["food_classifier_onnx"])
triton_steps.set_instances(triton, "food_classifier_onnx", 1)

# %% [markdown]
# ## How much can one instance serve?

# %%
capacity = step.measure_capacity(triton, "food_classifier_onnx", P)
capacity

# %% [markdown]
# **Predict.** At the same average rate, well below capacity, will evenly spaced and Poisson
# arrivals have the same p99 latency?
#
# ## Constant vs Poisson arrivals at the same rate
# A rate one instance can comfortably serve. Evenly spaced requests barely queue; random
# arrivals come in bursts, and a burst has to wait.

# %%
arrivals = step.arrival_patterns(triton, "food_classifier_onnx", capacity, P)
arrivals

# %%
triton_steps.plot_breakdown(arrivals, x="distribution", title="Same rate, different arrival pattern")

# %%
common.what_this_run_shows(step, "Poisson")

# %% [markdown]
# ## Dynamic batching
# More instances would absorb the bursts, but they cost money and idle between bursts.
# Instead, Triton can **combine requests that are waiting** into one batch: preferred sizes
# 4, 6 and 8, waiting at most 100 µs for more to arrive.

# %% [markdown]
# ## Poisson arrivals at rising rates, batching off and on
# The rates rise up to beyond what one instance serves without batching (the last fraction
# is above 1). First without batching, as the model is configured now.

# %% [markdown]
# **Predict.** Every client sends single images. Will any execution carry more than one request
# with batching on? What will batching do to p99 at the highest rate?

# %%
step.rates_for(capacity, P)

# %%
off = step.batching_runs(triton, "food_classifier_onnx", capacity, P, enabled=False)
off

# %% [markdown]
# ### Turn dynamic batching on
# One change: a `dynamic_batching` block in the config (preferred sizes and the longest a request
# may wait for others), then a reload. The server's statistics before the batching runs:

# %%
triton_steps.set_dynamic_batching(triton, "food_classifier_onnx", P)
stats_before = triton_steps.stats_json(triton, "food_classifier_onnx")

# %% [markdown]
# ### The same rates, batching on

# %%
on = step.batching_runs(triton, "food_classifier_onnx", capacity, P, enabled=True)
on

# %% [markdown]
# The statistics after: how many *executions* ran, and with which batch size, although every
# client sent single images.

# %%
stats_after = triton_steps.stats_json(triton, "food_classifier_onnx")
triton_steps.stats_change(stats_before, stats_after)

# %%
batching = common.concat(off, on)
batching

# %%
step.plot_rates(batching)

# %%
step.plot_batch_sizes(batching)

# %% [markdown]
# **Reading it (GPU node).** With batching on, latency stays near half a service time plus one
# service time even as the rate rises: whatever queued during one execution is served together
# in the next, and a batch costs little more than one image.
#
# **Reading it (CPU).** The batch-size counts show batching happens here too. A CPU batch,
# though, costs about its size times one image: batching only saves the per-call overhead
# (Python, HTTP handling), so above capacity it serves somewhat more than without batching,
# but latency does not stay flat the way it does on a GPU. This run:

# %%
common.what_this_run_shows(step, "dynamic batching")

# %% [markdown]
# ## Watching Triton as a dashboard would
# Triton exposes its own counters on its metrics port (8002 on the GPU node) for Prometheus:
# requests, executions, and the time spent queued and computing, per model. The raw lines:

# %%
from servelab.lab import monitoring

lines = monitoring.show_metrics(triton.metrics_url, ["nv_inference_queue", "nv_inference_count",
                                                     "nv_inference_exec_count", "nv_inference_pending"],
                                contains="food_classifier_onnx")

# %% [markdown]
# One more load with batching on, about five seconds at the measured capacity, scraped every half
# second: latency per request (queue and compute), inferences per second and requests waiting,
# over time; the reading under the plot gives the mean batch size
# (Δ`nv_inference_count` / Δ`nv_inference_exec_count`).

# %%
monitoring.monitor_triton(triton, "food_classifier_onnx", P, expected_rate=capacity)

# %%
triton_steps.triton_down(stack)

# %% [markdown]
# ## Questions
# 1. Why do Poisson arrivals queue more than evenly spaced ones at the same average rate?
# 2. How many executions carried more than one request, and where do those numbers come from?
# 3. What did dynamic batching do to p99 at the highest rate in this run, and what would you
#    expect on a GPU, where a batch of 8 costs little more than one image?
