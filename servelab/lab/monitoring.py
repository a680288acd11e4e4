"""Monitoring: scrape the services' Prometheus metrics during a load and plot them over time, as a
Prometheus + Grafana dashboard would (the FastAPI service's ``/metrics``, Triton's metrics port 8002).

A view, not a measurement: nothing here is recorded into the run's results.
Why these metrics and this interval: docs/decisions/2026-11-23-monitoring-cells.md.
"""

from __future__ import annotations

import math
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd
from matplotlib.figure import Figure

from servelab.lab.params import LabParams
from servelab.lab.stack import Endpoint, hostport
from servelab.report.figures import figure, plot_html, save_figure
from servelab.results.schema import num

if TYPE_CHECKING:
    from servelab.lab.triton_steps import Triton

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
COLUMNS = ["t_s", "source", "model", "interval_s", "requests_per_s", "latency_ms", "queue_ms", "compute_ms",
           "in_flight", "pending", "batch_size", "errors_per_s", "error"]
SUFFIXES = ("_total", "_sum", "_count", "_bucket")
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the services are never proxied


def scrape_once(url: str, timeout_s: float = 2.0) -> str:
    """The metrics page at ``url`` as text (what ``curl <url>`` prints); raises on failure."""
    with _NO_PROXY.open(url, timeout=timeout_s) as response:
        return str(response.read().decode())


def parse(text: str) -> Samples:
    """Prometheus text → {(name, sorted label pairs): value}. A counter is keyed by its name without
    ``_total`` (prometheus_client's exporter appends it, Triton's does not); histograms keep their
    ``_sum``/``_count``/``_bucket`` samples. Malformed text raises ValueError."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            name = family.name if family.type == "counter" and s.name == f"{family.name}_total" else s.name
            samples[(name, tuple(sorted(s.labels.items())))] = float(s.value)
    return samples


def show_metrics(url: str, names: Sequence[str] = (), contains: str = "", buckets: bool = False) -> list[str]:
    """Print (and return) the raw lines of ``url`` as ``curl`` shows them: the samples whose metric starts
    with one of ``names`` (all when empty) and whose line contains ``contains``, each family's ``# HELP``
    and ``# TYPE`` first; histogram buckets only when ``buckets``, ``*_created`` timestamps never."""
    comments: dict[str, list[str]] = {}
    keep: list[str] = []
    for line in scrape_once(url).splitlines():
        if line.startswith("# ") and len(line.split()) > 2:
            comments.setdefault(line.split()[2], []).append(line)
            continue
        metric = line.split("{")[0].split(" ")[0]
        if not metric or metric.endswith("_created") or (metric.endswith("_bucket") and not buckets) \
                or (names and not metric.startswith(tuple(names))) or contains not in line:
            continue
        family = next((f for f in comments if metric in (f, *(f + s for s in SUFFIXES))), metric)
        keep += [*comments.pop(family, []), line]
    print(f"$ curl {url}  # {len(keep)} of its lines shown\n" + "\n".join(keep))
    return keep


@dataclass
class Scrape:
    """One scrape: seconds since the watch started, the source's name, and the samples or why none."""

    t_s: float
    source: str
    samples: Samples | None
    error: str = ""


def _series(samples: Samples, name: str, labels: Mapping[str, str]) -> Iterator[tuple[Any, float]]:
    """The (key, value) of every series of ``name`` whose labels include ``labels``."""
    return ((key, v) for key, v in samples.items()
            if key[0] == name and labels.items() <= dict(key[1]).items())


def _delta(prev: Samples, cur: Samples, name: str, **labels: str) -> float:
    """Increase of counter ``name`` summed over the series matching ``labels``; a series that went down
    was reset (the server restarted) and counts from zero, as Prometheus' ``rate()`` does."""
    return sum(v - prev.get(key, 0.0) if v >= prev.get(key, 0.0) else v
               for key, v in _series(cur, name, labels))


def _gauge(cur: Samples, name: str, **labels: str) -> float:
    values = [v for _, v in _series(cur, name, labels)]
    return sum(values) if values else math.nan


