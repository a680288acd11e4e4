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
# # 5. Model instances: how many, and where
#
# At concurrency 8 one instance serves one request at a time while seven wait. Triton can run
# several copies of a model side by side: the **instance group** in `config.pbtxt` says how many
# and on which devices. On the GPU node the lab takes the original lab's steps: 1 instance on
# GPU 0, then 2 on each of its two GPUs, then 4 on each. A host with one GPU takes 1, 2 and 4
# instances on GPU 0.
#
# On a CPU there are no GPUs to spread over: the instances share the machine's cores. The counts
# are scaled to the cores (1, the cores, twice the cores), and a second question appears:
# **threads**. Each instance's PyTorch uses every core by default; what happens when two
# instances each do that?

# %% tags=["parameters"]
target = None  # local | docker; None: $SERVELAB_TARGET (docker in the node's Jupyter, see 02) or local
preset = "quick"
instance_counts = None  # 3+ counts; None: 1 → 2+2 → 4+4 on two GPUs, 1 → 2 → 4 on one; the cores on CPU
scaling_concurrency = None  # None: 8
# perf_analyzer's settling, explained in 04 ("How perf_analyzer measures"):
window_requests = None  # requests per measurement window (None: preset)
settle = None  # "fixed" (one window per level) or "stable" (None: preset)
max_trials = None  # windows tried before giving up on "stable" (None: preset)
stability_pct = None  # how closely (percent) windows must agree for "stable" (None: preset)

# %%
from servelab.lab import common, params, triton_steps
from servelab.lab import step05_instance_scaling as step

P = params.resolve(target, preset, instance_counts=instance_counts, scaling_concurrency=scaling_concurrency,
                   window_requests=window_requests, settle=settle,
                   max_trials=max_trials, stability_pct=stability_pct)
P

# %%
stack = common.open_stack(P)
triton = triton_steps.triton_up(stack, ["food_classifier"])

# %% [markdown]
# ## The plan
# The instance steps for this target, one row each. `count` is per listed GPU, as in
# `config.pbtxt` (`count: 2, gpus: [0, 1]` is two instances on each of GPUs 0 and 1); on a CPU
# `gpus` is empty and `count` is the number of instances. The cells below take their values from
# this table, so the headless run fits each target; change a value in a cell to try your own.

# %%
plan = step.instance_plan(stack, P)
plan

# %% [markdown]
# ## Each step: you change the config, then measure
# Each step is two cells. The first is the edit you would make to `instance_group` in
# `config.pbtxt`, as a call with the same fields: it writes the new config (the diff is printed),
# reloads the model through Triton's API and prints what is live — seconds, with no restart and no
# image rebuild. The second shows what now runs on the server (one stub process per
# Python-backend instance; `nvidia-smi` on the GPU node) and runs perf_analyzer at
# `scaling_concurrency`.
#
# **Predict.** At concurrency 8, what will going from one instance to more do to throughput and
# to p99 latency? Where does it stop helping, and why?
#
# ### Step 1: one instance

# %%
count = plan["count"][0]  # change me: instances on each listed GPU (on a CPU: in all)
triton_steps.set_instances(triton, "food_classifier", count=count, kind=plan["kind"][0],
                           gpus=plan["gpus"][0])

# %% [markdown]
# **On the GPU node, now look at nvtop** while the next cell runs, and again at each step below:
# how busy is each GPU, and how much memory does each instance hold?

# %%
one = step.measure_instances(triton, "food_classifier", P)
one

# %% [markdown]
# ### Step 2: 2 on each of two GPUs on the node (2 on GPU 0 with one GPU; as many as the cores on a CPU)

# %%
count = plan["count"][1]  # change me
triton_steps.set_instances(triton, "food_classifier", count=count, kind=plan["kind"][1],
                           gpus=plan["gpus"][1])

# %%
two = step.measure_instances(triton, "food_classifier", P)
two

# %% [markdown]
# ### Step 3: 4 on each GPU on the node (4 on GPU 0 with one GPU; twice the cores on a CPU)

# %%
count = plan["count"][2]  # change me
triton_steps.set_instances(triton, "food_classifier", count=count, kind=plan["kind"][2],
                           gpus=plan["gpus"][2])

# %%
four = step.measure_instances(triton, "food_classifier", P)
four

