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
# # 10. Scaling out: replicas, autoscaling on queue depth, load shedding
#
# Notebook 05 added instances inside one Triton server. Production systems also scale the other
# way: **several replicas of the whole server behind a router**, added and removed as the load changes,
# and a rule for what to do when load outruns every replica. This notebook serves the Food-11 ONNX
# model with **Ray Serve**: a distributed serving engine whose HTTP proxy routes each request to a
# replica, whose autoscaler watches the **ongoing requests per replica** (requests being computed
# plus those waiting: the queue depth), and whose deployments can bound their queue.
#
# The idea Ray Serve's autoscaler is built on (it adds replicas to keep the ongoing requests per replica
# near `target_ongoing_requests`: Ray Serve's autoscaling guide) is to **scale on queue depth, not only on
# utilisation**: a busy processor with an empty queue is doing its job; a queue that keeps lengthening is
# a missing replica. Here the two are measured side by side.
#
# **On this machine** (the `local` target) every replica, Serve's proxy, its controller and the load
# generator share the same CPU cores, so a second replica competes with the first for cores. So the
# notebook first measures what a second replica buys here at all (one fixed replica, then two), and
# judges the autoscaled runs against both. Every rate below is a fraction of the capacity of one replica
# measured here, as in notebook 07, and the load generator runs in a process of its own. Ray is started
# by this notebook and stopped at its end; it does not need the notebooks before it.

# %% tags=["parameters"]
target = None  # local; None: $SERVELAB_TARGET or local
preset = "quick"
scaling_phase_seconds = None  # step load: seconds of low, high, low load
scaling_rate_fractions = None  # step load: [low, high] rates as fractions of one replica's capacity
scaling_max_replicas = None  # autoscaling: max_replicas, and N of the fixed-N run
scaling_queue_limit = None  # shedding: max_queued_requests
scaling_overload_fraction = None  # shedding: the overload rate, as a fraction of one replica's capacity
scaling_overload_seconds = None  # shedding: seconds of overload per run
ray_address = None  # a cluster made with `ray start` to join ("auto"); None: $RAY_ADDRESS, else its own

# %%
from servelab.lab import common, exercise, params, step10_report
from servelab.lab import step10_scaling_out as step
from servelab.lab import step10_triton_queue as triton_queue

P = params.resolve(target, preset, scaling_phase_seconds=scaling_phase_seconds,
                   scaling_rate_fractions=scaling_rate_fractions, scaling_max_replicas=scaling_max_replicas,
                   scaling_queue_limit=scaling_queue_limit,
                   scaling_overload_fraction=scaling_overload_fraction,
                   scaling_overload_seconds=scaling_overload_seconds, ray_address=ray_address)
P

# %% [markdown]
# ## The deployment
# A Ray Serve deployment is a class: Serve runs one copy of it per replica and sends it HTTP
# requests. Each replica loads the ONNX model with one ONNX Runtime thread, computes one request at
# a time off its event loop (so it keeps reporting its queue while it computes), and answers with
# the label, the request's id and its own replica id: the load generator checks that every answer
# belongs to its request.

# %%
common.show_code("servelab/scaling/app.py", "Food11")

# %%
cluster = step.cluster_up(P)
photos = step.bodies()