def _ratio(top: float, bottom: float, scale: float = 1.0) -> float:
    return top / bottom * scale if bottom > 0 else math.nan


def _interval_rows(prev: Samples, cur: Samples, dt: float) -> list[dict[str, Any]]:
    """The per-interval series between two scrapes of one source (FastAPI's, or Triton's per model)."""
    names = {metric for metric, _ in cur}
    if "http_request_duration_seconds_count" in names:  # the FastAPI service (servelab/serving/metrics.py)
        count = _delta(prev, cur, "http_request_duration_seconds_count", path="/predict")
        passes = _delta(prev, cur, "inference_seconds_count")
        return [{"model": "", "requests_per_s": _delta(prev, cur, "http_requests", path="/predict") / dt,
                 "latency_ms": _ratio(_delta(prev, cur, "http_request_duration_seconds_sum", path="/predict"),
                                      count, 1000),
                 "compute_ms": _ratio(_delta(prev, cur, "inference_seconds_sum"), passes, 1000),
                 # the gauge counts the scrape's own request too
                 "in_flight": max(_gauge(cur, "http_requests_in_flight") - 1, 0),
                 "batch_size": _ratio(_delta(prev, cur, "inference_batch_size_sum"),
                                      _delta(prev, cur, "inference_batch_size_count")),
                 "errors_per_s": _delta(prev, cur, "http_errors", path="/predict") / dt}]
    if "nv_inference_count" in names:  # Triton: one row per model (versions summed)
        rows = []
        for model in sorted({dict(pairs).get("model", "") for m, pairs in cur if m == "nv_inference_count"}):
            done = _delta(prev, cur, "nv_inference_request_success", model=model)
            per_request = {column: _ratio(_delta(prev, cur, f"nv_inference_{stage}_duration_us", model=model),
                                          done, 1e-3)
                           for column, stage in (("latency_ms", "request"), ("queue_ms", "queue"),
                                                 ("compute_ms", "compute_infer"))}
            rows.append({"model": model, "requests_per_s": done / dt, **per_request,
                         "pending": _gauge(cur, "nv_inference_pending_request_count", model=model),
                         "batch_size": _ratio(_delta(prev, cur, "nv_inference_count", model=model),
                                              _delta(prev, cur, "nv_inference_exec_count", model=model)),
                         "errors_per_s": _delta(prev, cur, "nv_inference_request_failure", model=model) / dt})
        return rows
    return [{"model": "", "error": "neither FastAPI's nor Triton's metrics"}]


def derive(scrapes: Sequence[Scrape]) -> pd.DataFrame:
    """One row per source (and Triton model) per interval between two successful scrapes of it, at the
    later one's time: requests/s and mean latency, queue and compute times (ms per request; FastAPI's
    compute is per forward pass), in-flight/pending requests, mean batch size, errors/s. A failed scrape
    is a row with its ``error`` (the next interval then spans it); a source's first scrape is a baseline."""
    rows: list[dict[str, Any]] = []
    last: dict[str, Scrape] = {}
    for scrape in sorted(scrapes, key=lambda s: s.t_s):
        base = {"t_s": scrape.t_s, "source": scrape.source}
        if scrape.samples is None:
            rows.append({**base, "model": "", "error": scrape.error or "failed"})
            continue
        prev = last.get(scrape.source)
        last[scrape.source] = scrape
        if prev is not None and prev.samples is not None and scrape.t_s > prev.t_s:
            dt = scrape.t_s - prev.t_s
            rows += [{**base, "interval_s": dt, **row}
                     for row in _interval_rows(prev.samples, scrape.samples, dt)]
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["error"] = frame["error"].fillna("")
    return frame


