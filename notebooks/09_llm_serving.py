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
# # 9. Serving a language model: prefill, decode, static and continuous batching
#
# Notebook 07 batched image requests, each the same work: one image in, one label out. A language
# model is different. A request is **one prefill** (the whole prompt in one forward pass, which produces
# the first token) and then **many decode steps** (one forward pass per further token, each
# reading the KV cache of everything before it). Requests ask for very different numbers of
# tokens, so how an engine batches them matters:
#
# - **static batching** takes a batch of waiting requests and runs it until its *longest* request
#   is done; short requests sit in the batch, and new arrivals wait for the next batch;
# - **continuous (in-flight) batching** re-forms the batch at every decode step: a finished
#   sequence leaves, a waiting one joins (its prefill runs alongside the others' decode steps);
# - a **paged KV cache** holds the keys and values of every running sequence in fixed-size blocks:
#   its size decides how many sequences can run at once.
#
# The numbers that matter are **time to first token** (TTFT: request sent → first token),
# **inter-token latency** (ITL: each gap between a request's later tokens, pooled over a load run's
# requests) and **output tokens/s**. For one request sent alone, the lab reports the mean of its gaps:
# its **time per output token** (TPOT), the same gaps averaged per request.
#
# The model is the lab's own: a 4-layer Llama-shaped model (hidden size 256, a 458-token
# vocabulary), built by set-up with a tokenizer trained here and a few seconds of training on text
# the lab generates, saved in the Hugging Face layout (`artifacts/llm/`). With internet,
# `SERVELAB_LLM=<hub id or path>` serves a real small model instead. The engine is
# `transformers serve`: Hugging Face's OpenAI-compatible server. This notebook starts and stops
# its own engine; it does not need the notebooks before it.

# %% tags=["parameters"]
target = None  # local (a process here) | docker (docker-compose-llm.yaml); None: $SERVELAB_TARGET or local
preset = "quick"
llm_single_repeats = None  # single requests per prompt length
llm_short_prompt = None  # tokens in the short prompt (about: a prompt is whole words)
llm_long_prompt = None  # tokens in the long prompt (about: the engine counts them)
llm_single_tokens = None  # output tokens per single request
llm_requests = None  # requests per load level
llm_output_lengths = None  # [shortest, longest] output tokens asked (mixed lengths)
llm_equal_length = None  # output tokens asked by every request (equal lengths)
llm_rate_fractions = None  # load levels, as multiples of the one-at-a-time rate
llm_max_batch = None  # static batching: requests per batch
llm_kv_blocks = None  # continuous batching: KV cache blocks (32 tokens each)
llm_small_kv_blocks = None  # the smaller cache of the last experiment

# %%
from servelab.lab import common, exercise, params, step09_views, step09_vllm
from servelab.lab import step09_llm_serving as step

P = params.resolve(target, preset, llm_single_repeats=llm_single_repeats, llm_short_prompt=llm_short_prompt,
                   llm_long_prompt=llm_long_prompt, llm_single_tokens=llm_single_tokens,
                   llm_requests=llm_requests, llm_output_lengths=llm_output_lengths,
                   llm_equal_length=llm_equal_length, llm_rate_fractions=llm_rate_fractions,
                   llm_max_batch=llm_max_batch, llm_kv_blocks=llm_kv_blocks,
                   llm_small_kv_blocks=llm_small_kv_blocks)
P

# %% [markdown]
# ## The engine
# `transformers serve MODEL --continuous-batching` builds a FastAPI app with `/v1/completions`,
# `/v1/chat/completions` and `/docs`. The lab starts that same app with a thin front of its own in
# the same process (`servelab/llm/engine.py`): the front refuses bad requests with a 4xx and a
# message, reports the engine's own statistics at `/lab/stats` (sequences running, waiting, KV
# cache free) and adds static batching, which `transformers serve` does not have. The front's code
# is in the appendix at the end. The command printed below is the one `docs/guides/by-hand.md` gives
# (with a host and a port):
# the engine's own defaults are the lab's KV cache (48 blocks of 32 tokens), and `python -m
# servelab.llm.engine --help` says what each cache flag costs in memory.

# %%
engine = step.engine_up(P, "continuous")
print("the same app without the lab's front:\n$", step.transformers_serve_command(engine))
engine

# %% [markdown]
# One request, streamed: each server-sent event carries one token. Open `/docs` at the engine's
# URL to try the API by hand.

# %%
step.try_request(engine)

# %%
step.refused(engine)

