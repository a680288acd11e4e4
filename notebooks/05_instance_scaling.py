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
from servelab.lab import common, exercise, params, triton_edits, triton_steps
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
# `gpus` is empty and `count` is the number of instances. Write these values in the cells below.

# %%
plan = step.instance_plan(stack, P)
plan

# %% [markdown]
# ## Each step: you change the config, then measure
# Each step is two cells. In the first you write the `instance_group` of `food_classifier`'s
# `config.pbtxt`, as text, as you would in the file: the lab parses it as Triton does (a typo is
# refused with its line, and the model keeps serving its last good config), writes it over that block
# of the live config (the diff is printed), reloads the model through Triton's API and prints what is
# live — seconds, with no restart and no image rebuild. Each cell holds the node's values; on another
# target write the plan's `count` for your step (`KIND_GPU` on a machine without a GPU becomes
# `KIND_CPU`, and the lab says so). The second cell shows what now runs on the server (one stub process
# per Python-backend instance; `nvidia-smi` on the GPU node) and runs perf_analyzer at
# `scaling_concurrency`.
#
# **Predict.** At concurrency 8, will more instances serve more inferences per second than one? Will
# the largest instance count serve no more than the middle one? Set each guess to "yes" or "no".

# %% tags=["prediction"]
guess_more, guess_largest = None, None  # "yes" or "no" each
### BEGIN SOLUTION
guess_more, guess_largest = "yes", "yes"
### END SOLUTION
exercise.predict(step, "More instances raise throughput", guess_more)
exercise.predict(step, "The largest instance count is no better than the middle one", guess_largest)

# %% [markdown]
# ### Step 1: one instance

# %%
triton_edits.edit_config(triton, "food_classifier", """
instance_group [
  {
    ### BEGIN SOLUTION
    count: 1
    ### END SOLUTION
    kind: KIND_GPU
    gpus: [ 0 ]
  }
]
""")

# %% [markdown]
# **On the GPU node, now look at nvtop** while the next cell runs, and again at each step below:
# how busy is each GPU, and how much memory does each instance hold?

# %%
one = step.measure_instances(triton, "food_classifier", P)
one

# %% [markdown]
# ### Step 2: 2 on each of two GPUs on the node (2 on GPU 0 with one GPU; as many as the cores on a CPU)

# %%
triton_edits.edit_config(triton, "food_classifier", """
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
two = step.measure_instances(triton, "food_classifier", P)
two

# %% [markdown]
# ### Step 3: 4 on each GPU on the node (4 on GPU 0 with one GPU; twice the cores on a CPU)

# %%
triton_edits.edit_config(triton, "food_classifier", """
instance_group [
  {
    ### BEGIN SOLUTION
    count: 4
    gpus: [ 0, 1 ]
    ### END SOLUTION
    kind: KIND_GPU
  }
]
""")

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
triton_edits.check_levels(scaling, step, "instances", 3,
                          "write a different count in each step's instance_group above (the plan's) and run "
                          "the steps again")

# %%
step.plot_scaling(scaling, title="Python backend: instances vs latency and throughput")

# %% [markdown]
# **What to look for.** How did throughput and p99 at concurrency 8 change from step to step, and
# where did they stop changing? Which resource was busy at each step: `CPU %` (the whole machine,
# the load generator included) and `server CPU %` (Triton's own processes) here, nvtop on the node?
# What this run shows:

# %%
common.what_this_run_shows(step, "raise throughput", "largest instance count")

# %%
exercise.compare(step, "More instances raise throughput")
exercise.compare(step, "The largest instance count is no better than the middle one")

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
# cores each: will the one share each serve more? Set your guess to "yes" or "no".

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step, "one thread each beats", guess)

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
exercise.compare(step, "one thread each beats")

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

# %% [markdown] tags=["answer"]
# **Your answer to 1.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
by = scaling.reset_index(drop=True)
best = by.loc[by["throughput"].idxmax()]
exercise.model_answer(1, "; ".join(f"{r['instances']}: {r['throughput']:.1f} infer/s, "
                                   f"p99 {r['p99_ms']:.0f} ms, CPU {r['cpu_util_pct']:.0f} %"
                                   for _, r in by.iterrows())
                      + f". The most was {best['instances']}"
                      + (": the largest count served no more than the middle one, so the limit was the "
                         "machine (the cores, on a CPU; the Python backend's per-request overhead on the "
                         "P100)" if by["throughput"].iloc[-1] <= 1.05 * by["throughput"].iloc[1] else
                         ": the largest count still served more, so a resource was still idle at the "
                         "middle one"))

# %% [markdown] tags=["answer"]
# **Your answer to 2.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
d, a = default_threads.iloc[-1], split_threads.iloc[-1]
exercise.model_answer(2, f"two instances with the framework's default threads ({d['threads']:g} each) served "
                         f"{d['throughput']:.1f} infer/s, with the cores shared out ({a['threads']:g} each) "
                         f"{a['throughput']:.1f}: with default threads every instance starts a thread per "
                         "core, so two instances run twice as many threads as cores and they preempt each "
                         "other (and spin waiting); one share each keeps one thread per core.")

# %% [markdown] tags=["answer"]
# **Your answer to 3.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
exercise.model_answer(3, "; ".join(f"{r['instances']}: {step.cpu_reading(r)}, queue {r['queue_ms']:.1f} ms"
                                   for _, r in scaling.iterrows())
                      + ". Where the CPU reading was well under its whole and requests queued, cores were "
                        "idle and another instance could use them; once it is near its whole, an instance "
                        "only takes cores from the others.")
