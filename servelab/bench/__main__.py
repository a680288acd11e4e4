"""``python -m servelab.bench``: the FastAPI benchmark's command line (the commands: ``servelab.bench``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import servelab.bench
from servelab.bench.client import (
    DEFAULT_CONCURRENCY,
    DEFAULT_CONCURRENT,
    DEFAULT_SEQUENTIAL,
    LATENCY_COLUMNS,
    STAGE_TABLE,
    bench_fastapi,
    format_table,
)
from servelab.bench.closest import compare, parse_config, report
from servelab.bench.model import RAW_COLUMNS, run_raw
from servelab.bench.targets import fastapi_all


def _write_json(path: Path | None, payload: Any) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
        print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    overview = (servelab.bench.__doc__ or "").split("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m servelab.bench", description=overview)
    sub = parser.add_subparsers(dest="command", required=True)
    fa = sub.add_parser("fastapi", help="sequential + concurrent requests against a running service")
    fa.add_argument("--url", required=True, help="service base URL, e.g. http://127.0.0.1:8000")
    for p in (fa, all_ := sub.add_parser("fastapi-all", help="raw + both local services + speed targets")):
        p.add_argument("--sequential", type=int, default=DEFAULT_SEQUENTIAL, help="sequential requests")
        p.add_argument("--concurrent", type=int, default=DEFAULT_CONCURRENT,
                       help="requests in the concurrent run")
        p.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="concurrent clients")
        p.add_argument("--json", type=Path, help="also write the results to this JSON file")
    ceil = sub.add_parser("ceiling", help="one local service in each WORKERS value against the model alone: "
                          "its share of the ceiling, its stages, the closest configuration")
    ceil.add_argument("--service", choices=("onnx", "pt"), default="onnx", help="which FastAPI service")
    ceil.add_argument("--workers", type=int, nargs="+", default=[1, 2],
                      help="WORKERS values to compare (each a configuration)")
    ceil.add_argument("--config", action="append", default=[], metavar="'KEY=VALUE ...'",
                      help="one more configuration, e.g. 'WORKERS=1 PREPROCESS_WORKERS=2' (repeatable)")
    ceil.add_argument("--rounds", type=int, default=3, help="alternations of model and services")
    ceil.add_argument("--requests", type=int, default=DEFAULT_CONCURRENT, help="requests per service run")
    ceil.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="concurrent clients")
    ceil.add_argument("--json", type=Path, help="also write the results to this JSON file")
    raw = sub.add_parser("raw", help="time the model alone: ORT and PyTorch at batch 1 and 16")
    raw.add_argument("--json", type=Path)
    for p in (raw, all_, ceil):
        p.add_argument("--seconds", type=float, default=3.0, help="time spent per raw measurement")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except FileNotFoundError as exc:  # e.g. a model artefact not built: the message names the command
        sys.stderr.write(f"error: {exc}\n")
        return 2


def _run(args: argparse.Namespace) -> int:
    """One sub-command; its exit status."""
    if args.command == "fastapi":
        results = bench_fastapi(args.url, args.sequential, args.concurrent, args.concurrency)
        print(format_table(list(results.values()), LATENCY_COLUMNS))
        print("where a request's time went (mean ms; outside_ms: client, network, HTTP server):")
        print(format_table(list(results.values()), STAGE_TABLE))
        _write_json(args.json, results)
        return 0
    if args.command == "ceiling":
        if args.rounds < 1 or min(args.workers) < 1:
            sys.stderr.write("error: --rounds and every --workers value must be at least 1\n")
            return 2
        try:
            configs = [{"WORKERS": str(w)} for w in args.workers] + [parse_config(c) for c in args.config]
        except ValueError as exc:
            sys.stderr.write(f"error: --config: {exc}\n")
            return 2
        compared = compare(args.service, configs, args.rounds, args.requests, args.concurrency, args.seconds)
        print(report(compared))
        _write_json(args.json, compared)
        return 0
    if args.command == "raw":
        rows = run_raw(min_seconds=args.seconds)
        print(format_table(rows, RAW_COLUMNS))
        _write_json(args.json, rows)
        return 0
    everything = fastapi_all(args.sequential, args.concurrent, args.concurrency, args.seconds)
    print(format_table(everything["targets"], ("target", "measured", "bound", "pass")))
    _write_json(args.json, everything)
    return 0 if all(t["pass"] is not False for t in everything["targets"]) else 1


if __name__ == "__main__":
    sys.exit(main())