# %% [markdown]
# ## The autoscaling config, as data
# The policy is a small record: between `min_replicas` and `max_replicas`, aim for
# `target_ongoing_requests` per replica, wait `upscale_delay_s` before adding a replica and
# `downscale_delay_s` before removing one. `max_ongoing_requests` is how many requests the router
# hands one replica at once (set high here: the queue then forms inside the replica, where the
# autoscaler counts it; the decision note says why), and `max_queued_requests` bounds the queue in
# front of them (-1: no bound). You write the autoscaling fields, in YAML, as they sit under a deployment
# of a Serve config file (`serve deploy config.yaml`): `min_replicas: 1`, `max_replicas` (the
# parameters table's `scaling_max_replicas`), `target_ongoing_requests: 2`, `upscale_delay_s: 1`,
# `downscale_delay_s: 3`, `look_back_period_s: 1` and `metrics_interval_s: 0.5`. Ray Serve's own
# `AutoscalingConfig` checks them; the cell after shows the record exactly as Ray Serve is handed it: the
# keyword arguments of `Deployment.options`.
#
# **Two windows decide how soon the controller can see a queue.** Each replica (and Serve's proxy)
# pushes its count of ongoing requests to Serve's controller every `metrics_interval_s`; the
# controller averages the counts it received over the last `look_back_period_s`. The look-back window
# must be the longer of the two, or it holds one push at most (Ray warns, and a later release will
# refuse it). After a step in the load, the queue reaches the controller within one push interval,
# fills the averaging window within one look-back period, and must then stay above the target for
# `upscale_delay_s`: only then is a replica started, and it serves once its process is up and its
# model loaded. So a replica starts within `metrics_interval_s` + `look_back_period_s` +
# `upscale_delay_s` of the step, and serves after its own start-up on top. Ray's defaults are 10 s,
# 30 s and 30 s (and 600 s before removing one): a replica may start up to 70 s after the step. Here
# they are 0.5 s, 1 s and 1 s (the table below), so that the whole experiment fits in a minute or two
# (docs/decisions/2026-11-28-lessons-third-pass.md). Below it, the same policy as a Kubernetes
# HorizontalPodAutoscaler and a KEDA ScaledObject, and a table that maps each field to its Kubernetes
# counterpart.

# %%
autoscaling = """
### BEGIN SOLUTION
autoscaling_config:
  min_replicas: 1
  max_replicas: 2
  target_ongoing_requests: 2
  upscale_delay_s: 1
  downscale_delay_s: 3
  look_back_period_s: 1
  metrics_interval_s: 0.5
### END SOLUTION
"""
auto = step.policy_from(autoscaling, P)
auto.deployment_options()

# %%
exercise.check(step10_report, "your autoscaling config can add a replica", auto.fixed is None
               and auto.max_replicas > auto.min_replicas,
               "write an autoscaling_config with max_replicas above min_replicas in the cell above and run "
               "it again", f"{auto.min_replicas} to {auto.max_replicas} replicas")

# %%
step.show_policy(auto)

# %% [markdown]
# ## One replica's capacity
# One replica, four senders sending back to back, two windows of 2 s: the answers per second set
# the rates of everything that follows.

# %%
rate = step.capacity(cluster, P, photos)
phases = step.step_phases(rate, P)

# %% [markdown]
# ## The baseline: a step load on one fixed replica
# Poisson arrivals at `scaling_rate_fractions[0]` of one replica's capacity, then
# `scaling_rate_fractions[1]` of it, then low again (`scaling_phase_seconds` each). Every second the
# notebook samples the replica count, the requests in flight (per replica: the queue depth the
# autoscaler sees), p50 and p99 of the requests that finished in that second, and the CPU (and the
# GPU, where there is one). Every time below is given from one origin, the step (the moment the high
# load starts: 0 on the plots' axis); dashed lines mark the moments the replica count changed.
#
# First one fixed replica, no autoscaling: the run every autoscaled one is compared with.
#
# **Predict.** The high phase asks for `scaling_rate_fractions[1]` times what one replica served above.
# What share of it will one replica answer, and how many requests will be in flight as it ends? Against
# it, will the autoscaled run that follows end the high phase with a smaller backlog, at a lower p99?
# Set your guess to "yes" or "no".

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step10_report, "Autoscaled on queue depth, the high phase ends with less in flight", guess)

# %%
fixed_one = step.step_load(cluster, step.policy(P, fixed=1), phases, photos)
step.plot_timeline(fixed_one, title="step load, one fixed replica")

