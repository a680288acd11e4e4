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
preferred_batch_sizes = None  # None: preset (the lab's default, in the table below)
max_queue_delay_us = None  # None: preset (the same)
# perf_analyzer's settling, explained in 04 ("How perf_analyzer measures"):
window_requests = None  # requests per measurement window (None: preset)
settle = None  # "fixed" (one window per level) or "stable" (None: preset)
max_trials = None  # windows tried before giving up on "stable" (None: preset)
stability_pct = None  # how closely (percent) windows must agree for "stable" (None: preset)
rate_stability_pct = None  # the same for the rate levels below (None: preset; quick accepts any spread)

# %%
from servelab.lab import common, exercise, params, triton_edits, triton_steps
from servelab.lab import step07_dynamic_batching as step

P = params.resolve(target, preset, capacity_concurrency=capacity_concurrency,
                   base_rate_fraction=base_rate_fraction, rate_fractions=rate_fractions,
                   preferred_batch_sizes=preferred_batch_sizes, max_queue_delay_us=max_queue_delay_us,
                   window_requests=window_requests, settle=settle,
                   max_trials=max_trials, stability_pct=stability_pct, rate_stability_pct=rate_stability_pct)
P

# %%
stack = common.open_stack(P)
triton = triton_steps.triton_up(stack, ["food_classifier_onnx"])
triton_steps.set_instances(triton, "food_classifier_onnx", count=1, kind="KIND_GPU", gpus=[0])

# %% [markdown]
# ## How much can one instance serve?
# The throughput at `capacity_concurrency` clients, each sending its next request as soon as an
# answer comes back: the server never waits for work.

# %%
capacity = step.measure_capacity(triton, "food_classifier_onnx", P)
capacity

# %% [markdown]
# **Predict.** At the same average rate, well below capacity, will Poisson arrivals have a higher p99
# latency than evenly spaced ones? Set your guess to "yes" or "no".

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step, "Poisson arrivals queue more than evenly spaced ones", guess)

# %% [markdown]
# ## Constant vs Poisson arrivals at the same rate
# The rate is `base_rate_fraction` of the capacity just measured. Evenly spaced requests arrive
# one interval apart; Poisson arrivals have random gaps, so now and then several requests arrive
# close together (a burst), and all but the first find the instance busy.
#
# **Throughput is not the measure here.** Under a fixed arrival rate the server can only serve
# what arrives: below capacity its throughput follows the offered rate whatever the server does,
# and only above capacity does it show what the server can do. So from here on, compare latency
# (p50, p99, and the queue), not throughput.

# %%
constant = step.arrival_patterns(triton, "food_classifier_onnx", capacity, P, distributions=("constant",))
constant

# %% [markdown]
# ### Your command: the same rate, Poisson arrivals
# The evenly spaced run above was the lab's; the Poisson one is yours. The command below has the model,
# the server, the input data, the client threads perf_analyzer needs to keep a rate (`--max-threads`),
# the windows and `-f poisson.csv`; add the load: `--request-rate-range` at the rate the lab measured
# with (`rate`, printed below) and `--request-distribution poisson`. It runs exactly as written and its
# table lands in the run's data.

# %%
url, inputs = triton_edits.perf_url(triton, "food_classifier_onnx")
rate = step.base_rate(capacity, P)
print(f"rate = {rate} requests/s (base_rate_fraction {P.base_rate_fraction} × the capacity)")

# %%
command = f"""perf_analyzer -m food_classifier_onnx -u {url} --input-data {inputs} -b 1 --max-threads 16
    ### BEGIN SOLUTION
    --request-rate-range {rate} --request-distribution poisson
    ### END SOLUTION
    --measurement-mode count_windows --measurement-request-count {max(P.window_requests, int(rate) + 1)}
    --stability-percentage {P.rate_stability_pct} --max-trials {P.max_trials} -v -f poisson.csv"""
poisson = triton_edits.perf_analyzer(triton, command, step="arrivals")
poisson

# %%
triton_edits.check_distribution(poisson, step, "poisson",
                                f"add --request-rate-range {rate} --request-distribution poisson to the "
                                "command above and run it again")

# %%
arrivals = common.concat(constant, poisson)
arrivals

# %%
triton_steps.plot_breakdown(arrivals, x="distribution", title="Same rate, different arrival pattern")

# %% [markdown]
# **Reading the verdicts.** A comparison needs its two levels settled, and a noise band narrower than
# the difference it judges; the line under each verdict says whether the run had both. The quick
# preset accepts the rate levels' windows at any spread (`rate_stability_pct` 1000: a one-second
# Poisson window's burst would otherwise leave a level unmeasured), so their band bounds nothing, and
# where a difference lies inside it the verdict reads "too noisy to call" and names the rerun that would
# settle it (docs/decisions/2026-11-28-lessons-third-pass.md). The `full` preset, or a
# `rate_stability_pct` such as 30 in the parameters cell, asks the windows to agree.

# %%
common.what_this_run_shows(step, "Poisson")

# %%
exercise.compare(step, "Poisson arrivals queue more than evenly spaced ones")

