"""What the student writes in 04-07: the model's config.pbtxt as text, and the perf_analyzer command.

``edit_config`` parses the text as Triton does (``servelab.triton.config_text``), refuses a
malformed one with its line and the fix while the model keeps serving its last good config, writes the
fields it names over the live config, shows the diff and reloads (``triton_steps.apply_config``).
``write_model_config`` (06) takes a whole config.pbtxt for a folder whose model.onnx is in place, refuses
one that model.onnx cannot serve by (``servelab.triton.onnx_config``), deploys it as the target serves an
ONNX model and shows how it differs from the staged one.
``perf_analyzer`` runs the command exactly as typed (its words, in ``results/perf/``) and records its
CSV's rows as the lab's own runs are recorded. The checks say what to change when the work is not
there yet. Why: docs/decisions/2026-12-01-exercise-layer.md
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pandas as pd

from servelab.lab import exercise
from servelab.lab.triton_steps import (
    Triton,
    apply_config,
    instance_threads,
    live_config,
    not_loaded,
    where_it_computes,
)
from servelab.results.schema import TRITON_COLUMNS, normalise_triton
from servelab.results.store import append_rows, results_dir


def edit_config(triton: Triton, name: str, text: str) -> None:
    """The student's lines of ``name``'s config.pbtxt: parsed, merged over the live config, reloaded."""
    from servelab.triton.config import ConfigError
    from servelab.triton.config_text import ConfigTextError, merge_edit, named_fields, parse_edit

    where = f"{name}/config.pbtxt (the text in this cell)"
    try:
        edit = parse_edit(text, where)
    except ConfigTextError as exc:
        exercise._record("edit", "", name, ok=False, said=str(exc).splitlines()[0])
        raise exercise.StudentError(f"{exc}\n{name} keeps serving its last good config: fix the text and "
                                    "run the cell again") from None
    fields = named_fields(edit)
    if not fields:
        print(f"{where} names no field: nothing changed (write the block you change, e.g. "
              "`instance_group [ … ]` or `dynamic_batching { … }`)")
        return
    if why := not_loaded(triton, name):
        raise exercise.StudentError(f"{why} (nothing changed)")
    _fit_gpus(triton, edit)
    cfg = merge_edit(live_config(triton, name), edit)
    cfg = _thread_rule(cfg, fields)
    try:
        apply_config(triton, name, cfg)
    except ConfigError as exc:
        raise exercise.StudentError(f"{exc}\nfix the text and run the cell again") from None
    exercise._record("edit", "", name, ok=True, said=", ".join(fields))


def _fit_gpus(triton: Triton, edit: Any) -> None:
    """KIND_GPU on a target without GPUs becomes KIND_CPU; GPUs the host lacks are dropped (the node's
    ``gpus: [ 0, 1 ]`` on a one-GPU host): each said in one line, as the deploy says its adaptations."""
    from servelab.triton.config import mc

    count = int(getattr(triton.stack, "gpu_count", 0) or 0) if triton.stack.has_gpu else 0
    for group in edit.instance_group:
        if group.kind != mc.ModelInstanceGroup.KIND_GPU:
            continue
        if not count:
            print(f"no GPU on the {triton.stack.target} target: KIND_GPU becomes KIND_CPU (gpus dropped)")
            group.kind = mc.ModelInstanceGroup.KIND_CPU
            del group.gpus[:]
        elif [g for g in group.gpus if g >= count]:
            kept = [g for g in group.gpus if g < count] or [0]
            print(f"this host has {count} GPU(s): gpus {list(group.gpus)} becomes {kept}")
            del group.gpus[:]
            group.gpus.extend(kept)


def _thread_rule(cfg: Any, fields: list[str]) -> Any:
    """A new instance group on ONNX Runtime's CPU instances gets the lab's thread share (as 05 teaches)."""
    from servelab.triton.config import mc, set_parameter
    from servelab.triton.instances import ort_threads

    cpu = [g.count for g in cfg.instance_group if g.kind == mc.ModelInstanceGroup.KIND_CPU]
    if "instance_group" in fields and cfg.backend == "onnxruntime" and cpu \
            and "intra_op_thread_count" not in fields:
        cfg = set_parameter(cfg, "intra_op_thread_count", str(ort_threads("auto", sum(cpu))))
    return cfg


# 06: the ONNX model's whole config.pbtxt, with its model.onnx in place
ONNX_HINT = ("write its config.pbtxt in the cell under “You write the ONNX model's config.pbtxt”, then run "
             "this cell again")


def onnx_in_place(triton: Triton, name: str) -> None:
    """06's model folder as the student gets it: the staged 1/model.onnx copied into the live repository,
    and its tensors as ONNX Runtime reads them (what config.pbtxt must name); config.pbtxt is theirs."""
    from servelab.core.paths import BUILD_COMMAND, STAGING_DIR
    from servelab.targets.base import MODEL_REPOSITORY
    from servelab.triton.onnx_config import onnx_tensors

    source, live = STAGING_DIR / name / "1" / "model.onnx", f"{MODEL_REPOSITORY}/{name}/1/model.onnx"
    if not source.is_file():
        raise FileNotFoundError(f"{source} is missing; build it with: {BUILD_COMMAND}")
    print(f"$ cp models_staging/{name}/1/model.onnx {live}")
    triton.stack.write_file(live, source.read_bytes())
    triton.hints[name] = ONNX_HINT
    inputs, outputs = onnx_tensors(source)
    print(f"{live} is in place ({source.stat().st_size / 1e6:.1f} MB); {MODEL_REPOSITORY}/{name}/"
          "config.pbtxt is yours to write, below. model.onnx's tensors, as ONNX Runtime reads them:")
    for kind, tensor in [("input", t) for t in inputs] + [("output", t) for t in outputs]:
        print(f"  {kind:<6} {tensor}  (config.pbtxt's data_type: {tensor.data_type})")


def write_model_config(triton: Triton, name: str, text: str) -> None:
    """06: the student's whole config.pbtxt for ``name``, whose 1/model.onnx is in place: parsed as Triton
    parses it and refused by its line where model.onnx cannot serve by it (the model left as it was), then
    deployed as the target serves an ONNX model, loaded, and shown against the staged config."""
    from servelab.triton.config_text import ConfigTextError, named_fields, parse_edit
    from servelab.triton.onnx_config import check_servable

    where = f"{name}/config.pbtxt (the text in this cell)"
    before = "stays unloaded" if not_loaded(triton, name) else "keeps serving its last good config"
    try:
        cfg = parse_edit(text, where)
        if not named_fields(cfg):
            print(f"{where} names no field yet: write the model's config.pbtxt (its backend, max_batch_size, "
                  f"input and output) and run the cell again; {name} {before}")
            return
        check_servable(cfg, text, _onnx_file(name), name, where)
    except ConfigTextError as exc:
        exercise._record("model", "", name, ok=False, said=str(exc).splitlines()[0])
        raise exercise.StudentError(f"{exc}\n{name} {before}: fix the text and run the cell again") from None
    _deploy_written(triton, name, cfg, before)
    said = _written_summary(cfg)
    exercise._record("model", "", name, ok=True, said=said, backend=cfg.backend or cfg.platform)


def _onnx_file(name: str) -> Path:
    from servelab.core.paths import STAGING_DIR

    return STAGING_DIR / name / "1" / "model.onnx"


def _written_summary(cfg: Any) -> str:
    """What a passed check quotes of the student's config: backend, max_batch_size, each tensor's dims."""
    tensors = [f"{kind} `{t.name}` {list(t.dims)}"
               for kind, group in (("input", cfg.input), ("output", cfg.output)) for t in group]
    return ", ".join([f"backend {cfg.backend or cfg.platform}", f"max_batch_size {cfg.max_batch_size}",
                      *tensors])


def _deploy_written(triton: Triton, name: str, written: Any, before: str) -> None:
    """The student's config in a folder with model.onnx, deployed as ``triton_steps.deploy`` adapts a staged
    model (KIND_CPU without a GPU, the Python-backend runner where Triton has no onnxruntime); the live
    config.pbtxt written back when Triton refuses it."""
    import difflib
    import tempfile

    from tritonclient.utils import InferenceServerException

    from servelab.core.paths import STAGING_DIR
    from servelab.core.procs import WaitTimeoutError
    from servelab.lab import triton_steps
    from servelab.targets.base import MODEL_REPOSITORY
    from servelab.triton.config import CONFIG_NAME, config_text, mc, read_config
    from servelab.triton.config import live_config as served

    cfg = mc.ModelConfig()
    cfg.CopyFrom(written)
    cfg.name = name  # Triton names a model by its folder
    if not cfg.instance_group:
        print("no instance_group written: Triton's default, one instance on each GPU (without one: on the "
              "CPU)")
        cfg.instance_group.add(count=1, kind=mc.ModelInstanceGroup.KIND_GPU)
    _fit_gpus(triton, cfg)
    live_file = f"{MODEL_REPOSITORY}/{name}/{CONFIG_NAME}"
    try:
        previous: bytes | None = triton.stack.read_file(live_file)
    except (OSError, RuntimeError):
        previous = None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / name
        (folder / "1").mkdir(parents=True)
        (folder / "1" / "model.onnx").symlink_to(_onnx_file(name).resolve())
        (folder / CONFIG_NAME).write_text(config_text(cfg))
        try:
            loaded = triton_steps.deploy(triton, name, staging_dir=Path(tmp),
                                         source=f"your config.pbtxt and models_staging/{name}/1/model.onnx")
        except (InferenceServerException, RuntimeError, WaitTimeoutError) as exc:
            if previous is not None:
                triton.stack.write_file(live_file, previous)
            said = exc.message() if isinstance(exc, InferenceServerException) else str(exc)
            said = said.split(" — server log: ")[-1]  # the reason the server logged, where it says one
            said = re.sub(r"^Poll failed for model directory '[^']*': ", "", said).splitlines()[0][:400]
            raise exercise.StudentError(f"Triton refused {name}'s config.pbtxt: {said}\n{name} {before}: fix "
                                        "the text and run the cell again") from None
    if not loaded:
        print(f"{name} serves this config already: nothing to reload")
    staged = config_text(read_config(STAGING_DIR / name)).splitlines(keepends=True)
    diff = "".join(difflib.unified_diff(staged, config_text(written).splitlines(keepends=True),
                                        fromfile=f"models_staging/{name}/config.pbtxt (staged)",
                                        tofile=f"{name}/config.pbtxt (yours)"))
    print(diff or f"your config.pbtxt has the staged config's fields, exactly (models_staging/{name})")
    backend = served(triton.client(), name).backend
    runner = (" (this Triton has no onnxruntime backend: the lab's Python-backend runner, model.py calling "
              "onnxruntime on your model.onnx)") if backend == "python" else ""
    print(f"{name} is loaded (confirmed by the server): backend {backend}{runner}; it computes on the "
          f"{where_it_computes(triton, name)[1]}")


def perf_url(triton: Triton, name: str) -> tuple[str, str]:
    """(the server's host:port for ``-u``, the input-data file for ``--input-data``), as the lab's own
    commands use them; printed for the student to type."""
    from servelab.triton import experiments

    inputs = experiments.input_data_for(triton, name, workdir=results_dir() / "perf-inputs")
    print(f"Triton for perf_analyzer: -u {triton.url}; {name}'s input data: --input-data {inputs.name} "
          f"(in {inputs.parent.name}/ of the run's folder: the command runs in its perf/ folder)")
    return triton.url, f"../{inputs.parent.name}/{inputs.name}"


def _flag(argv: list[str], *names: str) -> str | None:
    for i, word in enumerate(argv):
        for name in names:
            if word == name and i + 1 < len(argv):
                return argv[i + 1]
            if name.startswith("--") and word.startswith(name + "="):
                return word.split("=", 1)[1]
    return None


def typed_argv(command: str) -> list[str]:
    """The words of the student's command (shell quoting, ``#`` comments to the line's end), refused in
    one line when it is not a perf_analyzer command the lab can record."""
    try:
        argv = shlex.split(command, comments=True)
    except ValueError as exc:
        raise exercise.StudentError(f"the command cannot be read ({exc}): close its quotes") from None
    if not argv or Path(argv[0]).name != "perf_analyzer":
        raise exercise.StudentError("the command must start with perf_analyzer")
    for names, why in ((("-m",), "-m MODEL: the model to measure"), (("-u",), "-u HOST:PORT: the server"),
                       (("-f",), "-f FILE.csv: perf_analyzer writes its table there, and the lab records "
                                 "it")):
        if _flag(argv, *names) is None:
            raise exercise.StudentError(f"the command has no {why}: add it and run the cell again")
    return argv


def perf_analyzer(triton: Triton, command: str, step: str, timeout: float = 300.0) -> pd.DataFrame:
    """Run ``command`` as typed, in ``results/perf/``; its CSV's rows recorded under ``triton`` (the lab's
    step ``step``, the command as run, the live config, the machine's utilisation meanwhile)."""
    from servelab.core.monitor import Utilisation
    from servelab.triton.experiments import live_summary, with_gpu_columns
    from servelab.triton.perf import PerfAnalyzerError, _asked_levels, local_runner, run_perf_analyzer
    from servelab.triton.perf_csv import records
    from servelab.triton.stats import run_stats

    argv = typed_argv(command)
    model, csv_name = _flag(argv, "-m"), _flag(argv, "-f")
    assert model is not None and csv_name is not None  # typed_argv refused their absence
    workdir = results_dir() / "perf"
    workdir.mkdir(parents=True, exist_ok=True)
    csv_path = (workdir / csv_name).resolve()
    shown = " ".join(shlex.quote(a) for a in argv)
    print(f"$ {shown}", flush=True)
    levels = _asked_levels(argv) or [1.0]
    load = {"batch_size": int(_flag(argv, "-b", "--batch-size") or 1),
            "distribution": _flag(argv, "--request-distribution") or (
                "constant" if _flag(argv, "--request-rate-range") else None),
            "protocol": _flag(argv, "-i") or "http"}
    try:
        config = live_summary(triton, model)
    except Exception:  # tritonclient's 404 for a model the server does not have
        names = ", ".join(m["name"] for m in triton.client().get_model_repository_index())
        raise exercise.StudentError(f"the server has no model {model!r} (-m): its models are "
                                    f"{names}") from None
    try:
        pids = [triton.pid] if triton.pid else []
        with run_stats(triton.client(), model) as stats, Utilisation(pids=pids) as util:
            result = run_perf_analyzer(argv, step, model, config, load,
                                       local_runner(levels=len(levels), cwd=workdir), timeout, str(csv_path))
    except PerfAnalyzerError as exc:
        raise exercise.StudentError(f"perf_analyzer did not measure: {str(exc).splitlines()[0][:300]}\n"
                                    "fix the command (perf_analyzer --help lists its flags) and run the cell "
                                    "again") from None
    frame = result.frame.copy()
    shared = {**util.summary(), **({k: v for k, v in stats.delta.items() if k not in frame}
                                   if len(frame) == 1 else {})}
    for key, value in {**shared, "step": step, "threads": instance_threads(triton, model),
                       "device": where_it_computes(triton, model)[0], "typed": True}.items():
        frame[key] = [value] * len(frame)
    frame = with_gpu_columns(frame, util.summary())
    frame["instances"], frame["dynamic_batching"] = config["instances"], config["dynamic_batching"]
    frame["command"], frame["warnings"], frame["warmup"] = shown, "; ".join(result.warnings), ""
    frame["stability_pct"] = float(_flag(argv, "--stability-percentage") or 10)  # perf_analyzer's default
    append_rows("triton", records(frame))
    exercise._record("command", "", step, command=shown, levels=[float(v) for v in frame["load_value"]])
    from servelab.lab.tables import show_columns

    return show_columns(normalise_triton(frame), TRITON_COLUMNS)