# %% [markdown]
# ## What a second replica buys on this machine
# The same step load on `scaling_max_replicas` fixed replicas, running from the start: the most any
# autoscaled run here could reach, since its added replica only starts after the step.
#
# **Predict.** With two replicas sharing this machine's cores with Serve's proxy and the load generator,
# how many requests will be in flight as the high phase ends, next to one fixed replica's? Will the two
# end it with fewer in flight, beyond the noise? Set your guess to "yes" or "no".

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "no"
### END SOLUTION
exercise.predict(step10_report, "a second replica serves more on this machine", guess)

# %%
fixed_n = step.step_load(cluster, step.policy(P, fixed=P.scaling_max_replicas), phases, photos)
step.plot_timeline(fixed_one, fixed_n, title="one fixed replica against two")

# %% [markdown]
# ## The same step load, autoscaled on queue depth
# One change: the autoscaling config above instead of fixed replicas.
#
# The lesson needs two things of the run. The high phase must outrun one replica (the line printed
# above says what share of it one replica answered). And the fixed runs above must show that a second
# replica adds capacity on this machine at all (does it?). Where either is missing, the verdicts below
# read "cannot show here" and say why; otherwise they read observed or NOT observed from the numbers.
# Under each verdict (click it open) are the numbers in full, its preconditions ("needs:") and what the
# added replica cost while it started: starting one (a process, its imports, the model) takes cores,
# and on a small machine it takes them from the replica that is serving.
#
# **Predict.** How long after the step will the second replica start, and start serving? What happens
# to the backlog (requests in flight) and to p99 in the meantime, and after it? Will the replica start
# within `metrics_interval_s` + `look_back_period_s` + `upscale_delay_s` of the step? Once it serves, will
# the backlog grow more slowly than one fixed replica's did over the same seconds (the run above)? Set
# each guess to "yes" or "no". (It shrinks outright only if two replicas outpace the load: the fixed runs
# above say whether they do on this machine.)

# %% tags=["prediction"]
guess_0, guess_1 = None, None  # "yes" or "no" each
### BEGIN SOLUTION
guess_0, guess_1 = "yes", "yes"
### END SOLUTION
exercise.predict(step10_report, "Autoscaling on queue depth starts a replica within", guess_0)
exercise.predict(step10_report, "Once the added replica serves, the backlog grows more slowly", guess_1)

# %%
queue_run = step.step_load(cluster, auto, phases, photos)
step.plot_timeline(fixed_one, queue_run, title="step load, autoscaled on queue depth")

# %%
common.what_this_run_shows(step10_report, "starts a replica within", "the backlog grows more slowly",
                           "Autoscaled on queue depth")

# %%
exercise.compare(step10_report, "a second replica serves more on this machine")
exercise.compare(step10_report, "Autoscaled on queue depth, the high phase ends with less in flight")
exercise.compare(step10_report, "Autoscaling on queue depth starts a replica within")
exercise.compare(step10_report, "Once the added replica serves, the backlog grows more slowly")

# %% [markdown]
# ## A replica dies
# Two fixed replicas under light load; 2 s in, one replica's process is killed (SIGKILL, as in a
# crash; `ray.kill` when the notebook joined a cluster it did not start). Serve's controller notices
# through its health checks (every `health_check_period_s`) and starts a replacement.
#
# Only the requests the replica holds at the moment of the kill can be lost; under this light load
# there may be none at that moment, and then the verdict says the run cannot show their fate.
#
# **Predict.** What happens to requests routed to the dead replica? How long until two replicas run
# again: will a new replica answer within a minute of the kill? Set your guess to "yes" or "no".

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step10_report, "A killed replica is replaced", guess)

# %%
step.kill_one(cluster, P, rate, photos)

# %%
common.what_this_run_shows(step10_report, "killed")

# %%
exercise.compare(step10_report, "A killed replica is replaced")

