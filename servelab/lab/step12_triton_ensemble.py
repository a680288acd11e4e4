"""Notebook 12: the preprocessing moves into Triton: an ensemble (``food_preprocess`` →
``food_classifier_onnx`` → ``food_postprocess``) against the Python backend and against a client that
preprocesses for the ONNX model; its answers beside the Python backend's; the report and the rules.
The measuring: ``servelab.triton.pipelines``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from servelab.lab.params import LabParams
from servelab.lab.tables import Measured, concat, record, show_columns
from servelab.lab.triton_steps import Triton, measure_all, where_it_computes
from servelab.report.effects import Check, check, row, spread
from servelab.report.figures import Section, as_image, figure, plot_html, table_html
from servelab.report.verdict import Quantity
from servelab.results.schema import TRITON, RunData, num, step_rows
from servelab.targets.base import MODEL_REPOSITORY

ENSEMBLE = "food_classifier_ensemble"
MEMBERS = ("food_preprocess", "food_classifier_onnx", "food_postprocess")
MODELS = ("food_classifier", *MEMBERS)  # what the notebook deploys before the ensemble
ROWS, ANSWERS, PERF = "pipelines", "ensemble_answers", "ensemble_perf"  # its rows in the triton table
ORDER = ("python", "client", "ensemble")
PIPELINE_COLUMNS = ["label", "throughput", "p50_ms", "p99_ms", "request_kb", "client_cpu_ms", "queue_ms",
                    "compute_infer_ms", "cpu_util_pct"]
MEMBER_COLUMNS = ["concurrency", "member", "queue_ms", "compute_ms", "inference_count"]
TOLERANCE = 1e-4  # the ensemble's probability against the Python backend's, for the same photo
# what a verdict's "(spread …)" spans here (servelab.report.terms)
SPREAD_OVER = "the run's three thirds (by finishing order) of each pipeline's requests at one concurrency"


def deploy_ensemble(triton: Triton, text: str) -> Any:
    """The ensemble's config.pbtxt as the student wrote it: parsed as Triton parses it (refused with its
    line when malformed), written to the live repository with its (empty) version folder, loaded; a
    refusal says Triton's reason, and what to check."""
    from servelab.lab.exercise import StudentError
    from servelab.triton.config import ConfigError, parse_config

    try:
        cfg = parse_config(text)
    except ConfigError as exc:
        raise StudentError(f"{exc} (nothing loaded)") from None
    if cfg.name != ENSEMBLE or cfg.platform != "ensemble":
        raise StudentError(f'the ensemble must be name: "{ENSEMBLE}" with platform: "ensemble" (it has name: '
                          f'"{cfg.name}", platform: "{cfg.platform}")')
    live = f"{MODEL_REPOSITORY}/{ENSEMBLE}"
    triton.stack.write_file(f"{live}/config.pbtxt", text)
    triton.stack.write_file(f"{live}/1/README.txt", "An ensemble has no files of its own.\n")
    try:
        triton.stack.reload_model(ENSEMBLE)
    except Exception as exc:  # tritonclient's InferenceServerException, a Stack's RuntimeError
        reason = exc.message() if hasattr(exc, "message") else str(exc)
        raise StudentError(f"Triton refused {ENSEMBLE}: {reason} (check each step's model_name and that "
                           "every input_map/output_map key is that member's tensor name)") from None
    steps = " → ".join(step.model_name for step in cfg.ensemble_scheduling.step)
    print(f"{ENSEMBLE} loaded: {steps}")
    return cfg


def photos() -> list[Any]:
    """The distinct photos every measurement cycles through: all the sample photos."""
    from servelab.core.samples import sample_paths

    return list(sample_paths())


def try_each(triton: Triton) -> pd.DataFrame:
    """One photo through each pipeline: its answer, the bytes each way, the time it took."""
    from servelab.triton.pipelines import answer

    image = photos()[0].read_bytes()
    rows = [answer(triton.url, name, image) for name in ORDER]
    return pd.DataFrame(rows).round({"probability": 4, "ms": 1})


def compare_answers(triton: Triton) -> pd.DataFrame:
    """Every sample photo through the Python backend and through the ensemble: the same top-1 class and
    a probability within ``TOLERANCE``? One summary row recorded (``ensemble_answers``); the table shown."""
    from servelab.triton.pipelines import answer

    rows = []
    for path in photos():
        image = path.read_bytes()
        python, ensemble = answer(triton.url, "python", image), answer(triton.url, "ensemble", image)
        rows.append({"photo": path.name, "python": python["prediction"], "ensemble": ensemble["prediction"],
                     "python_probability": python["probability"],
                     "ensemble_probability": ensemble["probability"],
                     "difference": abs(python["probability"] - ensemble["probability"])})
    table = pd.DataFrame(rows)
    agree = int((table["python"] == table["ensemble"]).sum())
    record(TRITON, [{"step": ANSWERS, "model": ENSEMBLE, "label": "answers: ensemble vs Python backend",
                     "photos": len(table), "top1_agree": agree,
                     "max_probability_difference": float(table["difference"].max())}])
    print(f"{agree} of {len(table)} photos: the same top-1 class; the largest probability difference "
          f"{table['difference'].max():.2g} (tolerance {TOLERANCE:g})")
    return table.round({"python_probability": 6, "ensemble_probability": 6})


