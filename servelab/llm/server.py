"""Start and stop the LLM engine: a lab-managed process on 127.0.0.1 (like uvicorn and Triton), or its
compose stack on a GPU host (:func:`start_engine_compose`, target ``docker``).

:func:`start_engine` runs ``python -m servelab.llm.engine`` (``transformers serve``'s app behind the
lab's front), waits for ``/health`` and then for one warm-up completion (continuous batching sets
up its KV cache on the first request), each wait with a timeout that names it, and stops the process
if either fails. ``HF_HUB_OFFLINE=1`` unless ``SERVELAB_LLM`` names a Hub model: nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servelab.core.compose import explain_up_failure, file_args, gpu_runtime, up_args
from servelab.core.paths import REPO_ROOT
from servelab.core.procs import ManagedProcess, WaitTimeoutError, free_port
from servelab.llm.client import STATS_PATH, parse_stats
from servelab.llm.model import LLM_VARIABLE, is_hub_id, served_name
from servelab.llm.validation import CB_BLOCK_SIZE, CB_MAX_BATCH_TOKENS, CB_NUM_BLOCKS
from servelab.results.store import results_dir


@dataclass
class EngineOptions:
    """How the engine batches: ``continuous`` (KV cache of ``cb_num_blocks`` × ``cb_block_size`` tokens),
    ``static`` (``max_batch`` requests run to the longest) or ``off`` (one request at a time). The cache's
    defaults are the engine's own (servelab/llm/engine.py), so options left alone start the engine the
    command docs/guides/by-hand.md gives starts."""

    batching: str = "continuous"
    max_batch: int = 8
    cb_num_blocks: int | None = CB_NUM_BLOCKS
    cb_block_size: int | None = CB_BLOCK_SIZE
    cb_max_batch_tokens: int | None = CB_MAX_BATCH_TOKENS

    def argv(self) -> list[str]:
        """The engine's flags for these options: only those that differ from its defaults."""
        args = ["--batching", self.batching]
        if self.batching == "static":
            args += ["--max-batch", str(self.max_batch)]
        if self.batching == "continuous":
            for flag, value, default in (
                    ("--cb-num-blocks", self.cb_num_blocks, CB_NUM_BLOCKS),
                    ("--cb-block-size", self.cb_block_size, CB_BLOCK_SIZE),
                    ("--cb-max-batch-tokens", self.cb_max_batch_tokens, CB_MAX_BATCH_TOKENS)):
                if value is not None and value != default:
                    args += [flag, str(value)]
        return args


@dataclass
class Engine:
    """A running engine: where it answers, what it serves, the command that started it."""

    url: str
    model: str
    options: EngineOptions
    command: list[str]
    process: ManagedProcess | None = field(default=None, repr=False)
    stop_argv: list[str] | None = field(default=None, repr=False)  # compose: how to bring it down
    run: Any = field(default=None, repr=False)
    kind: str = "transformers"  # or "vllm" (servelab.llm.vllm)
    stats_path: str = STATS_PATH  # the lab front's statistics, or vLLM's Prometheus /metrics

    def __repr__(self) -> str:
        """What a notebook shows of it: kind, batching and URL (its command is printed when it starts, with
        no machine's paths: ``short_command``), not the dataclass's fields."""
        return f"{self.kind} engine, {self.options.batching} batching, at {self.url}"

    @property
    def command_line(self) -> str:
        return shlex.join(self.command)

    def stats(self) -> dict[str, Any]:
        """Sequences running and waiting, the KV cache's free share (``parse_stats``)."""
        with urllib.request.urlopen(f"{self.url}{self.stats_path}", timeout=5) as response:
            return parse_stats(self.stats_path, response.read().decode())

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
        if self.stop_argv is not None:
            (self.run or subprocess.run)(self.stop_argv, cwd=REPO_ROOT, capture_output=True, text=True,
                                         timeout=120, check=True)
            self.stop_argv = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _repr_html_(self) -> str:
        return f"<b>LLM engine ({self.options.batching} batching)</b> at <code>{self.url}</code>"