# %% [markdown]
# ## Queue depth vs utilisation
# The same step load, with one change: a custom autoscaling policy
# (`servelab/scaling/config.py`, `utilisation_policy`) that scales on CPU utilisation the way a
# Kubernetes HPA on `cpu` would: desired replicas = `ceil(replicas * utilisation / target)`, held
# for the same delays. The utilisation it reads is the replica processes' busy cores per running
# replica (one ONNX Runtime thread each: one busy core is a full replica), as an HPA reads its pods' CPU;
# Serve's proxy and the load generator, on the same cores, are not counted.
#
# **Predict.** Which policy will add its replica first after the step: will the replica autoscaling on
# queue depth adds serve no later than the one autoscaling on utilisation adds? Set your guess to "yes"
# or "no". (Which one removes it first once the load is low again is not asked here: the verdicts judge
# the replica each policy adds, and no run of the quick preset was seen to remove one.)

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step10_report, "Autoscaling on queue depth has its added replica serving no later", guess)

# %%
common.show_code("servelab/scaling/config.py", "utilisation_policy")

# %%
util_run = step.step_load(cluster, step.policy(P, policy="utilisation"), phases, photos)
step.plot_timeline(queue_run, util_run, title="queue depth vs utilisation")

# %%
common.what_this_run_shows(step10_report, "CPU utilisation")

# %%
exercise.compare(step10_report, "Autoscaling on queue depth has its added replica serving no later")

# %% [markdown]
# ## Fixed vs autoscaled
# The four runs side by side. The cost of a run is its **replica-seconds**: replicas summed over time,
# what a cloud bill counts. Its **goodput** (`goodput_rps`) is the requests answered with a 200 per
# second of the run, from its first request to its last answer: a refused or timed-out request does
# not count.
#
# **Predict.** Which of the four serves the high phase with the lowest p99, and which ends it with the
# fewest requests in flight? Will the autoscaled run cost fewer replica-seconds than the fixed N
# replicas? Set your guess to "yes" or "no".

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step10_report, "Autoscaling costs fewer replica-seconds than", guess)

# %%
step.plot_timeline(fixed_one, fixed_n, queue_run, title="fixed vs autoscaled")

# %%
step.summaries("step")

# %%
common.what_this_run_shows(step10_report, "replica-seconds")

# %% [markdown]
# ## The same control loop where compute leaves the CPU: a device stand-in
# On this machine a replica computes on the cores that Serve's proxy, the load generator and a starting
# replica need too, so what an added replica buys depends on what else runs. On the GPU node a replica
# computes on its GPU share instead. To see the control loop alone, the next two runs use a **device
# stand-in**: each replica still loads the model and answers its labels, but instead of computing it
# waits the model's forward pass, measured here first, off the CPU, as a GPU's would be. It is not a
# measurement of the model: every label, table and verdict says "stand-in". Its own capacity sets its
# rates, as above.
#
# **Predict.** On the stand-in, will the autoscaled run end the high phase with fewer requests in
# flight, and a lower p99, than one fixed replica? Set your guess to "yes" or "no".

# %% tags=["prediction"]
guess_stand_in = None  # "yes" or "no"
### BEGIN SOLUTION
guess_stand_in = "yes"
### END SOLUTION
exercise.predict(step10_report, "On the device stand-in, autoscaled on queue depth", guess_stand_in)

# %%
wait_ms = step.stand_in_ms()
stand_in_rate = step.capacity(cluster, P, photos, device_ms=wait_ms)
stand_in_phases = step.step_phases(stand_in_rate, P)
fixed_one_stand_in = step.step_load(cluster, step.policy(P, fixed=1, device_ms=wait_ms), stand_in_phases,
                                    photos)

# %%
queue_stand_in = step.step_load(cluster, step.policy(P, device_ms=wait_ms), stand_in_phases, photos)
step.plot_timeline(fixed_one_stand_in, queue_stand_in, title="device stand-in: fixed 1 against autoscaled")

# %%
common.what_this_run_shows(step10_report, "device stand-in")

# %%
exercise.compare(step10_report, "On the device stand-in, autoscaled on queue depth")

# %%
exercise.compare(step10_report, "Autoscaling costs fewer replica-seconds than")

