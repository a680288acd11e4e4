"""Where a /predict request's time goes: its stages, timed on one clock, reported two ways.

A request passes the ``STAGES`` in order, and each ends where the next begins, so they add up to the
request's time in the app (``total``): from the moment the outermost middleware sees it to the moment
its answer's headers leave. ``Stopwatch.lap(stage)`` charges the time since the previous lap to
``stage`` (a stage may be charged twice: ``parse`` is the body before the handler plus the base64
decode on the preprocessing thread). The middleware (``http.py``) starts one per request, the
endpoint, the pool thread and the inference thread lap it, and the middleware reports it:

- in the ``Server-Timing`` response header (W3C Server Timing: ``name;dur=<ms>`` items separated by
  commas; browsers' developer tools draw it), via ``server_timing``; ``parse_server_timing`` reads one
  back (the benchmark client);
- in the Prometheus histogram ``predict_stage_seconds{stage=...}`` (``metrics.py``).

Time outside the app (the client, the network, the HTTP server reading the request off the socket) is
what the client measures beyond ``total``.
"""

from __future__ import annotations

import contextvars
import re
import time

# in the order a request passes them; what each one is, as the notebooks and the report say it
STAGES = {
    "parse": "read the body, parse the JSON, validate it, decode the base64",
    "preprocess_wait": "wait for a preprocessing thread",
    "preprocess": "decode the image, resize, crop, normalise",
    "batch_wait": "wait for an inference worker (and the batch it runs)",
    "inference": "the forward pass of the batch the request rode in",
    "response": "back on the event loop: label, probability, the JSON answer",
}
TOTAL = "total"  # the Server-Timing item with the sum: the request's time in the app
BATCH = "batch"  # parse_server_timing's key for the size of the batch a request's forward pass ran in


class Stopwatch:
    """One request's stage times; ``lap`` may be called from any thread, one after another."""

    def __init__(self, started: float | None = None) -> None:
        self.started = time.perf_counter() if started is None else started
        self._last = self.started
        self.seconds: dict[str, float] = {}
        self.batch: int | None = None  # the size of the batch its forward pass ran in

    def lap(self, stage: str, now: float | None = None) -> None:
        """Charge the time since the previous lap (or the start) to ``stage``."""
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}: one of {', '.join(STAGES)}")
        now = time.perf_counter() if now is None else now
        self.seconds[stage] = self.seconds.get(stage, 0.0) + max(0.0, now - self._last)
        self._last = max(self._last, now)

    @property
    def total(self) -> float:
        """Seconds from the start to the last lap."""
        return self._last - self.started


_CURRENT: contextvars.ContextVar[Stopwatch | None] = contextvars.ContextVar("servelab_stopwatch",
                                                                            default=None)


def start(started: float | None = None) -> tuple[Stopwatch, contextvars.Token[Stopwatch | None]]:
    """A new stopwatch for the request being handled in this context; ``finish(token)`` forgets it."""
    watch = Stopwatch(started)
    return watch, _CURRENT.set(watch)


def finish(token: contextvars.Token[Stopwatch | None]) -> None:
    _CURRENT.reset(token)


def current() -> Stopwatch:
    """The stopwatch of the request this code handles (a fresh one when no middleware started one)."""
    watch = _CURRENT.get()
    return watch if watch is not None else Stopwatch()


def server_timing(watch: Stopwatch) -> str:
    """The ``Server-Timing`` header value: each stage reached, then ``total``, durations in ms."""
    items = []
    for stage in (s for s in STAGES if s in watch.seconds):
        desc = f';desc="batch {watch.batch}"' if stage == "inference" and watch.batch else ""
        items.append(f"{stage};dur={watch.seconds[stage] * 1000:.3f}{desc}")
    items.append(f"{TOTAL};dur={watch.total * 1000:.3f}")
    return ", ".join(items)


_ITEM = re.compile(r"\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)((?:\s*;\s*[^;,]*)*)\s*")


def parse_server_timing(value: str) -> dict[str, float]:
    """A ``Server-Timing`` value → {metric name: dur in ms}; items without a ``dur`` are left out, and
    ``batch`` holds the size the ``inference`` item's ``desc`` names ("batch 4"), when it does.

    A lenient reader, as the spec asks of user agents (extra characters are ignored); it does not
    split inside a quoted ``desc`` holding a comma, which this service never sends.
    """
    found: dict[str, float] = {}
    for item in value.split(","):
        matched = _ITEM.fullmatch(item)
        if not matched or matched.group(1) in found:
            continue
        params: dict[str, str] = {}
        for param in matched.group(2).split(";"):
            name, _, raw = param.partition("=")
            params.setdefault(name.strip().lower(), raw.strip().strip('"'))
        try:
            found[matched.group(1)] = float(params["dur"])
        except (KeyError, ValueError):
            continue
        batch = re.fullmatch(r"batch (\d+)", params.get("desc", ""))
        if matched.group(1) == "inference" and batch:
            found[BATCH] = float(batch.group(1))
    return found


STAGE_COLUMNS = [f"{stage}_ms" for stage in STAGES]  # a measurement's mean per stage, as the rows name it
SERVER_COLUMN = "server_ms"  # the mean of the requests' time in the app (the stages' sum)
OUTSIDE_COLUMN = "outside_ms"  # the client's mean latency beyond it: client, network, HTTP server
BATCH_COLUMN = "mean_batch"  # images per forward pass, over the passes the requests rode in


def stage_means(timings: list[dict[str, float]], client_mean_ms: float | None = None) -> dict[str, float]:
    """The requests' ``Server-Timing`` values (``parse_server_timing``) → the mean ms of each stage (0 where
    a request skipped it), the app's mean ``server_ms``, the mean batch per forward pass and, given the
    client's mean latency, the time outside the app; {} when no answer carried the header (an older
    service, another server)."""
    timed = [t for t in timings if TOTAL in t]
    if not timed:
        return {}
    means = {f"{stage}_ms": sum(t.get(stage, 0.0) for t in timed) / len(timed) for stage in STAGES}
    means[SERVER_COLUMN] = sum(t[TOTAL] for t in timed) / len(timed)
    batches = [t[BATCH] for t in timed if t.get(BATCH)]
    if batches:  # per forward pass, as Triton counts it: a pass of b requests is b requests' 1/b each
        means[BATCH_COLUMN] = len(batches) / sum(1.0 / b for b in batches)
    if client_mean_ms is not None:
        means[OUTSIDE_COLUMN] = max(0.0, client_mean_ms - means[SERVER_COLUMN])
    return means