# %% [markdown]
# ## One request: prefill vs decode
# One request at a time, first with a short prompt (`llm_short_prompt` tokens), then with a long one
# (`llm_long_prompt`), each asking for `llm_single_tokens` tokens. Per length, one untimed request
# warms the engine up, then `llm_single_repeats` timed ones follow, each with a prompt the engine has
# not seen: the engine keeps the KV blocks of earlier prompts (prefix caching), and a prompt it has
# seen may skip its prefill. At the end the last long prompt is sent again: compare its first token.
# A prompt is made of whole words of the lab's text, so the warm-up's own token count (the engine's)
# sizes the timed prompts to the asked length; the table's `prompt_tokens` is what the engine counted.
# `tpot_ms` is the time per output token: the mean gap between a request's streamed tokens after its
# first; `ttft_ms` the time to its first token.
#
# **Predict.** How many times longer is the long prompt than the short one? Will its first token come
# later than the short prompt's? (Will it take that many times longer? Will each *later* token take
# longer too?) Set your guess for the first token to "yes" or "no".

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step, "a long prompt's time to first token exceeds a short one's", guess)

# %%
single = step.one_request(engine, P)
single

# %%
step.plot_single(single)

# %%
common.what_this_run_shows(step, "prefill")

# %%
exercise.compare(step, "a long prompt's time to first token exceeds a short one's")

# %% [markdown]
# ## Many requests: Poisson arrivals, mixed output lengths
# Requests arrive at random (Poisson) at `llm_rate_fractions` load levels, each asking for between
# `llm_output_lengths[0]` and `llm_output_lengths[1]` tokens. The rates are multiples of what the
# engine serves one request at a time, measured above, so the experiment means the same on a GPU.
# The load generator is the lab's streaming client; its command is printed before each run.

# %%
rate = step.sequential_rate(single, P)

# %% [markdown]
# **Predict.** With continuous batching, what happens to TTFT as the rate rises past one-at-a-time
# capacity? How many sequences will run at once? And against static batching, measured next: at the
# highest rate, with mixed output lengths, will continuous batching's TTFT p99 be lower than static
# batching's? Set your guess to "yes" or "no".

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step, "continuous batching's TTFT p99 is lower than static's", guess)

# %%
continuous = step.rate_sweep(engine, P, rate)
step.show(continuous)

# %% [markdown]
# ## Equal output lengths (continuous batching)
# The same top rate, every request asking for the same number of tokens.

# %%
continuous_equal = step.equal_lengths(engine, P, rate)
step.show(continuous_equal)

# %%
engine.stop()

# %% [markdown]
# ## Static batching
# One change: the engine now batches statically — up to `llm_max_batch` waiting requests run
# together until the longest is done (`servelab/llm/static_batcher.py`, `StaticBatcher`).

# %%
common.show_code("servelab/llm/static_batcher.py", "StaticBatcher")

# %% [markdown]
# The engine takes its batching mode on its command line (`python -m servelab.llm.engine MODEL
# --batching MODE`, as printed when it started above). Write the flag that makes it batch statically:

# %%
flags = """
### BEGIN SOLUTION
--batching static
### END SOLUTION
"""
batching = step09_views.batching_in(flags)
engine = step.engine_up(P, batching)

# %%
exercise.check(step, "your engine batches statically", batching == "static",
               f"it batches {batching}: write --batching static in the cell above and run it again",
               "--batching static")

# %% [markdown]
# **Predict.** With mixed output lengths, will continuous batching give more output tokens/s than
# static batching at the highest rate? Set your guess to "yes" or "no". (Which requests wait longest
# for their first token?)

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step, "continuous batching gives more output tokens/s than static", guess)

# %%
static = step.rate_sweep(engine, P, rate)
step.show(static)

# %%
step.plot_batching(common.concat(continuous, static), single)

# %%
common.what_this_run_shows(step, "mixed output lengths")

# %%
exercise.compare(step, "continuous batching's TTFT p99 is lower than static's")
exercise.compare(step, "continuous batching gives more output tokens/s than static")

# %% [markdown]
# **Predict.** Now every request asks for the same number of tokens, so no row of a static batch
# idles while the longest finishes. Will static batching fare better against continuous batching than
# with mixed lengths (its tokens/s nearer continuous batching's)? Set your guess to "yes" or "no".

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step, "with equal output lengths static batching fares better against continuous", guess)

# %%
static_equal = step.equal_lengths(engine, P, rate)
step.gaps(common.concat(continuous_equal, static_equal), single)
step.show(common.concat(continuous_equal, static_equal))