# %% [markdown]
# The steps of a longer `instance_counts` plan, if any (the same two cells each), then all steps
# side by side:

# %%
further = step.further_steps(triton, "food_classifier", plan, P, first=3)
scaling = common.concat(one, two, four, *further)
scaling

# %%
step.plot_scaling(scaling, title="Python backend: instances vs latency and throughput")

# %% [markdown]
# **What to look for.** How did throughput and p99 at concurrency 8 change from step to step, and
# where did they stop changing? Which resource was busy at each step: `CPU %` (the whole machine,
# the load generator included) and `server CPU %` (Triton's own processes) here, nvtop on the node?
# What this run shows:

# %%
common.what_this_run_shows(step, "raise throughput", "largest instance count")

# %% [markdown]
# **Expected on the GPU node** (the original lab's P100 run,
# [snippets/triton.md](https://github.com/teaching-on-testbeds/serve-system-chi/blob/main/snippets/triton.md);
# figures in docs/decisions/2026-11-24-gpu-expectations.md): 1 → 2+2 instances took concurrency 8
# from 52 to 193 infer/s and its latency from 152 ms to 41 ms, some queuing left (8 clients, 4
# instances) and compute per request longer as instances share a GPU; 4+4 went down to 119 infer/s
# with the GPUs still not full: the Python backend's per-request overhead was the limit. On another
# GPU the limit can be elsewhere: the notes this lab was rebuilt from report 87 → 148 → 336 infer/s
# for 1 → 2 → 4 instances on one H100 at concurrency 16, from a run whose rows were not kept: the
# reference below holds none of it (same note). Whether 4+4 beats 2+2 depends on the GPU at hand.

# %%
common.reference("triton", triton_steps.TRITON_COLUMNS, rules=step,
                 effects=["raise throughput", "largest instance count"], step="instance_scaling")

# %% [markdown]
# ## The threads lesson
# Two instances (on GPU 0 on the node), once with the cores shared out between them
# (`CPU_THREADS="auto"`, the lab's setting) and once with the framework's default (`"default"`:
# every instance's PyTorch uses every core). The instance count is one change; the threads are
# the next, one line of the config each. Where the cores are oversubscribed, throughput swings too far
# from window to window for perf_analyzer's stability band: both settings take the band the preset
# gives rate levels (`rate_stability_pct`), and the verdict weighs the windows' spread as noise. Where
# that band accepts any spread (the quick preset), it bounds nothing: a difference inside it is one this
# run cannot show, and the verdict says so.
#
# **Predict.** Two instances, each using every core, against two instances with one share of the
# cores each: which serves more, and by how much?

# %%
triton_steps.set_instances(triton, "food_classifier", count=2, kind="KIND_GPU", gpus=[0], threads="auto")

# %% [markdown]
# One change: `CPU_THREADS` from `"auto"` to `"default"`. Watch the stubs' thread counts in the
# view the measuring cell prints first.

# %%
triton_steps.set_instances(triton, "food_classifier", count=2, kind="KIND_GPU", gpus=[0],
                           threads="default")  # change me: "auto", "default", or a number of threads

# %%
default_threads = step.measure_threads(triton, "food_classifier", P)
default_threads

# %% [markdown]
# And back to `"auto"`, the cores shared out between the two instances:

# %%
triton_steps.set_instances(triton, "food_classifier", count=2, kind="KIND_GPU", gpus=[0], threads="auto")

# %%
split_threads = step.measure_threads(triton, "food_classifier", P)
split_threads

# %% [markdown]
# On a two-core CPU the split-threads configuration (two instances, the cores shared out) is the one
# step 2 measured: where the run has that repeat, the verdict weighs the gap between its two readings
# as noise, beside each level's own windows.

# %%
common.what_this_run_shows(step, "thread")

# %%
triton_steps.triton_down(stack)

# %% [markdown]
# **Try:** set `scaling_concurrency = 16` in the parameters cell and run the notebook again. With
# twice the clients, does the step where throughput stops changing move, and what happens to p99
# at each step?

# %% [markdown]
# ## Questions
# 1. Did the largest instance count serve more than the middle one in this run? Which resource was
#    the limit?
# 2. What did the framework's default threads do to two instances sharing the cores, and why?
# 3. Adding an instance adds work in parallel only if something was idle. What was idle at each
#    step, and how can you tell from the numbers above?