def perf_ensemble(triton: Triton, p: LabParams) -> pd.DataFrame:
    """perf_analyzer on the ensemble at each of ``ensemble_concurrency_levels``, sending the sample photos'
    bytes in turn (distinct inputs, not one image again and again): the server's side alone."""
    runs = [{"concurrency": c, "label": f"ensemble c={c}", "images": len(photos())}
            for c in p.ensemble_concurrency_levels]
    return measure_all(triton, ENSEMBLE, p, PERF, runs)


def measure_pipelines(triton: Triton, p: LabParams) -> pd.DataFrame:
    """Each pipeline at each of ``ensemble_concurrency_levels``: ``ensemble_requests`` requests over the
    distinct photos, the client's work in each; stored under ``triton`` (rows ``pipelines``)."""
    from servelab.core.monitor import Utilisation
    from servelab.lab.tables import util_columns
    from servelab.triton.pipelines import PIPELINES, measure

    frames = []
    for level in p.ensemble_concurrency_levels:
        for name in ORDER:
            with Utilisation(pids=[triton.pid] if triton.pid else []) as util:
                got = measure(triton.url, triton.client(), name, photos(), p.ensemble_requests, level)
            device = where_it_computes(triton, PIPELINES[name].model if name != "ensemble" else MEMBERS[1])[0]
            row_ = {"step": ROWS, "device": device, **got, **util_columns(util.summary())}
            frames.append(_normalised(record(TRITON, [row_])))
    return Measured.of(concat(*frames), PIPELINE_COLUMNS)  # shown short, every column kept


def _normalised(df: pd.DataFrame) -> pd.DataFrame:
    from servelab.results.schema import normalise_triton

    out = normalise_triton(df)
    return out.assign(request_kb=num(out, "request_bytes") / 1000) if not out.empty else out


def member_times(df: pd.DataFrame) -> pd.DataFrame:
    """Triton's own queue and compute per request for each member of the ensemble, at each concurrency:
    where the ensemble's time goes."""
    rows = [{"concurrency": r["concurrency"], "member": member, **times}
            for _, r in df[df["pipeline"] == "ensemble"].iterrows()
            for member, times in dict(r.get("members") or {}).items()]
    return show_columns(pd.DataFrame(rows, columns=MEMBER_COLUMNS), MEMBER_COLUMNS)


def plot_pipelines(df: pd.DataFrame) -> Any:
    print(read_pipelines(df))
    return as_image(fig_pipelines(df))


def read_pipelines(df: pd.DataFrame) -> str:
    """One line per pipeline at the highest concurrency: requests/s, p99, bytes sent, client CPU."""
    top = num(df, "concurrency").max()
    lines = []
    for name in ORDER:
        picked = df[(df["pipeline"] == name) & (num(df, "concurrency") == top)]
        if picked.empty:
            continue
        r = picked.iloc[-1]
        lines.append(f"{name} at concurrency {top:g}: {r['throughput']:.1f} requests/s, "
                     f"p99 {r['p99_ms']:.1f} ms, {r['request_bytes'] / 1000:.0f} KB sent per request, "
                     f"client CPU {r['client_cpu_ms']:.2f} ms per request")
    return "\n".join(lines) or "no pipeline rows in this run"


def fig_pipelines(df: pd.DataFrame) -> Figure:
    """Throughput, p99, KB per request and the client's CPU per request, per pipeline and concurrency."""
    fig, axes = figure(width=9.0, height=3.2, cols=4)
    levels = sorted(set(num(df, "concurrency").dropna()))
    panels = [("throughput", "requests/s"), ("p99_ms", "p99 (ms)"), ("request_bytes", "KB per request"),
              ("client_cpu_ms", "client CPU (ms/request)")]
    width = 0.8 / len(ORDER)
    for ax, (column, title) in zip(axes, panels, strict=True):
        for i, name in enumerate(ORDER):
            picked = df[df["pipeline"] == name]
            values = [float(num(picked[num(picked, "concurrency") == c], column).iloc[-1])
                      if not picked[num(picked, "concurrency") == c].empty else 0.0 for c in levels]
            if column == "request_bytes":
                values = [v / 1000 for v in values]
            ax.bar([j + i * width for j in range(len(levels))], values, width, label=name)
        ax.set_xticks([j + width for j in range(len(levels))], [f"c={c:g}" for c in levels])
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=7)
    fig.suptitle("Python backend vs client-side preprocessing vs ensemble", fontsize=11)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- report and rules