def engine_env() -> dict[str, str]:
    """Offline unless ``SERVELAB_LLM`` names a Hub id (a path or the built model needs no network)."""
    hub = is_hub_id(os.environ.get(LLM_VARIABLE, ""))
    return {} if hub else {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def post_json(url: str, body: dict[str, Any], timeout: float) -> tuple[int, dict[str, Any]]:
    """POST ``body``; the status and the JSON answer (errors included, not raised)."""
    request = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(json.loads(response.read()))
    except urllib.error.HTTPError as error:
        return error.code, dict(json.loads(error.read() or b"{}"))


COMPOSE_FILE = "docker/docker-compose-llm.yaml"
COMPOSE_PROJECT = "servelab-llm"
COMPOSE_PORT = 8010  # published on the GPU host (8000 is FastAPI's and Triton's)


def compose_argv(options: EngineOptions, *args: str) -> list[str]:
    """``docker compose`` for the engine's stack on a GPU host, its settings as an ``env`` prefix."""
    st = os.stat(REPO_ROOT)
    variables = {"HOST_UID": str(st.st_uid), "HOST_GID": str(st.st_gid), "LLM_BATCHING": options.batching,
                 "LLM_MAX_BATCH": str(options.max_batch),
                 "LLM_KV_BLOCKS": str(options.cb_num_blocks or CB_NUM_BLOCKS)}
    if os.environ.get(LLM_VARIABLE):  # as the client names it: a Hub id, or a path in the checkout
        variables[LLM_VARIABLE] = served_name()
    prefix = ["env", *(f"{k}={v}" for k, v in sorted(variables.items()))]
    return [*prefix, "docker", "compose", "-p", COMPOSE_PROJECT, *file_args(COMPOSE_FILE, gpu_runtime()),
            *args]


def start_engine_compose(options: EngineOptions | None = None, timeout: float = 600.0,
                         run: Any = subprocess.run) -> Engine:
    """The engine in its compose stack on this Docker host (target ``docker``): started from its built
    image, healthy (``--wait``), warmed up. ``Engine.stop`` brings the stack down."""
    options = options or EngineOptions()
    up = compose_argv(options, *up_args(timeout))
    return compose_up(Engine(f"http://localhost:{COMPOSE_PORT}", served_name(), options, up,
                             stop_argv=compose_argv(options, "down", "--timeout", "30"), run=run), timeout,
                      logs_argv=compose_argv(options, "logs", "--tail", "40", "llm_server"))


def compose_up(engine: Engine, timeout: float, logs_argv: list[str] | None = None) -> Engine:
    """Run ``engine.command`` (a ``docker compose … up --wait``), then one warm-up completion. On a
    failure the stack is brought down (its last log lines, from ``logs_argv``, kept first) and the
    error names the failed step."""
    run = engine.run or subprocess.run
    done = run(engine.command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout + 120,
               check=False)

    def said(argv: list[str]) -> tuple[int, str]:
        more = run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
        return more.returncode, (more.stdout or "") + (more.stderr or "")

    if done.returncode != 0:
        compose = engine.command[:engine.command.index("up")]
        problem = (f"`{shlex.join(engine.command)}` failed (exit {done.returncode}): "
                   + explain_up_failure("the LLM engine's stack", (done.stderr or "") + (done.stdout or ""),
                                        compose, said))
        logs_argv = None  # the explanation carries the failed services' log lines
    else:
        status, answer = post_json(f"{engine.url}/v1/completions",
                                   {"model": engine.model, "prompt": "warm up", "max_tokens": 2}, timeout)
        if status == 200:
            return engine
        problem = f"the engine's warm-up completion answered HTTP {status}: {answer}"
    if logs_argv is not None:
        logs = run(logs_argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
        problem += f"\nits log ended with:\n{(logs.stdout + logs.stderr)[-2000:]}"
    if engine.stop_argv is not None:  # best effort: the error above is what matters
        run(engine.stop_argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
        engine.stop_argv = None
    raise RuntimeError(problem)


def start_engine(options: EngineOptions | None = None, port: int | None = None, log_dir: Path | None = None,
                 timeout: float = 180.0) -> Engine:
    """Start the engine on 127.0.0.1, wait until it answers and has generated once; stop it on failure."""
    options = options or EngineOptions()
    port = port or free_port()
    model = served_name()
    command = [sys.executable, "-m", "servelab.llm.engine", model, *options.argv(),
               "--host", "127.0.0.1", "--port", str(port)]
    log = Path(log_dir or results_dir() / "logs") / f"llm-{options.batching}-{port}.log"
    process = ManagedProcess(f"llm engine ({options.batching})", command, log, env=engine_env(),
                             cwd=REPO_ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        process.wait_http(f"{url}/health", timeout)
        status, answer = post_json(f"{url}/v1/completions",
                                   {"model": served_name(), "prompt": "warm up", "max_tokens": 2}, timeout)
        if status != 200:
            raise WaitTimeoutError(f"the engine's warm-up completion answered HTTP {status}: {answer}")
    except BaseException:
        process.stop()
        raise
    return Engine(url, served_name(), options, command, process)


# ----------------------------------------------------------------------------- shown in notebook 09

def short_command(command: list[str]) -> str:
    """A command as a student would type it: ``python`` for this interpreter, paths relative to the repo,
    no machine's absolute paths (``servelab.core.paths.shown``: the run's folder, the venv, home)."""
    from servelab.core.paths import shown

    return shown(shlex.join(["python" if c == sys.executable else _relative(c) for c in command]))


def _relative(path: str) -> str:
    return os.path.relpath(path, REPO_ROOT) if path.startswith(str(REPO_ROOT)) else path


def transformers_serve_command(engine: Engine) -> str:
    """The plain ``transformers serve`` command the lab's engine wraps (same app, no front)."""
    o = engine.options
    flags = ["--continuous-batching", "--cb-num-blocks", str(o.cb_num_blocks), "--cb-block-size",
             str(o.cb_block_size), "--cb-max-batch-tokens", str(o.cb_max_batch_tokens)] \
        if o.batching == "continuous" else []
    return shlex.join(["transformers", "serve", _relative(engine.model), *flags,
                       "--host", "127.0.0.1", "--port", "8000"])


def try_request(engine: Engine, prompt: str = "the chef prepares", max_tokens: int = 12) -> None:
    """One streamed request, shown as the curl command and the server-sent events it answers with."""
    import httpx

    body = {"model": engine.model, "prompt": prompt, "max_tokens": max_tokens, "stream": True}
    print(f"$ curl -N {engine.url}/v1/completions -H 'content-type: application/json' "
          f"-d '{json.dumps(body)}'")
    text = []
    with httpx.Client(timeout=60) as client, client.stream("POST", f"{engine.url}/v1/completions",
                                                            json=body) as response:
        for i, line in enumerate(ln for ln in response.iter_lines() if ln):
            if i < 3:
                print(line)
            elif i == 3:
                print("...")
            if line.startswith("data: {"):
                text += [c.get("text", "") for c in json.loads(line[6:]).get("choices", [])]
    print(f"\nprompt: {prompt!r}\nanswer: {''.join(text)!r}")


def refused(engine: Engine) -> Any:
    """What the engine answers to bad requests: an empty prompt, an absurd max_tokens, another model
    (a DataFrame)."""
    import pandas as pd

    cases = {"empty prompt": {"prompt": "", "max_tokens": 4},
             "max_tokens=10**9": {"prompt": "the chef", "max_tokens": 10**9},
             "wrong model": {"model": "gpt-4", "prompt": "the chef", "max_tokens": 4}}
    rows = []
    for name, body in cases.items():
        status, answer = post_json(f"{engine.url}/v1/completions", {"model": engine.model, **body}, 30)
        rows.append({"request": name, "status": status, "message": answer.get("error", {}).get("message")})
    return pd.DataFrame(rows)
