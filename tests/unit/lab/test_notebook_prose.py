"""The notebooks' text states no measured outcome: this run's data says what it shows.

A sentence of a notebook's markdown (the .py sources' markdown cells are what executes) that uses an
outcome word (faster, more, gain, barely, raises, 2.5×, 40 %, ...) as a statement is a claim a run
can contradict. Allowed: a question (a sentence ending in "?"), a ``**Predict.**`` or ``**Try:**``
prompt, and a labelled expectation: a paragraph starting ``**Expected on the GPU node**`` (or
``**Expected on a GPU**``) that names its source, a dated note under docs/decisions/ or a link.
What a run shows is printed by ``common.what_this_run_shows`` from the step's rules.
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))

OUTCOME = re.compile(r"""(?ix)
    \b(faster|slower|quicker|higher|lower|more|less|fewer|greater|smaller|larger|bigger|better|worse
      |best|worst|gains?|gained|barely|hardly|cuts?|raises?|raised|raising|doubles?|doubled|halves|halved
      |triples?|grows?|grew|growing|rises?|rose|rising|drops?|dropped|falls?|fell|jumps?|jumped
      |improves?|improved|helps?|helped|hurts?|shortens?|shortened|reduces?|reduced|increases?|increased
      |decreases?|decreased|boosts?|collapses?|collapsed|outperforms?|beats?|speeds?\s+up|slows?\s+down
      |dominates?|drains?|exceeds?|little|much|a\s+lot|flat|sharply|noticeably|significantly|dramatically)\b
    | ×                                   # 2.5×, 3 × faster
    | \b\d+(?:\.\d+)?\s*x\b               # 3x
    | %                                   # +44 %
    | \bno\s+(?:better|worse|gain|throughput|effect|benefit|difference)\b
""")
# neutral uses of those words: a product of numbers (3 × 224 × 224), a version floor
NEUTRAL = re.compile(r"(?i)\d\s*×\s*(?=\d)|\bor\s+(?:higher|later|newer)\b")
LABELS = ("**Expected on the GPU node**", "**Expected on a GPU**")
PROMPTS = ("**Predict.**", "**Try:**")
SOURCE = re.compile(r"docs/decisions/\d{4}-\d{2}-\d{2}-[\w.-]+\.md|https?://\S+")


def sentences(paragraph: str) -> list[str]:
    """A markdown paragraph's sentences (list items apart), inline code and link targets blanked."""
    text = re.sub(r"`[^`]*`", "CODE", paragraph)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"https?://\S+", "URL", text)
    out: list[str] = []
    for item in re.split(r"\n\s*(?:[-*]|\d+\.)\s+", "\n" + text):
        flat = " ".join(item.split())
        out += [s for s in re.split(r"(?<=[.!?])\s+(?=[^a-z])", flat) if s]
    return out


# a measured figure stated as a fact (answers in 9 ms, 150 infer/s)
FIGURE = re.compile(r"\b\d+(?:\.\d+)?\s*(?:ms|infer/s|inferences/s|req/s|images/s|tokens/s)\b")
# a question that carries a measured size ("ONNX is 3× faster here: why?")
SIZED = re.compile(r"\d\s*(?:×|x\b|%)|\b\d+(?:\.\d+)?\s+times\b")


def claims(markdown: str) -> list[str]:
    """The sentences of ``markdown`` that state an outcome: outside labelled expectations, every
    statement with an outcome word or a measured figure, and every question that carries a measured
    size. A prompt's first sentence (its instruction) is not a statement; what follows it is read."""
    found = []
    for paragraph in re.split(r"\n\s*\n", markdown):
        paragraph = paragraph.strip()
        if not paragraph or paragraph.startswith(LABELS):
            continue
        said = sentences(paragraph)[1:] if paragraph.startswith(PROMPTS) else sentences(paragraph)
        for sentence in said:
            plain = NEUTRAL.sub(" ", sentence)
            if sentence.endswith("?"):
                if SIZED.search(plain):
                    found.append(sentence)
            elif OUTCOME.search(plain) or FIGURE.search(plain):
                found.append(sentence)
    return found


