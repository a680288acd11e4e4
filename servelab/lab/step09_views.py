"""Notebook 09's figures and one-line readings, drawn from its rows (``servelab.lab.step09_llm_serving``
measures and records them, shows them and checks its rules)."""

from __future__ import annotations

import json

import pandas as pd
from matplotlib.figure import Figure

from servelab.report.effects import Need
from servelab.report.figures import figure, finish
from servelab.results.schema import num


def fig_single(df: pd.DataFrame) -> Figure:
    """Median TTFT and time per output token, short vs long prompt."""
    fig, ax = figure(height=3.0)
    names = [n for n in ("short", "long") if n in set(df.get("prompt", []))]
    xs = range(len(names))
    for shift, column, label, color in ((-0.2, "ttft_ms", "time to first token (prefill)", "tab:orange"),
                                        (0.2, "tpot_ms", "time per output token (decode)", "tab:blue")):
        values = [num(df[df["prompt"] == n], column) for n in names]
        mid = [v.median() for v in values]
        ax.bar([x + shift for x in xs], mid, 0.4, label=label, color=color,
               yerr=[[m - v.min() for m, v in zip(mid, values, strict=True)],
                     [v.max() - m for m, v in zip(mid, values, strict=True)]], capsize=3)
    tokens = [int(num(df[df["prompt"] == n], "prompt_tokens").median()) for n in names]
    ax.set_xticks(list(xs), [f"{n} prompt ({t} tokens)" for n, t in zip(names, tokens, strict=True)])
    return finish(fig, ax, None, "ms (median; bars: fastest to slowest repeat)",
                  "one request: prefill vs decode")


def fig_batching(df: pd.DataFrame) -> Figure:
    """Output tokens/s and TTFT p99 against the arrival rate, static vs continuous batching."""
    fig, axes = figure(width=9.0, height=3.2, cols=2)
    for batching, group in df.groupby("batching", sort=True):
        group = group.sort_values("rate")
        axes[0].plot(num(group, "rate"), num(group, "output_tokens_s"), "o-", label=str(batching))
        axes[1].plot(num(group, "rate"), num(group, "ttft_p99_ms"), "s--", label=str(batching))
    axes[0].set_ylabel("output tokens/s")
    axes[1].set_ylabel("TTFT p99 (ms)")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("Poisson arrival rate (requests/s)")
        ax.legend(fontsize=8)
    axes[0].set_title("throughput", fontsize=11)
    axes[1].set_title("time to first token, p99", fontsize=11)
    fig.tight_layout()
    return fig


def fig_kv(df: pd.DataFrame) -> Figure:
    """Sequences running and waiting over one run, per KV cache size (the engine's own statistics)."""
    fig, ax = figure(height=3.2)
    for _, r in df.iterrows():
        samples = r["stats"] if isinstance(r["stats"], list) else json.loads(r["stats"])
        t = [s["t"] for s in samples]
        name = f"{int(r['kv_blocks'])} blocks" if pd.notna(r.get("kv_blocks")) else str(r["batching"])
        line, = ax.plot(t, [s["running"] for s in samples], "-", label=f"{name}: running")
        ax.plot(t, [s["waiting"] for s in samples], ":", color=line.get_color(), label=f"{name}: waiting")
    return finish(fig, ax, "seconds into the run", "sequences",
                  "continuous batching: sequences in the KV cache and in the queue")


def read_single(df: pd.DataFrame) -> str:
    short, long = df[df["prompt"] == "short"], df[df["prompt"] == "long"]
    if short.empty or long.empty:
        return "no single-request measurements"
    def ttft(df: pd.DataFrame) -> str:
        t = num(df, "ttft_ms")
        return (f"({int(num(df, 'prompt_tokens').median())} tokens): first token after {t.median():.0f} ms "
                f"(median of {len(t)}, {t.min():.0f}-{t.max():.0f})")
    return (f"short prompt {ttft(short)}; long prompt {ttft(long)}. Each further token: "
            f"{num(short, 'tpot_ms').median():.1f} vs {num(long, 'tpot_ms').median():.1f} ms")


def read_batching(df: pd.DataFrame) -> str:
    if df.empty:
        return "no measurements"
    top = num(df, "rate").max()
    at = df[num(df, "rate") == top]
    parts = [f"{r['batching']}: {r['output_tokens_s']:.0f} tokens/s, TTFT p99 {r['ttft_p99_ms']:.0f} ms"
             for _, r in at.iterrows()]
    asked = f" ({at['output_lengths'].iloc[0]} tokens asked)" if "output_lengths" in at else ""
    return f"at {top:.2f} requests/s{asked}: " + "; ".join(parts)


def mean_running(stats: object) -> float | None:
    """Sequences running on average while the engine was busy (its statistics' samples with any running);
    None without samples."""
    samples = stats if isinstance(stats, list) else json.loads(str(stats)) if isinstance(stats, str) else []
    busy = [s["running"] for s in samples if s.get("running")]
    return sum(busy) / len(busy) if busy else None


