"""perf_analyzer as the lab runs it, with its results as data.

Three steps: ``perf_analyzer_argv`` builds the lab's command; a *runner*
executes it (a local subprocess with a progress bar, next to the kernel on every
target; tests pass stand-ins) and hands back stdout and the ``-f`` CSV text;
``servelab.triton.perf_csv.parse_perf_csv`` turns that into a DataFrame labelled
with the experiment, model, config and load pattern.

A level perf_analyzer could not settle ("Failed to obtain stable measurement")
is reported, not swallowed: it gets a row with ``settled=False`` and a warning
says what to change (``servelab.triton.perf_csv``; a notebook shows it as one plain
line, ``servelab.core.notices``). Size the windows so a level
lasts several seconds when throughputs are compared closely: perf_analyzer
counts in whole seconds. Why: docs/decisions/2026-11-22-perf-analyzer-windows.md.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from servelab.triton.perf_csv import (
    LEVEL_RE,
    PASS_RE,
    UnsettledWarning,
    parse_perf_csv,
    unsettled_message,
)
from servelab.triton.perf_shown import said

# What a noisy shared 2-core CPU needs to settle (DESIGN.md): count windows and a wide band.
NOISY_CPU: dict[str, Any] = {
    "measurement_mode": "count_windows", "measurement_request_count": 50,
    "stability_percentage": 30, "max_trials": 6,
}

# Fixed request count: no stability search at all (fast, for tests and quick looks).
FIXED_COUNT: dict[str, Any] = {"request_count": 100}


class PerfAnalyzerError(RuntimeError):
    """perf_analyzer failed outright (not merely unsettled); the message has its output."""


def _range(value: int | float | Sequence[int | float]) -> str:
    """3, (1, 8) or (1, 8, 1) → perf_analyzer's start[:end[:step]]."""
    if isinstance(value, int | float):
        return f"{value:g}"
    return ":".join(f"{v:g}" for v in value)


def load_levels(value: int | float | Sequence[int | float]) -> list[float]:
    """The load levels a range asks for (to size the progress bar and find missing rows)."""
    if isinstance(value, int | float):
        return [float(value)]
    start, end, step = [*list(value), None, None][:3]
    if start is None:
        raise TypeError("a load range needs at least a start")
    end = start if end is None else end
    step = step or 1
    levels, level = [], float(start)
    while level <= float(end) + 1e-9:
        levels.append(level)
        level += float(step)
    return levels


def perf_analyzer_argv(model: str, url: str, *, protocol: str = "http", batch: int = 1,
                       concurrency: int | Sequence[int] | None = None,
                       request_rate: float | Sequence[float] | None = None,
                       distribution: str = "constant", input_data: str | Path | None = None,
                       shapes: Mapping[str, Sequence[int]] | None = None,
                       measurement_mode: str | None = "count_windows",
                       measurement_request_count: int | None = 50,
                       measurement_interval_ms: int | None = None,
                       stability_percentage: float | None = None, max_trials: int | None = None,
                       request_count: int | None = None, max_threads: int | None = None,
                       csv_path: str | Path = "perf.csv", collect_metrics: bool = False,
                       metrics_url: str | None = None, verbose: bool = True,
                       binary: str = "perf_analyzer", extra_args: Sequence[str] = ()) -> list[str]:
    """The lab's perf_analyzer command line.

    ``shapes`` must name the model's real inputs (``{"input": [3, 224, 224]}``);
    perf_analyzer silently ignores unknown names, so they are checked by
    ``check_shapes`` against the model's metadata when a client is at hand.
    ``request_count`` sends exactly that many requests per level and skips the
    stability search; otherwise ``measurement_mode``/``stability_percentage``/
    ``max_trials`` control settling. In request-rate mode ``max_threads``
    defaults to 16 so the client can keep the asked rate.
    """
    asked = concurrency if concurrency is not None else request_rate
    if asked is None or (concurrency is not None and request_rate is not None):
        raise ValueError("give exactly one of concurrency= or request_rate=")
    if protocol not in ("http", "grpc"):
        raise ValueError(f"protocol must be 'http' or 'grpc', not {protocol!r}")
    if distribution not in ("constant", "poisson"):
        raise ValueError(f"distribution must be 'constant' or 'poisson', not {distribution!r}")
    if batch < 1:
        raise ValueError(f"batch size must be at least 1, not {batch}")
    if request_count is not None and len(load_levels(asked)) > 1:
        raise ValueError("perf_analyzer takes request_count only with a single load level; "
                         "run one level per call or use count windows")
    if request_count is not None and request_rate is not None and request_count < max(
            load_levels(request_rate)):
        raise ValueError(f"request_count ({request_count}) must be at least the request rate "
                         f"({request_rate}): perf_analyzer refuses fewer requests than one second's worth")
    argv = [binary, "-m", model, "-u", url, "-i", protocol, "-b", str(batch)]
    if concurrency is not None:
        argv += ["--concurrency-range", _range(concurrency)]
    else:
        argv += ["--request-rate-range", _range(asked),  # asked is request_rate here
                 "--request-distribution", distribution,
                 "--max-threads", str(max_threads or 16)]
    if concurrency is not None and max_threads:
        argv += ["--max-threads", str(max_threads)]
    if input_data is not None:
        argv += ["--input-data", str(input_data)]
    for name, dims in (shapes or {}).items():
        argv += ["--shape", f"{name}:{','.join(str(int(d)) for d in dims)}"]
    if request_count is not None:
        argv += ["--request-count", str(request_count)]
    else:
        if measurement_mode:
            argv += ["--measurement-mode", measurement_mode]
            if measurement_mode == "count_windows" and measurement_request_count:
                argv += ["--measurement-request-count", str(measurement_request_count)]
        if measurement_interval_ms:
            argv += ["--measurement-interval", str(measurement_interval_ms)]
        if stability_percentage is not None:
            argv += ["--stability-percentage", f"{stability_percentage:g}"]
        if max_trials is not None:
            argv += ["--max-trials", str(max_trials)]
    argv += ["-f", str(csv_path)]
    if collect_metrics:
        argv += ["--verbose-csv", "--collect-metrics"]
        if metrics_url:
            argv += ["--metrics-url", metrics_url]
    if verbose:
        argv.append("-v")  # prints every pass: the progress bar and the unsettled fallback use it
    return argv + list(extra_args)