# ---------------------------------------------------------------- checks
def check_block(triton: Triton, name: str, field: str, step: Any, fix: str) -> None:
    """The live config.pbtxt of ``name`` has the ``field`` block the student was to write."""
    from servelab.triton.config_text import block_text

    text = block_text(live_config(triton, name), field).strip()
    exercise.check(step, f"your config.pbtxt has a {field} block", bool(text),
                   f"{name} serves without one: {fix}", f"{name} serves with {' '.join(text.split())}")


def check_levels(rows: pd.DataFrame, step: Any, column: str, least: int, fix: str) -> None:
    """The student's runs measured at least ``least`` distinct values of ``column`` (concurrency, rate,
    instances)."""
    values = rows[column].dropna().unique().tolist() if column in rows else []
    numeric = all(isinstance(v, int | float) for v in values)
    ordered = sorted(values) if numeric else sorted(values, key=str)
    shown = ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in ordered)
    exercise.check(step, f"your runs measured {least} or more {column} levels", len(values) >= least,
                   f"they measured {shown or 'none'}: {fix}", f"{column} {shown}")


def check_distribution(rows: pd.DataFrame, step: Any, distribution: str, fix: str) -> None:
    """The student's command sent ``distribution`` arrivals."""
    said = sorted({str(d) for d in rows.get("distribution", pd.Series(dtype=str)).dropna()})
    exercise.check(step, f"your command sent {distribution} arrivals", said == [distribution],
                   f"it sent {', '.join(said) or 'no request-rate load'}: {fix}", f"{distribution} arrivals")