# %% [markdown]
# ## Dynamic batching
# Extra instances would absorb the bursts, but they cost money and sit idle between bursts.
# Instead, Triton can **combine requests that are waiting** into one execution: a
# `dynamic_batching` block in the model's config names the preferred batch sizes and the longest
# a request may wait for others (`max_queue_delay_microseconds`).
#
# ## Poisson arrivals at several rates, batching off and on
# The rates (`rate_fractions` of the capacity) go up to beyond what one instance serves without
# batching: the last fraction is above 1. First without batching, as the model is configured now.
#
# **Predict.** Every client sends single images. With batching on, will some execution carry more
# than one request? At the highest rate, will p99 with batching be no higher than without? At the
# lowest rate, where there is little to combine, will batching cost latency (p99 with it at least p99
# without)? Set each guess to "yes" or "no".

# %% tags=["prediction"]
guess_batches, guess_top, guess_low = None, None, None  # "yes" or "no" each
### BEGIN SOLUTION
guess_batches, guess_top, guess_low = "yes", "yes", "yes"
### END SOLUTION
exercise.predict(step, "some executions carry more than one request", guess_batches)
exercise.predict(step, "At the highest rate, p99 with dynamic batching", guess_top)
exercise.predict(step, "At the lowest rate, dynamic batching costs latency", guess_low)

# %%
step.rates_for(capacity, P)

# %%
off = step.batching_runs(triton, "food_classifier_onnx", capacity, P, enabled=False)
off

# %% [markdown]
# ### Turn dynamic batching on
# One change: write the `dynamic_batching` block of `food_classifier_onnx`'s `config.pbtxt`, as text:
# `preferred_batch_size` (the sizes Triton tries to form) and `max_queue_delay_microseconds` (how long
# the oldest request may wait for others), with the values of `preferred_batch_sizes` and
# `max_queue_delay_us` in the parameters table at the top (the original lab's). The lab parses it as
# Triton does, refuses a typo with its line (the model keeps serving its last good config), adds the
# block to the live config (the diff is printed) and reloads the model.

# %%
triton_edits.edit_config(triton, "food_classifier_onnx", """
### BEGIN SOLUTION
dynamic_batching {
  preferred_batch_size: [ 4, 6, 8 ]
  max_queue_delay_microseconds: 100
}
### END SOLUTION
""")

# %%
triton_edits.check_block(triton, "food_classifier_onnx", "dynamic_batching", step,
                         "write a dynamic_batching { … } block in the cell above and run it again")

# %% [markdown]
# The server's statistics before the batching runs: they count from the model's last load, so the
# reload just now set them to zero. Beside them, the same two counts on the server's metrics port
# (the one Prometheus scrapes, shown near the end): those count from the server's start, and a reload
# does not reset them.

# %%
stats_before = triton_steps.stats_json(triton, "food_classifier_onnx")
metrics_before = step.metrics_counts(triton, "food_classifier_onnx")

# %% [markdown]
# ### The same rates, batching on
# **On the GPU node, now look at nvtop** while the next cell runs: how busy is GPU 0 at each rate?

# %%
batching_on = triton_steps.live_config(triton, "food_classifier_onnx").HasField("dynamic_batching")
on = step.batching_runs(triton, "food_classifier_onnx", capacity, P, enabled=batching_on)
on

# %%
triton_edits.check_batched(on, step, "turn dynamic batching on (the config cell above) and run these cells "
                                     "again")

# %% [markdown]
# The statistics after: how many *executions* ran, and with which batch size, although every
# client sent single images. Between the two reads the server also counted perf_analyzer's short
# warm-up before each rate (the same load, not timed); the table splits the executions into the
# timed windows, which the measurement rows' `batch_counts` and the histogram below count, and the
# warm-ups.

# %%
stats_after = triton_steps.stats_json(triton, "food_classifier_onnx")
step.executions_by_batch_size(stats_before, stats_after, on)

# %%
batching = common.concat(off, on)
batching

# %%
step.plot_rates(batching)

# %%
step.plot_batch_sizes(batching)

# %% [markdown]
# **Why sizes other than the preferred ones?** When the instance becomes free, Triton takes the
# queued requests in arrival order. While none of them has waited `max_queue_delay_microseconds`
# yet, it sends the largest preferred size it can form, or waits (up to that delay) for one. Once
# the oldest has waited longer, it sends everything queued as one execution, up to the model's
# `max_batch_size` (16), preferred or not. How long does one execution take here (the compute
# column), against `max_queue_delay_microseconds`? Sources: Triton's documentation,
# [batcher.md](https://github.com/triton-inference-server/server/blob/main/docs/user_guide/batcher.md)
# ("Preferred Batch Sizes", "Delayed Batching"), and the scheduler's code,
# [dynamic_batch_scheduler.cc](https://github.com/triton-inference-server/core/blob/main/src/dynamic_batch_scheduler.cc)
# (`GetDynamicBatch`); summarised in docs/decisions/2026-11-24-gpu-expectations.md.
#
# **Reading it.** Which batch sizes did the server form at each rate (the histogram, and
# `on["batch_counts"]` for the counts per rate; `mean batch` in the table)?
# At the highest rate, what did batching do to p99; at the lowest, what did it cost, and where did
# that time go: the queue (waiting, at most `max_queue_delay_us` for others to join) or the compute
# per request (on a CPU a batch of n costs about n images' compute, which every request in it waits
# for)? Remember that below capacity throughput only follows the offered rate. What this run shows:

# %%
common.what_this_run_shows(step, "dynamic batching")

# %%
exercise.compare(step, "some executions carry more than one request")
exercise.compare(step, "At the highest rate, p99 with dynamic batching")
exercise.compare(step, "At the lowest rate, dynamic batching costs latency")

# %% [markdown]
# **Expected on the GPU node** (the original lab's P100 run,
# [snippets/triton.md](https://github.com/teaching-on-testbeds/serve-system-chi/blob/main/snippets/triton.md),
# with the Python backend at concurrency 8 rather than Poisson arrivals; figures in
# docs/decisions/2026-11-24-gpu-expectations.md): dynamic batching took throughput from 52 to 79
# infer/s, with executions of 1 to 7 requests although every client sent one image; a batch of 16
# costs little more than one image on that GPU (657 against 52 images/s from one client). So on the
# GPU node the requests that queue during one execution are served together in the next, at about
# the cost of one.

# %%
common.reference("triton", triton_steps.TRITON_COLUMNS, rules=step, effects=["dynamic batching"],
                 step=["arrivals", "dynamic_batching"])

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
# Are these the same counts as the statistics after the batching runs? Only from the same origin: the
# metrics port's counters now, minus what they read at the reload, against the statistics now.

# %%
step.counts_since(triton, "food_classifier_onnx", metrics_before)

# %% [markdown]
# A last load with batching on, about five seconds at the measured capacity, scraped every half
# second: latency per request (queue and compute), inferences per second and requests waiting,
# over time; the reading under the plot gives the mean batch size
# (Δ`nv_inference_count` / Δ`nv_inference_exec_count`).

# %%
monitoring.monitor_triton(triton, "food_classifier_onnx", P, expected_rate=capacity)

# %%
triton_steps.triton_down(stack)

# %% [markdown]
# **Try:** write `max_queue_delay_microseconds: 5000` in your `dynamic_batching` block and run the
# notebook again. Do the executions' sizes move towards the preferred ones, and what does the longer
# wait cost p99 at the lowest rate?

# %% [markdown]
# ## Questions
# 1. Did Poisson arrivals queue longer than evenly spaced ones at the same average rate in this
#    run? Why would they?
# 2. How many executions carried more than one request, and where do those numbers come from?
# 3. What did dynamic batching do to p99 at the lowest rate and at the highest in this run, and
#    what would you expect on a GPU, where a batch of 8 costs little more than one image?

# %% [markdown] tags=["answer"]
# **Your answer to 1.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
even, bursty = constant.iloc[-1], poisson.iloc[-1]
exercise.model_answer(1, f"at {rate:g} requests/s evenly spaced arrivals had p99 {even['p99_ms']:.1f} ms and "
                         f"queue {even['queue_ms']:.2f} ms, Poisson ones p99 {bursty['p99_ms']:.1f} ms and "
                         f"queue {bursty['queue_ms']:.2f} ms. Poisson gaps are random: now and then "
                         "several requests arrive within one service time, and all but the first wait for "
                         "the busy instance, although the average rate is below capacity.")

# %% [markdown] tags=["answer"]
# **Your answer to 2.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
from servelab.results.schema import batch_size_counts

counts = batch_size_counts(on)
several = sum(n for s, n in counts.items() if s > 1)
exercise.model_answer(2, f"in the timed windows with batching on, {several} "
                         f"of {sum(counts.values())} executions carried more than one request (sizes "
                         f"{', '.join(f'{s}: {n}' for s, n in sorted(counts.items()))}). The numbers are "
                         "Triton's own statistics (batch_stats of /v2/models/…/stats), read before and "
                         "after each level: every client sent one image, so the server formed them.")

# %% [markdown] tags=["answer"]
# **Your answer to 3.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
lo_off, hi_off, lo_on, hi_on = off.iloc[0], off.iloc[-1], on.iloc[0], on.iloc[-1]
exercise.model_answer(3, f"at {lo_off['rate']:g}/s p99 went from {lo_off['p99_ms']:.1f} ms without batching "
                         f"to {lo_on['p99_ms']:.1f} ms with it; at {hi_off['rate']:g}/s from "
                         f"{hi_off['p99_ms']:.1f} "
                         f"to {hi_on['p99_ms']:.1f} ms. On this CPU a batch of n costs about n images' "
                         "compute, which every request in it waits for, so batching only trims the queue; "
                         "on a GPU a batch of 8 costs little more than one image "
                         "(docs/decisions/2026-11-24-gpu-expectations.md), so the requests queued during "
                         "one execution are served together in the next, at about the cost of one.")