def check_shapes(client: Any, model: str, shapes: Mapping[str, Sequence[int]] | None) -> None:
    """Refuse ``--shape`` names the model does not have (perf_analyzer would ignore them silently)."""
    if not shapes:
        return
    names = {i["name"] for i in client.get_model_metadata(model)["inputs"]}
    unknown = sorted(set(shapes) - names)
    if unknown:
        raise ValueError(f"--shape names {unknown} are not inputs of '{model}' (its inputs: {sorted(names)})")


# ---------------------------------------------------------------- running
@dataclass
class RunOutput:
    """What a runner hands back: exit status, stdout (+stderr) and the -f CSV text ('' if none)."""

    argv: list[str]
    returncode: int
    stdout: str
    csv_text: str
    wall_s: float = 0.0


Runner = Callable[[list[str], str, float], RunOutput]
"""runner(argv, csv_path, timeout) → RunOutput; argv already writes its CSV to csv_path."""


def perf_analyzer_binary() -> str:
    """The perf_analyzer next to this Python (tritonclient's wheel puts it in the venv's bin)."""
    local = Path(sys.executable).parent / "perf_analyzer"
    return str(local) if local.is_file() else "perf_analyzer"


def perf_analyzer_env() -> dict[str, str]:
    """perf_analyzer links libcudart.so.12 even on a CPU host: PyPI's nvidia-cuda-runtime provides it.
    This Python's bin comes first on PATH, so a command typed as ``perf_analyzer …`` finds the wheel's."""
    import sysconfig

    lib = Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "cuda_runtime" / "lib"
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = ":".join(p for p in [str(lib), env.get("LD_LIBRARY_PATH", "")] if p)
    env["PATH"] = ":".join(p for p in [str(Path(sys.executable).parent), env.get("PATH", "")] if p)
    return env




def local_runner(progress: bool = True, levels: int | None = None, cwd: Path | None = None) -> Runner:
    """Run perf_analyzer here (in ``cwd``), streaming its output into a tqdm bar (one step per load level)."""

    def run(argv: list[str], csv_path: str, timeout: float) -> RunOutput:
        from servelab.core.progress import bar as tqdm

        Path(csv_path).unlink(missing_ok=True)
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=perf_analyzer_env(), start_new_session=True, cwd=cwd)
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        lines: list[str] = []
        bar = tqdm(total=levels, desc=f"perf_analyzer {argv[argv.index('-m') + 1]}", unit="level",
                   disable=not progress)  # left on its line: the next command starts a new one
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if (m := LEVEL_RE.match(line)):
                    bar.update(1)
                    bar.set_postfix_str(f"{m.group(1).split()[-1].lower()} {m.group(2)}")
                elif (m := PASS_RE.search(line)):
                    bar.set_postfix_str(f"pass {m.group(1)}: {float(m.group(2)):.1f} infer/s")
            proc.wait()
        finally:
            timer.cancel()
            bar.close()
            if proc.poll() is None:
                kill()
                proc.wait()
        stdout = "".join(lines)
        if killed.is_set():
            raise PerfAnalyzerError(f"perf_analyzer ran past its {timeout:.0f} s timeout and was killed; "
                                    f"last output:\n{stdout[-2000:]}")
        csv_file = Path(csv_path)
        csv_text = csv_file.read_text() if csv_file.is_file() else ""
        return RunOutput(argv, proc.returncode, stdout, csv_text, time.monotonic() - started)

    return run