class Watch:
    """``with watch({"api": "http://…/metrics"}) as w: <load>``, then ``w.frame()``: every URL (source name →
    metrics URL) scraped each ``interval_s`` in a background thread, each scrape given ``timeout_s``. A
    failed scrape is recorded, never raised; on exit the thread stops (joined with a timeout) and one last
    scrape closes the series."""

    def __init__(self, urls: Mapping[str, str], interval_s: float = 0.5, timeout_s: float = 2.0) -> None:
        self.urls, self.interval_s, self.timeout_s = dict(urls), interval_s, timeout_s
        self.scrapes: list[Scrape] = []
        self._stop, self._started = threading.Event(), time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="metrics-watch", daemon=True)

    def scrape_all(self) -> None:
        """One scrape of each source, stamped at the middle of its request."""
        for source, url in self.urls.items():
            sent, samples, error = time.monotonic(), None, ""
            try:
                samples = parse(scrape_once(url, self.timeout_s))
            except Exception as exc:  # a failed scrape is data, never the end of the measurement
                error = f"{type(exc).__name__}: {exc}"[:200]
            self.scrapes.append(Scrape((sent + time.monotonic()) / 2 - self._started, source, samples, error))

    def _loop(self) -> None:
        tick = time.monotonic()
        while not self._stop.is_set():
            self.scrape_all()
            tick = max(tick + self.interval_s, time.monotonic())
            self._stop.wait(tick - time.monotonic())

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.timeout_s * len(self.urls) + self.interval_s + 1.0)
        self.scrape_all()

    def frame(self) -> pd.DataFrame:
        return derive(list(self.scrapes))


watch = Watch


def _waiting(g: pd.DataFrame) -> str:
    return "pending" if num(g, "pending").notna().any() else "in_flight"


def fig_monitoring(df: pd.DataFrame, title: str = "") -> Figure:
    """Dashboard panels over time: latency (Triton: queue + compute too), requests/s, requests waiting."""
    fig, (lat, rate, depth) = figure(width=11, height=3.4, cols=3)
    ok = df[df["error"] == ""]
    for (source, model), g in ok.groupby(["source", "model"], sort=False):
        if num(g, "requests_per_s").fillna(0).sum() == 0:
            continue  # a model nobody called
        name, t = f"{source} {model}".strip(), g["t_s"]
        lat.plot(t, num(g, "latency_ms"), "o-", ms=3, label=f"{name} request")
        for column, style in (("queue_ms", "--"), ("compute_ms", ":")):
            if num(g, column).notna().any():
                lat.plot(t, num(g, column), style, label=f"{name} {column.removesuffix('_ms')}")
        rate.plot(t, num(g, "requests_per_s"), "o-", ms=3, label=name)
        waiting = _waiting(g)
        depth.plot(t, num(g, waiting), "o-", ms=3, label=f"{name} {waiting.replace('_', ' ')}")
    failed = df[df["error"] != ""]
    if len(failed):
        rate.plot(failed["t_s"], [0] * len(failed), "rx", label="failed scrape")
    for ax, name, ylabel in ((lat, "latency", "mean per interval (ms)"), (rate, "throughput", "requests/s"),
                             (depth, "queue", "requests (sampled at each scrape)")):
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("time (s)")
        ax.set_ylabel(ylabel, fontsize=8)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    sources = ", ".join(dict.fromkeys(df["source"]))
    fig.suptitle(title or f"scraped from Prometheus metrics every interval: {sources}", fontsize=11)
    fig.tight_layout()
    return fig


def read_monitoring(df: pd.DataFrame) -> str:
    """One line per busy source/model: peak requests/s, latency range, most waiting, mean batch size."""
    parts = []
    for (source, model), g in df[df["error"] == ""].groupby(["source", "model"], sort=False):
        busy = g[num(g, "requests_per_s") > 0]
        if busy.empty:
            continue
        batch = num(busy, "batch_size").mean()
        parts.append(f"{source} {model}".strip() + f": up to {num(busy, 'requests_per_s').max():.1f} req/s, "
                     f"latency {num(busy, 'latency_ms').min():.0f}–{num(busy, 'latency_ms').max():.0f} ms, "
                     f"up to {num(busy, _waiting(busy)).max():.0f} waiting"
                     + (f", mean batch {batch:.1f} over the busy scrapes" if batch == batch else ""))
    failed = int((df["error"] != "").sum())
    return "; ".join(parts + [f"{failed} scrapes without data (see the error column)"] * bool(failed)) \
        or "no requests seen"


