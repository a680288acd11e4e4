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
# # 5. More model instances
#
# At concurrency 8 one instance leaves seven requests waiting. Triton can run several copies
# of a model side by side: the **instance group** says how many and on which devices. On the
# GPU node the lab goes from 1 instance on GPU 0, to 2 on each GPU, to 4 on each GPU.
#
# On a CPU there are no GPUs to spread over: instances share the machine's cores. The counts
# are scaled to the cores (1, the number of cores, twice that), and a second lesson appears:
# **threads**. Each instance's PyTorch uses all cores by default, so two instances fight over
# them.

# %% tags=["parameters"]
target = None  # local | docker; None: $SERVELAB_TARGET (docker in the node's Jupyter, see 02) or local
preset = "quick"
instance_counts = None  # None: 1 → 2+2 → 4+4 on two GPUs; scaled to the cores on CPU
scaling_concurrency = None  # None: 8
window_requests = None  # requests per perf_analyzer window (None: preset)
settle = None  # "fixed" (one window per level) or "stable" (None: preset)
max_trials = None
stability_pct = None

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
plan = step.instance_plan(stack, P)
plan

# %% [markdown]
# ## Each step: change the config, reload, look, measure
# One step per cell. The config is edited as a protobuf and written back with its diff shown;
# the model is reloaded through Triton's API — live in seconds, with no restart and no image
# rebuild. Then the server's own view (one stub process per Python-backend instance on a CPU,
# `nvidia-smi` on the GPU node), then perf_analyzer at concurrency 8.

# %% [markdown]
# **Predict.** At concurrency 8, what will going from one instance to more do to throughput and
# to p99 latency? Where does it stop helping, and why?
#
# ### Step 1: one instance

# %%
one = step.instance_step(triton, "food_classifier", plan, 0, P)
one

# %% [markdown]
# ### Step 2: more instances (2+2 over two GPUs on the node)

# %%
two = step.instance_step(triton, "food_classifier", plan, 1, P)
two

# %% [markdown]
# ### Step 3: more again (4+4 on the node)

# %%
four = step.instance_step(triton, "food_classifier", plan, 2, P)
four

# %% [markdown]
# Any further steps of a longer `instance_counts` plan:

# %%
more = [step.instance_step(triton, "food_classifier", plan, i, P) for i in range(3, len(plan))]
scaling = common.concat(one, two, four, *more)
scaling

# %%
step.plot_scaling(scaling, title="Python backend: instances vs latency and throughput")

# %% [markdown]
# **What to look for (GPU node).** Going from 1 to 2+2 instances should cut latency at
# concurrency 8 and keep the GPUs busier, though some queuing stays (8 clients, 4 instances) and
# instances slow each other down. Whether 4+4 helps further depends on what limits the Python
# backend on that GPU: the original lab saw no gain on the P100s (per-request overhead), while a
# run of ours on an H100 measured 87 → 148 → 336 infer/s for 1 → 2 → 4 instances at concurrency
# 16. Let this run's numbers decide.
#
# **Reading it (CPU).** More instances than cores never helps. The `threads` column shows how
# many threads each instance was given: one thread per instance is what makes two instances
# work at all.

# %%
common.what_this_run_shows(step, "raise throughput", "largest instance count")

# %% [markdown]
# ## The threads lesson
# The same two instances, once with the framework's default threads (every instance uses
# every core) and once with the cores split between instances.

# %% [markdown]
# **Predict.** Two instances, each using every core, against two instances with one share of the
# cores each: which serves more, and by how much?

# %%
step.two_instances(triton, "food_classifier")

# %% [markdown]
# One change: `CPU_THREADS` from `auto` to `default` (each instance's PyTorch takes every core; the
# stubs' thread counts grow).

# %%
default_threads = step.threads_step(triton, "food_classifier", P, "default")
default_threads

# %% [markdown]
# And back: `CPU_THREADS=auto` shares the cores out between the two instances.

# %%
split_threads = step.threads_step(triton, "food_classifier", P, "split")
split_threads

# %%
common.what_this_run_shows(step, "thread")

# %%
triton_steps.triton_down(stack)

# %% [markdown]
# ## Questions
# 1. Why did (or didn't) 4 instances help over 2 in this run? Which resource was the limit?
# 2. What did the framework's default threads do to two instances sharing the cores, and why?
# 3. More instances raise throughput only while something sits idle. What was idle in each step?