def check_batched(rows: pd.DataFrame, step: Any, fix: str) -> None:
    """Some execution of the run carried more than one request (dynamic batching formed batches)."""
    from servelab.results.schema import batch_size_counts

    counts = batch_size_counts(rows) if not rows.empty else {}
    over = sum(n for size, n in counts.items() if int(size) > 1)
    exercise.check(step, "your run formed executions of more than one request", over > 0,
                   f"every execution carried one request ({sum(counts.values())} executions): {fix}",
                   f"{over} executions carried more than one request")


def check_instances(triton: Triton, name: str, step: Any, least: int, fix: str) -> None:
    """The live config runs at least ``least`` instances of ``name``."""
    why = not_loaded(triton, name)
    count = 0 if why else sum(g.count for g in live_config(triton, name).instance_group)
    exercise.check(step, f"your instance_group runs {least} or more instances", count >= least,
                   why or f"it runs {count}: {fix}", f"{count} instances")


def check_model(triton: Triton, name: str, step: Any, backend: str) -> None:
    """``name`` serves from the config.pbtxt the student wrote (``write_model_config``), on ``backend``."""
    rows = exercise.records("model")
    mine = rows[(rows["key"] == name) & rows["ok"].astype(bool)] if not rows.empty else rows
    last = dict(mine.iloc[-1]) if not mine.empty else {}
    why = not_loaded(triton, name) or (
        f"{name} serves a config.pbtxt you did not write: {ONNX_HINT}" if not last else
        f"your config.pbtxt names backend {last['backend']}: write backend: \"{backend}\""
        if not str(last["backend"]).startswith(backend) else "")
    said = str(last.get("said", ""))
    exercise.check(step, f"your config.pbtxt serves {name} on the {backend} backend", not why, why,
                   f"{name} serves 1/model.onnx by your config.pbtxt: {said}")