@dataclass
class Monitoring:
    """What a monitoring cell shows: the series, their figure and reading, and the load's own summary."""

    frame: pd.DataFrame
    title: str
    load: Any = None  # run_concurrent's summary (FastAPI) or perf_analyzer's PerfResult (Triton)
    figure: Figure = field(init=False)

    def __post_init__(self) -> None:
        self.figure = fig_monitoring(self.frame, self.title)
        save_figure(self.figure, "monitoring " + self.title)

    @property
    def reading(self) -> str:
        return read_monitoring(self.frame)

    def _repr_html_(self) -> str:
        return plot_html(self.figure, self.reading)

    def __repr__(self) -> str:  # the plain-text view (nbconvert, a terminal): no frame dump
        return f"{self.title}: {len(self.frame)} scrapes. {self.reading}"


def _param(p: LabParams, names: Sequence[str], default: Any) -> Any:
    """The first of ``names`` this notebook's parameters have (each notebook resolves its own)."""
    return next((p.values[n] for n in names if n in p.values), default)


LOAD_SECONDS = 5.0  # a monitored load given its expected rate: about ten scrapes at 0.5 s


def monitor_fastapi(api: Endpoint, p: LabParams, interval_s: float = 0.5,
                    expected_rate: float | None = None) -> Monitoring:
    """``conc_requests`` (or, with ``expected_rate`` in requests/s, about ``LOAD_SECONDS`` worth) from
    ``concurrency`` clients (``servelab.bench.run_concurrent``) while scraping ``<api>/metrics``, with one
    idle interval before and after. Not recorded."""
    from servelab.bench import run_concurrent

    requests = max(_param(p, ["conc_requests"], 96), math.ceil((expected_rate or 0) * LOAD_SECONDS))
    with watch({api.kind: f"{api.url}/metrics"}, interval_s) as w:
        time.sleep(interval_s)
        load = run_concurrent(api.url, requests, _param(p, ["concurrency"], 16))
        time.sleep(interval_s)
    return Monitoring(w.frame(), f"{api.kind}: its /metrics scraped every {interval_s:g} s", load)


def monitor_triton(triton: Triton, model: str, p: LabParams, concurrency: int | None = None,
                   interval_s: float = 0.5, expected_rate: float | None = None) -> Monitoring:
    """perf_analyzer (``servelab.triton.perf.perf``, which prints its command) at ``concurrency`` clients
    for a fixed request count while scraping Triton's metrics port; ``triton`` is ``triton_up``'s handle.
    With ``expected_rate`` (requests/s, e.g. the measured capacity) the count lasts about
    ``LOAD_SECONDS``, so the plot has several intervals on a fast machine too. Shows only ``model``.
    Not recorded."""
    from servelab.results.store import results_dir
    from servelab.triton.experiments import input_data_for
    from servelab.triton.perf import perf

    clients = concurrency or _param(p, ["capacity_concurrency", "scaling_concurrency", "concurrency"], 8)
    requests = max(4 * _param(p, ["window_requests"], 24), 8 * clients,
                   math.ceil((expected_rate or 0) * LOAD_SECONDS))
    inputs = input_data_for(triton, model, workdir=results_dir() / "perf-inputs")
    print(f"scraping {triton.metrics_url} every {interval_s:g} s")
    with watch({"triton": triton.metrics_url}, interval_s) as w:
        time.sleep(interval_s)
        result = perf(model, hostport(triton.url), "monitoring", concurrency=clients, request_count=requests,
                      timeout=150.0 if p.preset == "quick" else 600.0, workdir=results_dir() / "perf",
                      **triton.stack.perf_options(inputs))
        time.sleep(interval_s)
    frame = w.frame()
    frame = frame[(frame["model"] == model) | (frame["error"] != "")].reset_index(drop=True)
    return Monitoring(frame, f"Triton {model}: metrics port scraped every {interval_s:g} s", result)