def read_itl(df: pd.DataFrame, single: pd.DataFrame | None = None) -> str:
    """The gap between tokens (ITL p50) of each batching at the top rate, beside the sequences its steps
    carried (the engine's statistics: on average while busy, and at most) and the gap per sequence; one
    request alone's TPOT (``single``) beside them. Where the two batchings differ, what the numbers point
    to: steps that carry more sequences, or steps that cost more per sequence."""
    if df.empty or "itl_p50_ms" not in df:
        return ""
    top = num(df, "rate").max()
    parts, per = [], {}
    for _, r in df[num(df, "rate") == top].iterrows():
        running = mean_running(r.get("stats"))
        if running is None or pd.isna(r.get("itl_p50_ms")):
            continue
        per[str(r["batching"])] = (float(r["itl_p50_ms"]), running, float(r["itl_p50_ms"]) / running)
        parts.append(f"{r['batching']} {float(r['itl_p50_ms']):.1f} ms with {running:.1f} sequences running "
                     f"on average (at most {int(r['max_running'])}): {per[str(r['batching'])][2]:.1f} ms per "
                     "sequence")
    if not parts:
        return ""
    said = f"gap between tokens (ITL p50) at {top:.2f} requests/s: " + "; ".join(parts)
    short = single[single["prompt"] == "short"] if single is not None and not single.empty else None
    if short is not None and not short.empty:
        engine = f" on the {short['batching'].iloc[0]} engine" if "batching" in short else ""
        said += f"; one request alone{engine} (its TPOT): {num(short, 'tpot_ms').median():.1f} ms"
    if {"continuous", "static"} <= set(per):
        (c_itl, c_run, c_per), (s_itl, s_run, s_per) = per["continuous"], per["static"]
        why = [w for w, yes in (("carried more sequences", c_run > s_run), ("cost more per sequence",
                                                                             c_per > s_per)) if yes]
        if c_itl > s_itl and why:
            said += ". Continuous batching's steps " + " and ".join(why) + (
                ": it re-forms its batch at every step and runs each newcomer's prefill inside the others' "
                "decode steps, where a static batch runs the same rows to its end" if c_per > s_per else
                ": every step computes one token for each running sequence")
        elif s_itl > c_itl:
            said += (". Static batching's gaps are the longer: its padded batch computes every row until the "
                     "longest request ends, finished rows included")
    return said


def read_kv(df: pd.DataFrame) -> str:
    parts = [f"{int(r['kv_blocks'])} blocks: at most {int(r['max_running'])} running, "
             f"{int(r['max_waiting'])} waiting, TTFT p99 {r['ttft_p99_ms']:.0f} ms"
             for _, r in df.iterrows() if pd.notna(r["kv_blocks"])]
    return "; ".join(parts) or "no KV cache measurements"


GAP_NEED = ("a gap to close: with mixed lengths, continuous batching gave more tokens/s than static (their "
            "ratio below 1 by more than its spread)")


def gap_to_close(ratio: float | None, noise: float | None) -> Need:
    """The precondition of "static batching closes the gap": static/continuous tokens/s with mixed lengths
    (``ratio``) below 1 by more than its relative spread (``noise``); not known without the ratio."""
    if ratio is None:
        return Need(GAP_NEED)
    band = f" (spread {ratio * noise:.2f})" if noise else ""
    if ratio * (1 + (noise or 0.0)) < 1:
        return Need(GAP_NEED, True, f"static/continuous {ratio:.2f} with mixed lengths{band}")
    if ratio < 1:
        return Need(GAP_NEED, False, "the gap to close was inside its noise: static/continuous "
                                     f"{ratio:.2f} with mixed lengths{band}")
    return Need(GAP_NEED, False, "there was no gap to close: with mixed lengths static batching already "
                                 f"gave {ratio:.2f}× continuous batching's tokens/s{band}")


def batching_in(flags: str) -> str:
    """The engine's ``--batching`` from its command-line flags as the student writes them
    (``python -m servelab.llm.engine MODEL --batching static``); the engine's default, continuous, when
    the flag is absent."""
    import argparse
    import shlex

    from servelab.lab.exercise import StudentError
    from servelab.llm.validation import BATCHING

    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    parser.add_argument("--batching", default="continuous")
    try:
        known, _rest = parser.parse_known_args(shlex.split(flags, comments=True))
    except (argparse.ArgumentError, ValueError) as exc:
        raise StudentError(f"the engine's flags cannot be read ({exc}): write --batching MODE") from None
    if known.batching not in BATCHING:
        raise StudentError(f"--batching {known.batching} is not a mode of the engine: write one of "
                           f"{', '.join(BATCHING)}")
    return str(known.batching)