# %% [markdown]
# ## Load past capacity: shed instead of queueing
# One replica, `scaling_overload_fraction` times its capacity for `scaling_overload_seconds`: first
# with an unbounded queue, then with `max_queued_requests = scaling_queue_limit` (and two requests
# at a time per replica). Past the bound, Serve answers **503 at once**, with a message, instead of
# letting the request wait. The client can retry elsewhere or later; the requests it accepts wait
# behind at most the bound.
#
# **Predict.** With the bound, what fraction of requests will be refused? Will the accepted requests'
# p99 be lower than with the unbounded queue? Set your guess to "yes" or "no". (And the goodput?)

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step10_report, "With max_queued_requests set, accepted requests' p99 is lower", guess)

# %%
step.shedding(cluster, rate, P, photos)

# %%
common.what_this_run_shows(step10_report, "max_queued_requests")

# %%
exercise.compare(step10_report, "With max_queued_requests set, accepted requests' p99 is lower")

# %% [markdown]
# Triton, which the Triton notebooks use, has the same idea in its model config: a queue policy on the
# dynamic batcher with two limits. A request that finds `max_queue_size` requests waiting is refused
# on arrival; one that has waited `default_timeout_microseconds` in the queue is refused then, so its
# answer comes only after that wait. The output names which limit refused each. The cell below brings up
# this target's Triton with the ONNX model (as notebooks 06 and 07 do) and sends one burst of 32
# concurrent requests, first with dynamic batching alone, then with the policy: each config change
# is shown as a diff (`servelab/lab/step10_triton_queue.py`). Triton is stopped again afterwards.
#
# **Predict.** How many of the 32 will Triton refuse, and by which limit: the queue of 4, or the
# 100 ms waiting limit? Will it refuse part of the burst that the unbounded queue accepts whole? Set your
# guess to "yes" or "no". (How long will a refused request wait for its answer, next to Ray's 503s?)

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step10_report, "Triton's rejecting queue policy refuses part of a burst", guess)

# %%
print(step.TRITON_QUEUE_POLICY)
triton_rows = triton_queue.measure(P)

# %%
common.what_this_run_shows(step10_report, "Triton")

# %%
exercise.compare(step10_report, "Triton's rejecting queue policy refuses part of a burst")

# %%
step.stop(cluster)

# %% [markdown]
# ## Where it goes next
# **On the GPU node.** Where the Ray cluster has GPUs (the node's Jupyter container, which compose
# gives the GPUs), `step.policy` asks for `num_gpus: 0.5` per replica (the `num_gpus` row of the
# config above): Ray then places two replicas on each of the node's two P100s, four in all, and the
# same autoscaling config adds and removes them. Each replica then runs ONNX Runtime's CUDA provider
# on its share (`Food11` above; it refuses to start on a GPU share it cannot use). Where Ray counts
# no GPU (the line printed when Ray started says how many it counted), the config asks for none.
#
# **Across nodes.** Ray joins machines into one cluster: `ray start --head --port=6379` on the first
# node, `ray start --address=<head ip>:6379` on each other one. Set `ray_address = "auto"` in the
# parameters cell (on the head node) and this notebook joins that cluster instead of starting its own:
# Serve places replicas on any node with room, runs a proxy on every node, and the cluster outlives
# the notebook (`ray stop` on each node ends it). Provisioning's plan for two reserved nodes (plan
# mode, `python -m provisioning plan --nodes 2`: nothing is created; running it is not automated):

# %%
step.multi_node_plan(nodes=2)

# %% [markdown]
# **Expected on the GPU node** (source: docs/decisions/2026-11-23-ray-serve.md, section "Expected
# on the GPU node"): each replica then has its own GPU share instead of a share of two CPU cores,
# so replicas stop competing for the same cores, and the autoscaler's added replica adds capacity
# up to the GPUs' limit.

# %%
common.reference("scaling", step.SUMMARY_COLUMNS, rules=step10_report, kind="step")