# %%
common.what_this_run_shows(step, "equal output lengths")

# %%
exercise.compare(step, "with equal output lengths static batching fares better against continuous")

# %%
engine.stop()

# %% [markdown]
# ## The KV cache decides how many sequences run
# One change: continuous batching again, with a KV cache of `llm_small_kv_blocks` blocks of 32
# tokens instead of `llm_kv_blocks`. The engine's own statistics, sampled every 0.1 s during
# the run, say how many sequences were running and how many were waiting for cache room.
#
# **Predict.** At the top rate, will the smaller cache hold fewer sequences at once, with requests
# waiting for room? Set your guess to "yes" or "no". (What happens to their TTFT?)

# %% tags=["prediction"]
guess = None  # "yes" or "no"
### BEGIN SOLUTION
guess = "yes"
### END SOLUTION
exercise.predict(step, "a smaller KV cache holds fewer sequences at once", guess)

# %%
engine = step.engine_up(P, "continuous", kv_blocks=P.llm_small_kv_blocks)
small = step.small_cache(engine, P, rate)
engine.stop()
step.show(small)

# %%
step.plot_kv(step.kv_rows(common.concat(continuous, small)))

# %%
common.what_this_run_shows(step, "KV cache")

# %%
exercise.compare(step, "a smaller KV cache holds fewer sequences at once")

# %% [markdown]
# ## The same load on vLLM (GPU hosts with compute capability 7.0 or higher)
# One change: the engine. vLLM serves the same model under the same name with the same
# OpenAI-compatible API, so the same client command measures it at the top rate with mixed lengths.
# It runs in the compose stack of a GPU host (`vllm_server` in `docker/docker-compose-llm.yaml`).
# Its CUDA kernels need compute capability 7.0 or higher, so the cell first asks the GPU
# (`nvidia-smi`); on the lab's P100 node (6.0) and on a CPU it says why it skips vLLM. Its
# statistics come from its Prometheus `/metrics`.
#
# On a GPU, vLLM pages its KV cache in GPU memory and replays decode steps as CUDA graphs. A question
# for a GPU with compute capability 7.0 or higher (a CPU and the P100 skip vLLM, so this run may not
# answer it): at the same rate, would it give more output tokens/s than the lab's engine, and run more
# sequences at once?

# %%
vllm_rows = step09_vllm.vllm_run(P, rate)
step09_vllm.compare(common.concat(continuous, vllm_rows))

# %% [markdown]
# **Expected on a GPU** (sources: Yu et al., "Orca: A Distributed Serving System for Transformer-Based
# Generative Models", OSDI 2022; Kwon et al., "Efficient Memory Management for Large Language Model
# Serving with PagedAttention", SOSP 2023; docs/decisions/2026-11-23-llm-serving.md): a decode step
# for many sequences costs little more than for one, so batching multiplies output tokens/s;
# continuous batching keeps the batch full while static batches idle behind their longest request,
# and the KV cache in GPU memory limits how many sequences run at once. On a GPU host,
# `docker/docker-compose-llm.yaml` runs this engine, and vLLM beside it where the GPU has compute
# capability 7.0 or higher.

# %%
common.reference("llm", step.LLM_SHOWN, rules=step, step=["mixed", "equal", "kv_cache"])

# %% [markdown]
# **Try:** set `llm_small_kv_blocks` (the parameters cell) to 24, halfway to `llm_kv_blocks`, and
# run the notebook again: in the KV cache plot, how many sequences now run at once with the smaller
# cache, how many wait, and where does its TTFT p99 land?

# %% [markdown]
# ## Questions
# 1. Did the long prompt's first token come later than the short one's, and by more or less than the
#    prompts' length ratio? If it did, which did the prompt's length delay more in this run, the first
#    token or each later token, and why? If the verdict was too noisy to call, how long does a prefill
#    of that many tokens take next to what every request pays anyway (the HTTP round trip, scheduling, the
#    first decode step)? Each timed prompt was new, so prefix caching did not hide it: the repeated
#    prompt's line shows what caching does when it applies.
# 2. With mixed output lengths, compare the two batchings' TTFT p99 and tokens/s at the top rate in
#    this run. Where does a static batch lose time, and did that show here? Compare their gaps between
#    tokens (ITL) too: how many sequences did each one's steps carry, and what did a step cost per
#    sequence, next to one request's TPOT?
# 3. With equal output lengths, did static batching's tokens/s move closer to continuous batching's
#    than with mixed lengths, and was there a gap to close? What does a static batch waste when
#    lengths differ, and what when they are equal?
# 4. With the smaller KV cache, how many sequences ran at once, and what happened to the others?
#    What would you change on a GPU with more memory?

