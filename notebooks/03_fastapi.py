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
# # 3. A FastAPI inference service
#
# The GourmetGram web app used to load the model itself. Now it sends each uploaded image
# (base64 inside JSON) to a separate **inference service**. Splitting them lets each scale on
# its own: the web tier by users, the inference tier by compute.
#
# The service loads the Food-11 model once at start; for every `POST /predict` it decodes the
# image, preprocesses it (resize, crop, normalise), runs the model and answers with the label
# and its probability. On a GPU host, Docker Compose runs three containers: the service, a
# Jupyter server and the Flask app. On `local` they are plain processes on 127.0.0.1.

# %% tags=["parameters"]
target = None  # local | docker; None: $SERVELAB_TARGET (docker in the node's Jupyter, see 02) or local
preset = "quick"
seq_requests = None  # None: preset (full: 100)
conc_requests = None  # None: preset (full: 1000)
concurrency = None  # None: 16
flask_requests = None  # None: preset
fastapi_workers = None  # None: one per core on a CPU, half the cores on a GPU (2 to 8)

# %%
from servelab.lab import common, exercise, gourmetgram, params
from servelab.lab import step03_fastapi as step

P = params.resolve(target, preset, seq_requests=seq_requests, conc_requests=conc_requests,
                   concurrency=concurrency, flask_requests=flask_requests, fastapi_workers=fastapi_workers)
P

# %% [markdown]
# ## The endpoint
# This is the code the service runs for every `POST /predict` — the part you would write to
# serve any model over HTTP: the request body FastAPI checks first (a body of the wrong shape
# never reaches the function: the client gets HTTP 422 with a message), decoding and
# preprocessing, the model call, the answer.

# %%
common.show_code("servelab/serving/http.py", "PredictRequest", "PredictResponse")
common.show_code("servelab/serving/endpoint.py", "decode_and_preprocess", "add_predict")

# %% [markdown]
# **Not the naive server you may picture.** `running.batcher.predict` does not run the model on
# the request's own thread. Decoding runs in a thread pool; the forward pass runs on *inference
# workers* (one per core on a CPU, one on a GPU), and a worker that finds several preprocessed
# requests waiting runs them as **one batch** (up to `MAX_BATCH`). So the baseline you compare
# Triton with already batches opportunistically and spreads work over the cores. The worker's
# loop and the service module `uvicorn` starts are in the appendix at the end.
#
# ## Bring up the PyTorch service
# On `local` the lab starts the same command a Dockerfile's `CMD` runs (uvicorn, through the lab's
# small launcher `servelab.serving.serve`, with the app module); on the GPU node it is a
# `docker compose up` of the FastAPI stack. Either way the command is printed.

# %%
stack = common.open_stack(P)
api = step.fastapi_up(stack, "pt")
api

# %% [markdown]
# ## Try it
# One request with a sample photo, as the web app would send it. Besides the answer, the service
# sends a `Server-Timing` header: how long this request spent in each stage inside the service
# (your browser's developer tools draw it as a timeline under *Network → Timing*). We come back
# to it below.

# %%
step.try_predict(api)

# %% [markdown]
# The service documents itself at `/docs` (Swagger UI; the cell after next prints its address).
# Open it in a browser, expand `POST /predict`, press *Try it out* and paste a body. Its example
# body holds a tiny generated image; for a real photo the body needs the photo's bytes as base64
# text, which this cell makes (abridged on screen; `print(image_b64)` shows all of it to copy):

# %%
import base64

from servelab.core.samples import sample_paths

image_b64 = base64.b64encode(sample_paths()[1].read_bytes()).decode("ascii")  # the photo's bytes as text
print(f'{{"image": "{image_b64[:40]}…"}}  ({len(image_b64):,} characters in all)')

# %%
step.docs_page(api)

# %% [markdown]
# **Predict.** One client sends a request only after the previous answer came back: its median
# latency is about one request's service time. With 16 clients, will the median latency be four times
# one client's or more? Set your guess to "yes" or "no".

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step, "FastAPI pt: with many clients the median latency", guess)

# %% [markdown]
# ## One client: sequential requests
# Each request waits for the previous answer, so no request of this client ever waits behind
# another. The median is the service time; p95/p99 show its spread. (The client's loop is in the
# appendix.)

# %%
pt_seq = step.fastapi_sequential(api, P)
pt_seq

# %% [markdown]
# ## Sixteen clients at once
# Now `concurrency` clients send as fast as they get answers. Whatever the server cannot start at
# once waits in its queue.

# %%
pt_conc = step.fastapi_concurrent(api, P)
pt_conc

# %% [markdown]
# ## The web app in front of this service
# GourmetGram (Flask) is configured by environment variables alone (`PREDICT_BACKEND=fastapi`,
# `FASTAPI_SERVER_URL`) to post each upload to the inference service. This is its client call:

# %%
common.show_code("flask_app/backends.py", "FastAPIBackend._classify")

# %% [markdown]
# We upload sample photos through the app's API, as a browser would: each upload costs the
# app's own work (reading, checking and storing the file) plus one call to this service.

# %%
flask = gourmetgram.flask_up(stack, "fastapi")
gourmetgram.flask_uploads(flask, P, step="fastapi_pt")

# %% [markdown]
# ## The same service with ONNX Runtime
# Same API, same preprocessing, but the model runs in ONNX Runtime, a graph runtime optimised
# for inference, instead of eager PyTorch.
#
# One setting differs on purpose, and the tables show it (`max batch`): each service runs with the
# `MAX_BATCH` chosen for its engine and device — PyTorch 2 on a CPU and 16 on a GPU, ONNX Runtime
# 1 on both. The measurements behind those choices are in
# docs/decisions/2026-11-22-fastapi-max-batch-per-device.md. So this compares each engine with its
# own chosen setting; to compare them at one batch size, set the environment variable `MAX_BATCH`
# for both services.

# %%
step.fastapi_down(stack)
api = step.fastapi_up(stack, "onnx")
step.try_predict(api)

# %%
onnx_seq = step.fastapi_sequential(api, P)
onnx_seq

# %%
onnx_conc = step.fastapi_concurrent(api, P)
onnx_conc

# %% [markdown]
# ## The web app, now backed by the ONNX service
# The same app and the same configuration: it now reaches the ONNX Runtime service. Compare its
# upload times with the PyTorch-backed ones above (`gourmetgram.flask_summary()` below lists both).

# %%
flask = gourmetgram.flask_up(stack, "fastapi")
gourmetgram.flask_uploads(flask, P, step="fastapi_onnx")

# %%
gourmetgram.flask_summary()

# %% [markdown]
# Open the app's page in a browser to try your own photo (on the GPU node: port 80).
#
# ## Watching the service as a dashboard would
# The service counts every request and times it, and exposes the counters at `/metrics` in
# Prometheus' text format — what a Prometheus server scrapes and a Grafana dashboard plots.
# The raw lines for `/predict` first:

# %%
from servelab.lab import monitoring

lines = monitoring.show_metrics(f"{api.url}/metrics", ["http_request", "inference_batch"],
                                contains="/predict")

# %% [markdown]
# Now the same clients again, sending about five seconds' worth of requests at the rate just
# measured, with `/metrics` scraped every half second. Each point is computed the way a
# dashboard's `rate()` panel does, from the change between two scrapes: requests per second, the
# mean latency of the requests that finished in that interval, and the requests in flight.

# %%
monitoring.monitor_fastapi(api, P, expected_rate=onnx_conc["throughput_rps"].iloc[0])

# %% [markdown]
# ## PyTorch vs ONNX Runtime
# Left: latency percentiles for one client and for many. Right: throughput.

# %%
step.fastapi_summary()

# %%
step.plot_fastapi()

# %% [markdown]
# ## Where a request's time goes
# Throughput and percentiles say how long a request took, not where its milliseconds went. The
# service times each request stage by stage, on one clock, each stage ending where the next
# begins: `parse` (read the body, parse the JSON, validate it, decode the base64),
# `preprocess_wait` (wait for a preprocessing thread), `preprocess` (decode the image, resize,
# crop, normalise), `batch_wait` (wait for an inference worker and the batch it runs),
# `inference` (the forward pass of that batch) and `response` (back on the event loop: label,
# probability, the JSON answer). The endpoint above laps the timer (`watch.lap(...)`); so do the
# preprocessing thread and the inference worker. This is the timer:

# %%
common.show_code("servelab/serving/stages.py", "Stopwatch")

# %% [markdown]
# Every answer carries the stages in its `Server-Timing` header, and the service adds each served
# request's stages to one Prometheus histogram, `predict_stage_seconds`, with a `stage` label: a
# dashboard divides each stage's `_sum` by its `_count` for the mean. Its lines for the requests
# the ONNX service served so far:

# %%
lines = monitoring.show_metrics(f"{api.url}/metrics", ["predict_stage_seconds"])

# %% [markdown]
# The benchmark's client read the header of every answer, so each measurement above has a mean
# per stage; `outside` is what the client measured beyond the service's own total (the client,
# the network, uvicorn reading the request off the socket).
#
# **Predict.** With one client, which stage takes the longest? With 16 clients a request takes
# many times longer: which stage absorbs the extra time on this machine? (A queue forms in front of
# the step that cannot keep up: the verdict below names the part of a request whose time changed
# the most from one client to 16.) Will it be inference (the forward pass and the wait for it) here,
# on a machine whose model computes on the CPU? Set your guess to "yes" or "no".

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step, "FastAPI stages (pt): with many clients, inference bounds throughput on a CPU", guess)