# %% [markdown]
# **Try:** set `scaling_rate_fractions = [0.5, 2.0]` in the parameters cell and run the notebook
# again: does the autoscaled run still keep up during the high phase, and at what p99? Then set
# `scaling_queue_limit = 1`: what share of requests is refused now?

# %% [markdown]
# ## Questions
# 1. How many seconds after the step did the autoscaler start the second replica in this run, and how
#    many until it served? Which settings of the config make up the first time (`metrics_interval_s`,
#    `look_back_period_s`, `upscale_delay_s`), and what makes up the rest?
# 2. During those seconds, what did p99 do, and why do requests that arrive after the replica is
#    added still wait?
# 3. Which policy reacted first, queue depth or utilisation? On a machine where the proxy and the
#    load generator share the cores with the replicas, what does CPU utilisation measure?
# 4. Compare one fixed replica, N fixed replicas and the autoscaled runs: requests in flight as the high
#    phase ended, p99, goodput, replica-seconds. What did the added replica cost while it started (the
#    details under the verdicts)? Which would you run in production, and with which windows and delays?
# 5. With the queue bounded, what did a refused request get, and how long did it wait for it? Why is a
#    fast 503 better for a client than a slow answer after its own timeout?
# 6. A replica was killed: how long until it was replaced, and what did the requests meanwhile get?
#    What would you want a client to do with them?

# %% [markdown] tags=["answer"]
# **Your answer to 1.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
said = exercise.evidence(step10_report, 'Autoscaling on queue depth starts a replica within')
exercise.model_answer(1, f"this run: {said}. "
                         "the settings add up to the longest the controller can take to act: a push "
                         "interval for the queue to reach it, a look-back to average it and the upscale "
                         "delay to hold it; the rest, up to serving, is the replica's own start: a "
                         "process, the model loaded.")

# %% [markdown] tags=["answer"]
# **Your answer to 2.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
said = exercise.evidence(step10_report, 'Once the added replica serves, the backlog grows more slowly')
exercise.model_answer(2, f"this run: {said}. "
                         "p99 climbs while one replica serves a load it cannot keep up with; requests that "
                         "arrive after the new replica starts still queue behind the backlog the first one "
                         "built up, so p99 falls only as that backlog drains.")

# %% [markdown] tags=["answer"]
# **Your answer to 3.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
said = exercise.evidence(step10_report, 'Autoscaling on queue depth has its added replica serving no later')
exercise.model_answer(3, f"this run: {said}. "
                         "where the proxy and the load generator share the cores with the replicas, CPU "
                         "utilisation measures the machine's load, not the replicas' queue: a busy core "
                         "with an empty queue and a lengthening queue look alike to it.")

# %% [markdown] tags=["answer"]
# **Your answer to 4.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
said = exercise.evidence(step10_report, 'Autoscaling costs fewer replica-seconds than')
exercise.model_answer(4, f"this run: {said}. "
                         "weigh requests in flight as the high phase ends, p99, goodput and "
                         "replica-seconds from the table above; the 'needs:' lines say whether a second "
                         "replica serves more on this machine at all. In production: autoscaling on "
                         "queue depth, with windows and delays short enough to follow the load's steps and "
                         "a minimum that covers the base load.")

# %% [markdown] tags=["answer"]
# **Your answer to 5.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
said = exercise.evidence(step10_report, "With max_queued_requests set, accepted requests' p99 is lower")
exercise.model_answer(5, f"this run: {said}. "
                         "a refused request got a 503 with a message at once, instead of an answer after a "
                         "wait it would not survive: a client can retry elsewhere or later at once, while a "
                         "slow answer after its own timeout costs it the whole wait and the server the work.")

# %% [markdown] tags=["answer"]
# **Your answer to 6.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
said = exercise.evidence(step10_report, 'A killed replica is replaced')
exercise.model_answer(6, f"this run: {said}. "
                         "the requests in flight on the killed replica can fail; later ones go to a live "
                         "replica. A client should retry an idempotent request that failed that way, with "
                         "a backoff.")
