"""Notebook parameters: presets and validation.

Every notebook's papermill ``parameters`` cell names a target, a preset and
the sizes of its work (request counts, windows, rates); sizes left at ``None``
take the preset's value, and ``target = None`` takes ``$SERVELAB_TARGET`` (the
node's Jupyter container sets ``docker``), else ``local``. A headless run passes
the target explicitly. The cell right after it calls :func:`resolve`, so a
typo or a nonsensical size fails *there*, with a message that says what to set
— not twenty minutes later inside a perf_analyzer run.

``quick`` is what CI runs (the whole lab in minutes on two cores); ``full`` is
for real measurements, with the seed lab's request counts.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from servelab.core.notices import SaidPlainly
from servelab.llm.validation import CB_BLOCK_SIZE, CB_NUM_BLOCKS
from servelab.targets.base import TARGETS
from servelab.triton.defaults import MAX_QUEUE_DELAY_US, PREFERRED_BATCH_SIZES

PRESETS = ("quick", "full")
TARGET_VARIABLE = "SERVELAB_TARGET"  # the target a notebook's `target = None` means, where it is set


class ParameterError(SaidPlainly, ValueError):
    """A notebook parameter is wrong; the message names it and says what to set."""


@dataclass(frozen=True)
class Spec:
    """One parameter: its preset values, how to check it, and what it means."""

    quick: Any
    full: Any
    check: Callable[[str, Any], None]
    meaning: str


def _int(low: int, high: int) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ParameterError(
                f"{name}={value!r} is not a whole number between {low} and {high}: "
                f"set {name} to such a number in the parameters cell (or None for the preset's value)"
            )
    return check


def _number(low: float, high: float) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float) or not low < value <= high:
            raise ParameterError(
                f"{name}={value!r} must be a number above {low} and at most {high}: "
                f"fix {name} in the parameters cell (or None for the preset's value)"
            )
    return check


def _list_of(item: Callable[[str, Any], None], min_len: int = 1,
             increasing: bool = False) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if not isinstance(value, list | tuple) or len(value) < min_len:
            raise ParameterError(
                f"{name}={value!r} must be a list of at least {min_len} value(s), e.g. [1, 8, 16]: "
                f"fix {name} in the parameters cell"
            )
        for i, element in enumerate(value):
            item(f"{name}[{i}]", element)
        if increasing and any(b <= a for a, b in pairwise(value)):
            raise ParameterError(
                f"{name}={value!r} must be strictly increasing: sort it in the parameters cell")
    return check


def _choice(*options: str) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if value not in options:
            raise ParameterError(f"{name}={value!r} is not one of {', '.join(map(repr, options))}: "
                                 f"set {name} to one of them in the parameters cell")
    return check


def _optional(inner: Callable[[str, Any], None]) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if value is not None:
            inner(name, value)
    return check


def _text(pattern: str, example: str) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if not isinstance(value, str) or not re.fullmatch(pattern, value):
            raise ParameterError(f"{name}={value!r} is not valid: set it to text like {example!r}")
    return check


def _flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ParameterError(f"{name}={value!r} is not True or False: set {name} to one of them "
                             "in the parameters cell")


# a lease's start: an ISO date and time (provisioning.times parses it: no offset means the site's time
# zone), "+30m" / "+2h" / "+1d" from now, or "now"; a Blazar lease id is a UUID
LEASE_START = r"now|\+\s*\d+\s*(m|min|h|d)|\d{4}-\d{2}-\d{2}([ T]\S.*)?"
LEASE_ID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
IPV4 = r"((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
REPO_URL = r"(https?://|ssh://|git@)\S+"  # what git clone takes on the node (a local path is not there)


# The seed lab's sizes are the full preset; quick keeps every step but shrinks the work.
SPECS: dict[str, Spec] = {
    # 03 FastAPI
    "seq_requests": Spec(20, 100, _int(1, 100_000), "sequential requests per FastAPI service"),
    "conc_requests": Spec(96, 1000, _int(1, 1_000_000), "requests sent by the concurrent clients"),
    "concurrency": Spec(16, 16, _int(1, 256), "concurrent clients in the FastAPI benchmark"),
    "flask_requests": Spec(6, 30, _int(1, 10_000), "uploads sent through the Flask app"),
    "fastapi_workers": Spec(None, None, _optional(_int(2, 64)),
                            "worker processes in 03's 'one process vs N' step (None: one per core on a CPU, "
                            "half the cores on a GPU, 2 to 8)"),
    # Triton / perf_analyzer (04 on)
    "concurrency_levels": Spec([1, 8, 16], [1, 8, 16], _list_of(_int(1, 256), increasing=True),
                               "perf_analyzer concurrency sweep (Python backend)"),
    "client_batch": Spec(16, 16, _int(1, 16),
                         "images per request in the client-batch run (max_batch_size 16)"),
    "window_requests": Spec(24, 300, _int(4, 1_000_000), "requests per perf_analyzer measurement window"),
    "settle": Spec("stable", "stable", _choice("fixed", "stable"),
                   "fixed: one window of window_requests per level from a cold start (short windows "
                   "under-count throughput); stable: steady load, windows until they agree within "
                   "stability_pct"),
    "max_trials": Spec(5, 10, _int(1, 100), "perf_analyzer windows tried before giving up on stability"),
    # quick: a repeat of one configuration lands within it (docs/decisions/2026-11-23-noise-aware-verdicts.md)
    "stability_pct": Spec(30, 20, _int(1, 10_000),
                          "perf_analyzer: max spread (%) between windows to call it stable"),
    # Poisson windows of about a second differ by their bursts: quick accepts any spread there (same note)
    "rate_stability_pct": Spec(1000, 20, _int(1, 10_000),
                               "as stability_pct, for request-rate levels (Poisson or constant arrivals)"),
    "instance_counts": Spec(None, None, _optional(_list_of(_int(1, 64), min_len=3, increasing=True)),
                            "instances per step, three or more (None: 1, 2+2, 4+4 on two GPUs; 1, 2, 4 on "
                            "one; scaled to the cores on CPU)"),
    "scaling_concurrency": Spec(8, 8, _int(1, 256), "concurrency for the instance-scaling runs"),
    "onnx_concurrency_levels": Spec([1, 8, 16], [1, 8, 16], _list_of(_int(1, 256), increasing=True),
                                    "concurrency levels for the ONNX backend (1: one request alone)"),
    "onnx_instances": Spec(2, 2, _int(1, 64), "ONNX instances in the scaled step (on each GPU used)"),
    "capacity_concurrency": Spec(4, 8, _int(1, 256), "concurrency used to measure one instance's capacity"),
    "base_rate_fraction": Spec(0.6, 0.6, _number(0.0, 2.0),
                               "constant vs Poisson rate, as a fraction of the measured capacity"),
    "rate_fractions": Spec([0.6, 1.2], [0.5, 0.75, 1.0, 1.25], _list_of(_number(0.0, 2.0), increasing=True),
                           "Poisson rates for dynamic batching, as fractions of the measured capacity"),
    "preferred_batch_sizes": Spec(PREFERRED_BATCH_SIZES, PREFERRED_BATCH_SIZES,
                                  _list_of(_int(1, 16), increasing=True),
                                  "dynamic batching: preferred batch sizes"),
    "max_queue_delay_us": Spec(MAX_QUEUE_DELAY_US, MAX_QUEUE_DELAY_US, _int(0, 10_000_000),
                               "dynamic batching: max queue delay (µs)"),
    # 12 the ensemble against the Python backend and client-side preprocessing
    "ensemble_concurrency_levels": Spec([1, 4], [1, 8], _list_of(_int(1, 256), increasing=True),
                                        "clients sending back to back, per pipeline (1: one request alone)"),
    "ensemble_requests": Spec(24, 200, _int(3, 1_000_000),
                              "requests per pipeline and level, over the distinct sample photos"),
    # 11 Model Analyzer: your configuration from 05, 06 and 07, the constraint, the search's space and time
    "constraint_concurrency": Spec(8, 8, _int(1, 256), "the constraint's load: clients sending back to back"),
    "p99_budget_ms": Spec(None, None, _optional(_int(1, 3_600_000)),
                          "the constraint: p99 at most this many ms (not set: 1.5 × your "
                          "configuration's p99 for the search, then one between the p99s it measured, "
                          "below the slower half)"),
    "your_instances": Spec(2, 2, _int(1, 64), "your configuration: ONNX model instances (06's scaled step)"),
    "your_dynamic_batching": Spec(True, True, _flag,
                                  "your configuration: 07's dynamic_batching block (preferred_batch_sizes, "
                                  "max_queue_delay_us) on, or off"),
    "ma_max_instances": Spec(2, 4, _int(1, 64), "Model Analyzer's space: instance counts 1 to this"),
    "ma_max_batch_size": Spec(2, 16, _int(1, 1024),
                              "Model Analyzer's space: max batch sizes 1, 2, 4 … up to this"),
    "ma_search_mode": Spec("brute", "brute", _choice("brute", "quick"),
                           "brute: every configuration of the space (it stops a row of batch sizes where "
                           "throughput stops rising); quick: Model Analyzer's hill climb"),
    "ma_budget_s": Spec(360, 1700, _number(0.0, 86_400.0),
                        "seconds the search may take before it is stopped"),
    # 09 LLM serving (rates are fractions of what the engine serves one request at a time)
    "llm_single_repeats": Spec(5, 10, _int(1, 1000),
                               "timed single requests per prompt length (TTFT vs decode), after one warm-up"),
    "llm_short_prompt": Spec(16, 16, _int(1, 100_000), "tokens in the short prompt"),
    "llm_long_prompt": Spec(900, 900, _int(1, 100_000),
                            "tokens in the long prompt (with the output tokens, within the model's context)"),
    "llm_single_tokens": Spec(32, 64, _int(2, 100_000), "output tokens asked by each single request"),
    "llm_requests": Spec(16, 48, _int(2, 100_000), "requests per load level (Poisson arrivals)"),
    "llm_output_lengths": Spec([8, 256], [8, 256], _list_of(_int(1, 100_000), min_len=2, increasing=True),
                               "mixed output lengths: [shortest, longest] tokens asked, drawn uniformly"),
    "llm_equal_length": Spec(132, 132, _int(1, 100_000),
                             "equal output lengths: tokens every request asks (the mixed lengths' mean)"),
    "llm_rate_fractions": Spec([4.0, 16.0], [0.5, 1.0, 2.0, 4.0, 8.0, 16.0],
                               _list_of(_number(0.0, 100.0), increasing=True),
                               "Poisson rates, as multiples of what the engine serves one request at a time"),
    "llm_max_batch": Spec(8, 8, _int(1, 256), "static batching: requests per batch"),
    "llm_kv_blocks": Spec(CB_NUM_BLOCKS, CB_NUM_BLOCKS, _int(2, 1_000_000),  # the engine's default
                          f"continuous batching: KV cache blocks of {CB_BLOCK_SIZE} tokens (room for about "
                          "16 requests)"),
    "llm_small_kv_blocks": Spec(9, 12, _int(2, 1_000_000),
                                "continuous batching: the smaller KV cache of the cache experiment"),
    # 10 scaling out with Ray Serve (rates are fractions of one replica's measured capacity)
    # quick: a 15 s high phase leaves the replica added about 9 s after the step 6 s of samples to read the
    # backlog's growth from (docs/decisions/2026-12-02-backlog-growth.md)
    "scaling_phase_seconds": Spec([3, 15, 5], [20, 60, 40], _list_of(_number(0.0, 3600.0), min_len=3),
                                  "step load: seconds of low, high, low load"),
    # quick: 1.5, not 1.2: its short high phase needs a clear overload, and a capacity read in 2 × 2 s on a
    # shared machine can come out low (docs/decisions/2026-12-01-verdicts-at-a-glance.md)
    "scaling_rate_fractions": Spec([0.5, 1.5], [0.5, 1.2], _list_of(_number(0.0, 10.0), min_len=2),
                                   "step load: [low, high] Poisson rates (× one replica's capacity)"),
    "scaling_max_replicas": Spec(2, 2, _int(1, 64), "autoscaling: max_replicas (and the fixed-N run's N)"),
    "scaling_queue_limit": Spec(4, 4, _int(1, 100_000), "shedding: max_queued_requests"),
    "scaling_overload_fraction": Spec(2.0, 2.0, _number(0.0, 20.0),
                                      "shedding: the overload rate as a fraction of one replica's capacity"),
    "scaling_overload_seconds": Spec(3, 20, _number(0.0, 3600.0), "shedding: seconds of overload per run"),
    "ray_address": Spec(None, None, _optional(_text(r"auto|[A-Za-z0-9.-]+:\d+", "auto")),
                        "a Ray cluster made with `ray start` to join: auto, or <head ip>:6379 (None: "
                        "$RAY_ADDRESS if set, else a Ray of the notebook's own on this machine)"),
    # 01/02/08 provisioning
    "lease_name": Spec(None, None,
                       _optional(_text(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}", "serve_system_abc123")),
                       "lease name (None: serve_system_<your user name>)"),
    "site": Spec("CHI@TACC", "CHI@TACC", _text(r"CHI@[A-Za-z]+", "CHI@TACC"), "Chameleon site"),
    "node_type": Spec("gpu_p100", "gpu_p100", _text(r"[a-z0-9_]+", "gpu_p100"), "node type to reserve"),
    "lease_minutes": Spec(170, 170, _int(1, 7 * 24 * 60), "lease duration in minutes (2 h 50 min)"),
    "project": Spec(None, None, _optional(_text(r"\S+", "CHI-251409")), "Chameleon project (None: from env)"),
    "lease_start": Spec(None, None, _optional(_text(LEASE_START, "2026-12-01 09:00")),
                        "when a new lease starts: a time in the site's time zone, or +2h "
                        "(None: $CHI_LEASE_START, else now)"),
    "lease_id": Spec(None, None, _optional(_text(LEASE_ID, "0f6b8a3e-5d2c-4b7a-9e1f-2a3b4c5d6e7f")),
                     "adopt this lease, e.g. one reserved ahead in the GUI (None: $CHI_LEASE_ID, else by "
                     "lease_name)"),
    "delete_adopted": Spec(False, False, _flag,
                           "teardown also deletes what the lab adopted (a lease reserved ahead)"),
    "fetch_first": Spec(True, True, _flag,
                        "08 copies the node's results/ and notebooks here before the teardown (False: tear "
                        "down without them, when the node cannot be reached)"),
    "floating_ip": Spec(None, None, _optional(_text(IPV4, "129.114.108.7")),
                        "a free floating IP of the project to use and keep (None: $CHI_FLOATING_IP, else one "
                        "allocated for this run and released at teardown)"),
    "code_source": Spec(None, None, _optional(_choice("upload", "git")),
                        "how the lab's code reaches the node: upload (this folder, git or not) or git (a "
                        "clone of repo_url) (None: $SERVELAB_CODE_SOURCE, else upload)"),
    "repo_url": Spec(None, None, _optional(_text(REPO_URL, "https://github.com/you/serve-system-lab.git")),
                     "the lab's git repository, for code_source='git' (None: $SERVELAB_REPO_URL)"),
    # 02: trained Food-11 weights for the node's model build (servelab.core.model; None: the stand-in)
    "weights": Spec(None, None, _optional(_text(r"(https?://)?\S+", "https://example.org/food11.pth")),
                    "trained Food-11 weights for the node's model: an http(s) URL, or a file inside the "
                    "lab's folder (None: $SERVELAB_WEIGHTS, else the lab's stand-in)"),
    "weights_sha256": Spec(None, None, _optional(_text(r"[0-9a-fA-F]{64}", "0" * 64)),
                           "the sha256 of a weights file that needs unpickling (a whole pickled model): "
                           "only that file is unpickled (None: $SERVELAB_WEIGHTS_TRUSTED, else refused)"),
}


@dataclass(frozen=True)
class LabParams:
    """The validated parameters of one notebook run; sizes read as attributes."""

    target: str
    preset: str
    values: Mapping[str, Any] = field(default_factory=dict)
    given: frozenset[str] = frozenset()
    target_from: str = "given"  # or "$SERVELAB_TARGET", or "default" (local)

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "values")
        if name in values:
            return values[name]
        raise AttributeError(f"no parameter {name!r}; this notebook has {sorted(values)}")

    @property
    def plan(self) -> bool:
        """Provisioning only acts on Chameleon; elsewhere it shows what it would create."""
        return self.target != "chameleon"

    def rows(self) -> list[dict[str, Any]]:
        """One row per parameter: value, where it came from, what it means."""
        rows = [{"parameter": "target", "value": self.target, "from": self.target_from,
                 "meaning": "where to run"},
                {"parameter": "preset", "value": self.preset, "from": "given", "meaning": "size of the work"}]
        rows += [{"parameter": k, "value": v, "from": "given" if k in self.given else f"preset {self.preset}",
                  "meaning": SPECS[k].meaning} for k, v in self.values.items()]
        return rows

    def _shown(self) -> Any:
        """The rows as a DataFrame; an unset value (None) reads "not set", never NaN or None."""
        import pandas as pd

        rows = [{**r, "value": "not set" if r["value"] is None else r["value"]} for r in self.rows()]
        return pd.DataFrame(rows, dtype=object)

    def _defines(self) -> str:
        """What ``$SERVELAB_RESULTS`` is, said under the first parameters table a notebook shows (its
        commands and paths name the run's folder so); decided once, at the first display."""
        if "_said" not in self.__dict__:
            from servelab.report.terms import define

            object.__setattr__(self, "_said", define("results"))
        return str(self.__dict__["_said"])

    def _repr_html_(self) -> str:
        import html

        said = self._defines()
        note = f"<p><small>{html.escape(said)}</small></p>" if said else ""
        return str(self._shown().to_html(index=False)) + note

    def __repr__(self) -> str:
        """The same table as text (a saved notebook's plain view, the site), never the dataclass's fields."""
        said = self._defines()
        return str(self._shown().to_string(index=False)) + (f"\n{said}" if said else "")


def _one_of(name: str, value: Any, allowed: Iterable[str]) -> str:
    """``value`` if it is one of ``allowed``, else a ParameterError that lists them."""
    allowed = list(allowed)
    if value not in allowed:
        raise ParameterError(
            f"{name}={value!r} is unknown: set {name} to one of {', '.join(repr(a) for a in allowed)} "
            "in the parameters cell"
        )
    return str(value)


def check_target(target: Any) -> str:
    return _one_of("target", target, TARGETS)


def check_preset(preset: Any) -> str:
    return _one_of("preset", preset, PRESETS)


def target_or_default(target: Any, environ: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """The checked target and where it came from: given; for None ``$SERVELAB_TARGET``, else local."""
    if target is not None:
        return check_target(target), "given"
    value = environ.get(TARGET_VARIABLE, "")
    if not value:
        return "local", "default"
    if value not in TARGETS:
        raise ParameterError(
            f"target=None takes ${TARGET_VARIABLE}={value!r}, which is unknown: set {TARGET_VARIABLE} "
            f"(or target in the parameters cell) to one of {', '.join(repr(t) for t in TARGETS)}"
        )
    return value, f"${TARGET_VARIABLE}"


def resolve(target: str | None, preset: str = "quick", **sizes: Any) -> LabParams:
    """Validate a notebook's parameters; ``None`` sizes take the preset's value, a ``None`` target
    ``$SERVELAB_TARGET`` or else local."""
    target, target_from = target_or_default(target)
    preset = check_preset(preset)
    values: dict[str, Any] = {}
    given: set[str] = set()
    for name, value in sizes.items():
        if name not in SPECS:
            raise ParameterError(f"unknown parameter {name!r}: remove it, or use one of {sorted(SPECS)}")
        spec = SPECS[name]
        if value is None:
            value = getattr(spec, preset)
        else:
            given.add(name)
        spec.check(name, value)
        values[name] = list(value) if isinstance(value, tuple) else value
    _check_together(values)
    return LabParams(target, preset, values, frozenset(given), target_from)


def _check_together(values: Mapping[str, Any]) -> None:
    """Rules that involve two sizes at once."""
    lengths = values.get("llm_output_lengths")
    if lengths is not None and len(lengths) != 2:
        raise ParameterError(f"llm_output_lengths={lengths!r} must be [shortest, longest], e.g. [8, 256]")
    small, big = values.get("llm_small_kv_blocks"), values.get("llm_kv_blocks")
    prompt = values.get("llm_short_prompt")
    holds = None if small is None else small * CB_BLOCK_SIZE
    if holds is not None and lengths is not None and prompt is not None and holds < prompt + lengths[-1]:
        raise ParameterError(f"llm_small_kv_blocks={small} holds {holds} tokens, less than one request "
                             f"({prompt} prompt + {lengths[-1]} output tokens): raise it")
    if small is not None and big is not None and small >= big:
        raise ParameterError(f"llm_small_kv_blocks={small} must be smaller than llm_kv_blocks={big}: "
                             "the cache experiment shrinks the cache")
    pipelines, levels = values.get("ensemble_requests"), values.get("ensemble_concurrency_levels")
    if pipelines is not None and levels and pipelines < 3 * max(levels):
        raise ParameterError(f"ensemble_requests={pipelines} gives fewer than 3 requests to each of "
                             f"{max(levels)} clients: raise it to {3 * max(levels)} or more")
    requests, clients = values.get("conc_requests"), values.get("concurrency")
    if requests is not None and clients is not None and requests < clients:
        raise ParameterError(
            f"conc_requests={values['conc_requests']} is smaller than concurrency={values['concurrency']}: "
            "every client needs at least one request; raise conc_requests or lower concurrency"
        )