def markdown_cells(source: Path) -> list[str]:
    return [c.source for c in jupytext.read(source).cells if c.cell_type == "markdown"]


# What issue 21 found students reading: each must be flagged.
KNOWN_BAD = [
    "ONNX Runtime faster than eager PyTorch per image (steps 3, 6): yes, about 2.5–3×",
    "Dynamic batching keeps latency flat as the rate rises (step 7): partly: batches form (see the stats) "
    "but add no throughput",
    "Instances spread over two GPUs raise GPU utilisation (steps 5, 6): no: no GPU; instances share cores",
    "**Reading it.** On the GPU node both GPUs are now busy. On this CPU two instances share the same "
    "cores, so expect little gain. This run:",
    "**On CPU** a batch costs about its size times one image, so client batching barely raises throughput "
    "here; on the GPU node, expect it to. This run:",
    # and the shapes they come in
    "With batching on, p99 rose by 44 % at the low rate.",
    "ONNX Runtime is 3x quicker here.",
    "Two instances serve no better than one.",
    "A faster model shortens the queue but does not remove it.",
    # what the first scan let through (the review of issue 21)
    "ONNX is 3× faster here: why?",
    "**Try:** set `concurrency = 4` and run again. Throughput doubles.",
    "ONNX Runtime answers in 9 ms, PyTorch in 17 ms.",
]

NOT_CLAIMS = [
    "**Predict.** Will two instances serve more than one here? On the GPU node?",
    "**Try:** set `scaling_concurrency = 16` and rerun: does the largest count gain more now?",
    "Did two instances serve more than one in this run?",
    "**Expected on the GPU node** (the original lab, https://example.org/lab): much faster.",
    "The client sends a float32 tensor of 3 × 224 × 224 values.",
    "vLLM needs compute capability 7.0 or higher.",
    "Here the arrivals are at `rate_fractions` of the measured capacity. What this run shows:",
]


@pytest.mark.parametrize("text", KNOWN_BAD)
def test_known_outcome_claims_are_flagged(text: str) -> None:
    assert claims(text), f"not flagged: {text}"


@pytest.mark.parametrize("text", NOT_CLAIMS)
def test_questions_prompts_and_labelled_expectations_are_not_claims(text: str) -> None:
    assert not claims(text), claims(text)


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_text_states_no_measured_outcome(source: Path) -> None:
    found = [s for cell in markdown_cells(source) for s in claims(cell)]
    assert not found, (f"{source.name} states outcomes a run could contradict; ask them, label them "
                       f"**Expected on the GPU node** with a source, or print them from the data:\n"
                       + "\n".join(f"  - {s}" for s in found))


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_expectations_name_a_source_that_exists(source: Path) -> None:
    for cell in markdown_cells(source):
        for paragraph in re.split(r"\n\s*\n", cell):
            if not paragraph.strip().startswith(LABELS):
                continue
            cited = SOURCE.findall(paragraph)
            assert cited, f"{source.name}: an expectation without its source: {paragraph[:120]}"
            for note in (c for c in cited if c.startswith("docs/")):
                assert (ROOT / note).is_file(), f"{source.name} cites {note}, which does not exist"


def test_introduction_table_is_sourced_and_claims_nothing_about_this_machine() -> None:
    """00's table: what each lesson needs and what to expect where. Its GPU column is the labelled
    expectation (each row with its source); the CPU column says only what a CPU run measures."""
    from servelab.lab import step00_introduction as step

    table = step.lessons()
    assert table.expected_header.startswith("Expected on the GPU node")
    for row in table.rows:
        assert row.source in table.sources, f"{row.lesson}: unknown source {row.source!r}"
        assert not claims(row.cpu_run), f"{row.lesson}: the CPU column states an outcome: {row.cpu_run}"
        assert not claims(row.lesson) and not claims(row.needs), row.lesson
    for note in table.sources.values():
        for path in re.findall(r"docs/decisions/\S+?\.md", note):
            assert (ROOT / path).is_file(), path
    shown = repr(table)
    assert all(row.expected in shown and row.cpu_run in shown for row in table.rows), "no cell cut short"