# %%
step.stage_breakdown()

# %%
step.plot_stages()

# %% [markdown]
# ## One process vs N
# Triton's answer to a model that cannot keep up was to run several instances of it (notebook
# 05). A Python web service's answer is several **worker processes**: `WORKERS=N` starts N copies
# of the service on one port (uvicorn's supervisor starts them, and replaces one that dies; the
# kernel hands each new connection to one of them). Each process loads its own copy of the model,
# takes its share of the cores (its threads are divided by N, so that N processes do not
# oversubscribe the machine: the lesson of 05's threads per instance), and has its own event loop
# and its own Python interpreter lock. Each one also sees only the requests of its own
# connections: what does that do to the batches it can form? The same trade as instance groups.
#
# **Predict.** On this machine, will N processes serve at least 1.2 times the requests per second of
# one? Set your guess to "yes" or "no". (What happens to the mean batch per forward pass? On a GPU node
# with many cores, where one process keeps one Python interpreter busy while the GPU waits, what should
# change?)

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "no"
### END SOLUTION
exercise.predict(step, "FastAPI worker processes (pt): with many clients N serve at least 1.2", guess)

# %% [markdown]
# First the model alone, without a server: the rate that bounds every service on this machine
# (preprocessing one image per core, and the model at its fastest batch size).

# %%
ceiling = step.model_ceiling("pt", P)

# %% [markdown]
# Now the PyTorch service again, with N worker processes, and the same two loads. The service reads
# its number of worker processes from its environment, `WORKERS` (on a Docker host:
# `WORKERS=4 docker compose … up`, or a `WORKERS=4` line in the stack's `.env` file). The lab
# suggests an N for this machine first; then write the service's setting, as that line, in the cell
# after.

# %%
step.fastapi_down(stack)
n = step.workers_for_n(P)

# %%
settings = f"""
### BEGIN SOLUTION
WORKERS={n}
### END SOLUTION
"""
workers = step.workers_in(settings)
api = step.fastapi_up(stack, "pt", workers=workers)

# %%
exercise.check(step, "your service runs more than one worker process", workers > 1,
               f"write WORKERS={n} (a line of the service's settings) in the cell above and run it again",
               f"WORKERS={workers}")

# %%
pt_n_seq = step.fastapi_sequential(api, P)
pt_n_seq

# %%
pt_n_conc = step.fastapi_concurrent(api, P, ceiling_rps=ceiling)
pt_n_conc

# %%
step.one_vs_n()

# %% [markdown]
# The stages again, the N-process measurements now beside the others (their line is above):

# %%
step.plot_stages(say=False)

# %% [markdown]
# **What to look for.** With one client, is the median close to the time one forward pass takes?
# With 16 clients, how many such times does a request wait, and does ONNX Runtime change that
# ratio or only the time itself? Which stage grew, and what did N processes change: the
# throughput, the batches, the stage that grew? What this run shows:

# %%
common.what_this_run_shows(step)

# %%
exercise.compare(step, "FastAPI pt: with many clients the median latency")
exercise.compare(step, "FastAPI stages (pt): with many clients, inference bounds throughput on a CPU")
exercise.compare(step, "FastAPI worker processes (pt): with many clients N serve at least 1.2")

# %% [markdown]
# **Expected on the GPU node** (the original lab's run on a P100,
# [snippets/fastapi.md](https://github.com/teaching-on-testbeds/serve-system-chi/blob/main/snippets/fastapi.md);
# figures in docs/decisions/2026-11-24-gpu-expectations.md): one client, median 17 ms with PyTorch
# and 9 ms with ONNX Runtime (the P100 is too old for ONNX Runtime's TensorRT provider, so the
# original calls its gain modest); with 16 senders requests wait in the queue behind each other.
#
# **Expected on the GPU node**, where the time goes (reasoned from the lab's H100 reference run,
# `results/reference/h100/README.md`; the arithmetic in
# docs/decisions/2026-11-28-fastapi-stages-and-workers.md): the stage that bounds throughput should be
# preprocessing, not inference. That run served 250 requests/s to 16
# clients with one process: 0.11 of the 2,284 images/s its model alone reached at batch 16. At
# 250 requests/s its 5.84 ms of preprocessing per image is about 1.5 cores of work, all in one
# Python process, while the whole 16-core host was about one core busy. So N worker processes
# should raise throughput several-fold there (the goal: 0.6 of the ceiling). That run predates the
# stage timings and the processes, so it shows neither yet.

# %%
common.reference("fastapi", step.FASTAPI_COLUMNS, rules=step)