# %% [markdown] tags=["answer"]
# **Your answer to 1.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
by_prompt = single.groupby("prompt")[["prompt_tokens", "ttft_ms", "tpot_ms"]].median()
short_p, long_p = by_prompt.loc["short"], by_prompt.loc["long"]
exercise.model_answer(1, f"the long prompt ({long_p['prompt_tokens']:.0f} tokens, "
                         f"{long_p['prompt_tokens'] / short_p['prompt_tokens']:.1f} times the short one's "
                         f"{short_p['prompt_tokens']:.0f}) had its first token after "
                         f"{long_p['ttft_ms']:.1f} ms "
                         f"at the median against {short_p['ttft_ms']:.1f} ms, and later tokens every "
                         f"{long_p['tpot_ms']:.1f} ms against {short_p['tpot_ms']:.1f} ms: the prompt's "
                         "length "
                         "is paid once, in the prefill (one forward pass over the whole prompt), while each "
                         "decode step reads the cache of a few hundred tokens more at most. Where the gap is "
                         "small, the prefill's cost is small next to the HTTP round trip and the first "
                         "decode step that every request pays.")

# %% [markdown] tags=["answer"]
# **Your answer to 2.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
c_top, s_top = continuous.iloc[-1], static.iloc[-1]
exercise.model_answer(2, f"at {c_top['rate']:.2f} requests/s continuous batching had TTFT p99 "
                         f"{c_top['ttft_p99_ms']:.0f} ms and {c_top['output_tokens_s']:.1f} tokens/s, static "
                         f"{s_top['ttft_p99_ms']:.0f} ms and {s_top['output_tokens_s']:.1f} tokens/s; gaps "
                         f"between tokens (ITL p50) {c_top['itl_p50_ms']:.1f} ms and "
                         f"{s_top['itl_p50_ms']:.1f} ms, with up to {c_top['max_running']:.0f} and "
                         f"{s_top['max_running']:.0f} sequences "
                         "per step: a static batch loses time while its short requests sit finished beside "
                         "the longest, and new arrivals wait for the whole batch to end.")

# %% [markdown] tags=["answer"]
# **Your answer to 3.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
ce, se = continuous_equal.iloc[-1], static_equal.iloc[-1]
mixed = s_top["output_tokens_s"] / c_top["output_tokens_s"]
equal = se["output_tokens_s"] / ce["output_tokens_s"]
exercise.model_answer(3, f"static over continuous tokens/s was {mixed:.2f} with mixed lengths and "
                         f"{equal:.2f} "
                         "with equal "
                         "ones: with mixed lengths a static batch wastes the steps its finished rows idle "
                         "through; with equal lengths it wastes only the wait of new arrivals for the next "
                         "batch.")

# %% [markdown] tags=["answer"]
# **Your answer to 4.**
# <!-- BEGIN SOLUTION -->
# The model answer, computed from this run, follows in the answer key.
# <!-- END SOLUTION -->

# %% tags=["answer-key"]
sm = small.iloc[-1]
exercise.model_answer(4, f"with {sm['kv_blocks']:.0f} blocks at most {sm['max_running']:.0f} sequences ran "
                         "at once "
                         f"and up to {sm['max_waiting']:.0f} waited for cache room (TTFT p99 "
                         f"{sm['ttft_p99_ms']:.0f} ms, against {c_top['max_running']:.0f} running with the "
                         "larger cache): a GPU with more memory holds more blocks, so more sequences decode "
                         "in each step; give the cache the memory the weights leave free.")

# %% [markdown]
# ## Appendix: the engine's front and the load generator
# Plumbing the measurements rely on, for the curious. The front checks every generation request
# before `transformers serve`'s handlers see it, answers the statistics the plots use and the model
# list OpenAI clients ask for, and ends the streams in flight when the engine is stopped:

# %%
common.show_code("servelab/llm/validation.py", "validate")
common.show_code("servelab/llm/front.py", "Front.__call__", "Front._generate")

# %% [markdown]
# The load generator is the lab's own streaming client (`python -m servelab.llm.client`). It uses the
# definitions of the common LLM benchmarks: TTFT = request sent → first token, ITL = the gaps between
# a request's later tokens, output tokens/s = all output tokens over the run's span. Each request is
# one streamed completion, each token's arrival timed:

# %%
common.show_code("servelab/llm/client.py", "stream_one")