def sections(data: RunData) -> list[Section]:
    """The three pipelines side by side; the ensemble's members' queue and compute."""
    rows = step_rows(data.triton, ROWS)
    if rows.empty:
        return []
    rows = _normalised(rows)
    return [Section("Triton ensemble: preprocessing in the server", [
        plot_html(fig_pipelines(rows), read_pipelines(rows)), table_html(rows, PIPELINE_COLUMNS),
        table_html(pd.DataFrame(member_times(rows)), MEMBER_COLUMNS)])]


def rules(data: RunData) -> list[Check]:
    """The ensemble answers as the Python backend does; its request carries the file, not the tensor; the
    client's CPU per request falls; the preprocessing is counted in the server; one request alone is
    answered about as fast as with client-side preprocessing."""
    answers, rows = step_rows(data.triton, ANSWERS), _normalised(step_rows(data.triton, ROWS))
    c_one = row(rows, "concurrency", "min")

    def at(name: str, column: str) -> float | None:
        return row(rows, column, pipeline=name, concurrency=c_one) if c_one is not None else None

    def noise(name: str, column: str) -> float | None:
        return spread(rows, column, pipeline=name, concurrency=c_one) if c_one is not None else None

    photos_n, agree = row(answers, "photos"), row(answers, "top1_agree")
    members = _members_counted(rows, c_one)
    return [
        check(f"The ensemble answers as the Python backend does: same top-1, probability within "
              f"{TOLERANCE:g}, every photo",
              (photos_n, agree, row(answers, "max_probability_difference")),
              lambda n, a, d: a == n and d <= TOLERANCE,
              lambda n, a, d: f"{a:.0f} of {n:.0f} photos the same class; largest probability difference "
                              f"{d:.2g}",
              figures=lambda n, a, d: (Quantity("photos", n), Quantity("the same class", a),
                                       Quantity("largest probability difference", d))),
        check("A request to the ensemble carries the image file: a small fraction of the tensor a client "
              "that preprocesses sends",
              (at("client", "request_bytes"), at("ensemble", "request_bytes")),
              lambda tensor, file: tensor >= 10 * file,
              lambda tensor, file: f"{tensor / 1000:.0f} KB per request with client-side preprocessing, "
                                   f"{file / 1000:.1f} KB to the ensemble ({tensor / file:.0f}×)",
              figures=lambda tensor, file: (Quantity("client-side preprocessing", tensor / 1000, "KB"),
                                            Quantity("ensemble", file / 1000, "KB"))),
        check("With the ensemble the client spends less CPU per request than when it preprocesses itself",
              (at("client", "client_cpu_ms"), at("ensemble", "client_cpu_ms")),
              lambda own, ens: ens < own,
              lambda own, ens: f"at concurrency {c_one:g}: {own:.2f} ms of the client's CPU per request "
                               f"preprocessing itself, {ens:.2f} ms with the ensemble",
              noise=(noise("client", "client_cpu_ms"), noise("ensemble", "client_cpu_ms")), unit="ms",
              names=("preprocessing itself", "ensemble"), spans=SPREAD_OVER),
        check("Triton counts the preprocessing as its own work: every ensemble request runs food_preprocess",
              members, lambda counted, share: counted >= 1 and share > 0,
              lambda counted, share: f"at concurrency {c_one:g}: food_preprocess saw every request "
                                     f"{'(yes)' if counted >= 1 else '(no)'}, its compute {share:.0%} of the "
                                     "members'",
              figures=lambda counted, share: (
                  Quantity("food_preprocess's share of the members' compute", 100 * share, "%"),)),
        check("One request alone: the ensemble answers about as fast as a client that preprocesses itself "
              "(the same work, moved into the server)",
              (at("client", "p50_ms"), at("ensemble", "p50_ms")),
              lambda own, ens: ens <= 1.25 * own,
              lambda own, ens: f"at concurrency {c_one:g}: p50 {own:.1f} ms preprocessing in the client, "
                               f"{ens:.1f} ms with the ensemble",
              noise=(noise("client", "p50_ms"), noise("ensemble", "p50_ms")), unit="ms",
              names=("preprocessing in the client", "ensemble"), spans=SPREAD_OVER),
    ]


def _members_counted(rows: pd.DataFrame, level: float | None) -> tuple[float | None, float | None]:
    """(1.0 when food_preprocess counted every ensemble request at ``level``, else 0.0; its share of the
    members' compute), or (None, None) without such a row."""
    picked = rows[(rows.get("pipeline") == "ensemble") & (num(rows, "concurrency") == level)] \
        if not rows.empty and level is not None else rows.iloc[0:0]
    if picked.empty:
        return None, None
    r = picked.iloc[-1]
    times = dict(r.get("members") or {})
    pre = dict(times.get(MEMBERS[0]) or {})
    total = sum(float(t.get("compute_ms") or 0) for t in times.values())
    counted = 1.0 if pre.get("inference_count") == r.get("requests") and not r.get("errors") else 0.0
    return counted, (float(pre.get("compute_ms") or 0) / total if total else None)