# %%
step.fastapi_down(stack)

# %% [markdown]
# **Try:** set `concurrency = 4` in the parameters cell and run the notebook again. Does the
# median with 4 clients come out near four times one client's, as one queue in front of one
# worker would make it? What do the inference workers (one per core) change in that arithmetic?

# %% [markdown]
# ## Questions
# 1. With 16 clients, which part of a request's latency grew: the model's time or the time
#    spent waiting? Which numbers above tell you?
# 2. Which engine answered one client sooner in this run, and by what factor? Does that ratio
#    survive with 16 clients?
# 3. The web app calls the inference service over HTTP instead of loading the model itself.
#    Name one thing this makes possible and one thing it costs.
# 4. Which stage bounded throughput here, and which should bound it on the GPU node? What did each
#    of the N processes give up for the others?

# %% [markdown] tags=["answer"]
# **Your answer to 1.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
one, many = pt_seq.iloc[-1], pt_conc.iloc[-1]
exercise.model_answer(1, f"with PyTorch one client's median was {one['median_ms']:.1f} ms and "
                         f"{many['concurrency']:.0f} clients' {many['median_ms']:.1f} ms "
                         f"({many['median_ms'] / one['median_ms']:.1f} times) while the service's throughput "
                         f"went from {one['throughput_rps']:.1f} to {many['throughput_rps']:.1f} requests/s: "
                         "the model's time per request is about what one client sees, so the rest of the "
                         "concurrent median is waiting for a worker (the stage table below splits it).")

# %% [markdown] tags=["answer"]
# **Your answer to 2.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
ratio_one = pt_seq["median_ms"].iloc[-1] / onnx_seq["median_ms"].iloc[-1]
ratio_many = pt_conc["median_ms"].iloc[-1] / onnx_conc["median_ms"].iloc[-1]
exercise.model_answer(2, f"{'ONNX Runtime' if ratio_one > 1 else 'PyTorch'} answered one client sooner: "
                         f"medians {pt_seq['median_ms'].iloc[-1]:.1f} ms (PyTorch) and "
                         f"{onnx_seq['median_ms'].iloc[-1]:.1f} ms (ONNX Runtime), a ratio of "
                         f"{ratio_one:.2f}; with many clients the ratio was {ratio_many:.2f}, since the "
                         "queue "
                         "multiplies each engine's own service time.")

# %% [markdown] tags=["answer"]
# **Your answer to 3.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
flask_rows = gourmetgram.flask_summary()
exercise.model_answer(3, "it lets each tier scale on its own (more web workers for users, more inference "
                         "processes or GPUs for compute) and swap the model server without touching the app; "
                         "it costs a network hop, base64 and JSON encoding on every upload: the app's "
                         f"uploads took {flask_rows['median_ms'].iloc[0]:.1f} ms at the median against the "
                         f"service's own {pt_seq['median_ms'].iloc[-1]:.1f} ms.")

# %% [markdown] tags=["answer"]
# **Your answer to 4.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
said = exercise.evidence(step, "FastAPI stages (pt): with many clients, inference bounds throughput on a CPU")
exercise.model_answer(4, f"this run: {said}. On the GPU node preprocessing in one Python process should "
                         "bound it (the H100 reasoning in "
                         "docs/decisions/2026-11-28-fastapi-stages-and-workers.md). "
                         f"Each of the {workers} processes gave up its share of the cores and the batches it "
                         "could have formed from the other processes' requests.")

# %% [markdown]
# ## Appendix: the micro-batcher, the client's loop, the service module
# The inference worker's loop (`servelab/serving/batcher.py`): take the first waiting job plus its
# share of what else waits, run them as one batch, hand each request its row of the result.

# %%
common.show_code("servelab/serving/batcher.py", "MicroBatcher._take_batch", "MicroBatcher._run_batch")

# %% [markdown]
# The client behind every measurement above: one client sends a request, waits for the answer and
# sends the next; the concurrent run starts `concurrency` such clients as threads sharing one
# counter. Latency is measured per request, on the client, from send to answer.

# %%
common.show_code("servelab/bench/client.py", "run_concurrent")

# %% [markdown]
# The service module `uvicorn` starts: it names the model file and the engine, and `create_app`
# adds the endpoint, `/health`, `/metrics` and the model loading at start-up.

# %%
common.show_code("fastapi_pt/app.py")

# %% [markdown]
# How the service starts with `WORKERS` processes (`python -m servelab.serving.serve
# fastapi_pt.app:app --port 8000`, also the images' `CMD`): the port is bound first, so a taken
# port stops it with one line, then uvicorn runs one process, or a supervisor of N.

# %%
common.show_code("servelab/serving/serve.py", "serve")