@dataclass
class PerfResult:
    """One perf_analyzer run: the table, and everything needed to check it by hand."""

    frame: pd.DataFrame
    argv: list[str]
    stdout: str
    csv_text: str
    returncode: int
    wall_s: float
    warnings: list[str] = field(default_factory=list)

    @property
    def settled(self) -> bool:
        return bool(self.frame["settled"].astype(bool).all()) if not self.frame.empty else False

    @property
    def command(self) -> str:

        return " ".join(shlex.quote(a) for a in [Path(self.argv[0]).name, *self.argv[1:]])


def _asked_levels(argv: Sequence[str]) -> list[float]:
    for flag in ("--concurrency-range", "--request-rate-range"):
        if flag in argv:
            return load_levels([float(x) for x in argv[list(argv).index(flag) + 1].split(":")])
    return []


def run_perf_analyzer(argv: list[str], label: str, model: str, config: Mapping[str, Any] | str | None = None,
                      load: Mapping[str, Any] | None = None, runner: Runner | None = None,
                      timeout: float = 600.0, csv_path: str | None = None) -> PerfResult:
    """Run ``argv`` through ``runner`` (default: locally with a progress bar) and parse the result.

    Unsettled levels become ``settled=False`` rows plus a warning; a run that
    produced no row at all raises ``PerfAnalyzerError`` with perf_analyzer's output.
    """
    csv_path = csv_path or argv[argv.index("-f") + 1]
    runner = runner or local_runner(levels=len(_asked_levels(argv)) or None)
    out = runner(list(argv), csv_path, timeout)
    frame = parse_perf_csv(out.csv_text, label, model, config, load, out.stdout)
    if frame.empty:
        errors = [line for line in out.stdout.splitlines() if line.startswith(("Error", "error", "Failed"))]
        raise PerfAnalyzerError(f"perf_analyzer produced no measurement (exit {out.returncode}): "
                                + ("; ".join(errors) if errors else out.stdout[-3000:]))
    notes = []
    if (message := unsettled_message(frame)):
        notes.append(message)
    asked = _asked_levels(argv)
    missing = [v for v in asked if not any(abs(v - x) < 1e-6 for x in frame["load_value"])]
    if missing:
        notes.append(f"{model}: levels {', '.join(f'{v:g}' for v in missing)} were not measured: "
                     "perf_analyzer stops at the first level that does not settle")
    for note in notes:
        warnings.warn(note, UnsettledWarning, stacklevel=2)
    return PerfResult(frame, list(argv), out.stdout, out.csv_text, out.returncode, out.wall_s, notes)


def perf(model: str, url: str, label: str, *, config: Mapping[str, Any] | str | None = None,
         runner: Runner | None = None, timeout: float = 600.0, workdir: Path | None = None,
         **options: Any) -> PerfResult:
    """Build the command (``options`` as for ``perf_analyzer_argv``), run it, parse it."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="perf-"))
    workdir.mkdir(parents=True, exist_ok=True)
    csv_path = options.pop("csv_path", None) or str(workdir / f"{model}-{int(time.time() * 1000)}.csv")
    Path(csv_path).parent.mkdir(parents=True, exist_ok=True)  # perf_analyzer does not make it
    options.setdefault("binary", perf_analyzer_binary())
    argv = perf_analyzer_argv(model, url, csv_path=csv_path, **options)
    if (line := said(argv, warm_up=label == "warm-up")) is not None:
        print(line, flush=True)
    load = {"batch_size": options.get("batch", 1),
            "distribution": options.get("distribution", "constant") if options.get("request_rate") else None,
            "protocol": options.get("protocol", "http")}
    return run_perf_analyzer(argv, label, model, config, load, runner, timeout, csv_path)




