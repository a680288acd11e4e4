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
target = "local"  # local | docker (on the GPU node: in the node's Jupyter, see notebook 02)
preset = "quick"
seq_requests = None  # None: preset (full: 100)
conc_requests = None  # None: preset (full: 1000)
concurrency = None  # None: 16
flask_requests = None  # None: preset

# %%
from servelab.lab import common, gourmetgram, params
from servelab.lab import step03_fastapi as step

P = params.resolve(target, preset, seq_requests=seq_requests, conc_requests=conc_requests,
                   concurrency=concurrency, flask_requests=flask_requests)
P

# %% [markdown]
# ## Bring up the PyTorch service

# %%
stack = common.open_stack(P)
api = step.fastapi_up(stack, "pt")
api

# %% [markdown]
# ## Try it
# One request with a sample photo, as the web app would send it. The same service documents
# itself at `/docs` (Swagger UI): open it in a browser and use *Try it out* with a base64 image.

# %%
step.try_predict(api)

# %%
step.docs_page(api)

# %% [markdown]
# **Predict.** One client sends a request only after the previous answer came back. How should its
# median latency compare with the time the model takes for one image? What about with 16 clients?
#
# ## One client: sequential requests
# Each request waits for the previous answer, so nothing ever queues. The median is the
# service time; p95/p99 show how steady it is.

# %%
pt_seq = step.fastapi_sequential(api, P)
pt_seq

# %% [markdown]
# ## Sixteen clients at once
# Now `concurrency` clients send as fast as they get answers. The server can only work on so
# much at a time; the rest wait in a queue, and each request's latency grows with the number
# of clients ahead of it.

# %%
pt_conc = step.fastapi_concurrent(api, P)
pt_conc

# %% [markdown]
# ## The same service with ONNX Runtime
# Same API, same preprocessing, but the model runs in ONNX Runtime, a graph runtime optimised
# for inference, instead of eager PyTorch.

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
# ## PyTorch vs ONNX Runtime
# Left: latency percentiles for one client and for many. Right: throughput.

# %%
step.fastapi_summary()

# %%
step.plot_fastapi()

# %% [markdown]
# **What to look for.** With one client, latency is the service time. With many clients the
# median latency is several times the service time: the requests spend most of their life queued.
# A faster model shortens the queue but does not remove it. What this run shows:

# %%
common.what_this_run_shows(step)

# %% [markdown]
# ## The web app, backed by this service
# GourmetGram is configured (by environment variables, no code change) to post its uploads to
# the FastAPI service. We upload sample photos through its API, as a browser would.

# %%
flask = gourmetgram.flask_up(stack, "fastapi")
gourmetgram.flask_uploads(flask, P, step="fastapi_onnx")

# %% [markdown]
# Open the app's page in a browser to try your own photo (on the GPU node: port 80).

# %%
step.fastapi_down(stack)

# %% [markdown]
# ## Questions
# 1. With 16 clients, which part of a request's latency grew: the model's time or the time
#    spent waiting? Which numbers above tell you?
# 2. How many times faster is ONNX Runtime than PyTorch for one client here, and does that
#    ratio survive with 16 clients?
# 3. The web app calls the inference service over HTTP instead of loading the model itself.
#    Name one thing this makes possible and one thing it costs.
