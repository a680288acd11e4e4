"""What an executed notebook shows that is not for its reader (the headless run's quietness check)."""

from __future__ import annotations

import re
from typing import Any

# How Python shows a warning: "<file>.py:<line>: <Category>: <message>" (then the source line)
WARNING_LINE = re.compile(r"^.*\.py:\d+: \w*Warning: ", re.M)


def noise(nb: Any) -> list[str]:
    """Each stderr output of ``nb``'s code cells (a red box in Jupyter), and each output of any kind
    holding a Python warning line (file, line number, category), as ``"cell N: <text>"``; [] when quiet.

    A lab warning (``servelab.core.notices.LabWarning``) printed the way Python prints warnings is
    caught either way: on stderr, or as a file:line line wherever it landed.
    """
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            text = output.get("text", "")
            if output.get("output_type") != "stream":
                data = output.get("data", {})
                text = data.get("text/plain", "") if isinstance(data, dict) else ""
            text = "".join(text) if isinstance(text, list) else str(text)
            if output.get("name") == "stderr" or WARNING_LINE.search(text):
                found.append(f"cell {index}: {text.strip()[:200]}")
    return found


# a missing value as pandas or Python prints it, standing alone in a table cell or after a field's name
# (not "None: …", a parameter's meaning saying what the value None does, nor prose's "None of")
MISSING = re.compile(r"(?<![\w.'\"=])(None|NaN|nan|<NA>)(?![\w'\"(:]| of\b)")
HTML_MISSING = re.compile(r"<td>\s*(None|NaN|nan|&lt;NA&gt;)\s*</td>")
# an absolute path under a machine's own folders (not a URL's path: those follow a host or port)
ABSOLUTE = re.compile(r"(?<![\w.~$:/-])/(?:home|root|tmp|work|var|usr|opt|srv|mnt|etc|private|Users)/"
                      r"[^\s'\",)]*")
NO_REFERENCE = re.compile(r"no GPU reference", re.I)
LISTING = re.compile(r"^# \S+(, lines \d+-\d+: | \(\d+ lines\)| \(lines \d+-\d+ of \d+\))", re.M)


def _outputs(nb: Any) -> list[tuple[int, str, str]]:
    """(cell index, kind, text) of each output of ``nb``'s code cells: streams (a cell's consecutive
    outputs to one stream joined: a kernel may split one print's text in two), plain and HTML views."""
    found: list[tuple[int, str, str]] = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        stream = None
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                text = output.get("text", "")
                text = "".join(text) if isinstance(text, list) else str(text)
                if stream == output.get("name"):
                    found[-1] = (index, "text", found[-1][2] + text)
                else:
                    found.append((index, "text", text))
                stream = output.get("name")
                continue
            stream = None
            data = output.get("data", {}) if isinstance(output.get("data"), dict) else {}
            for kind in ("text/plain", "text/html"):
                text = data.get(kind, "")
                found.append((index, kind, "".join(text) if isinstance(text, list) else str(text)))
    return found


def untidy(nb: Any) -> list[str]:
    """What an executed notebook shows that a student should never see, as ``"cell N: <what>"``: a
    missing value printed as None, NaN or <NA> (a table cell or a field; a blank is how a missing value
    reads), an absolute path of the machine that ran it (its checkout, a temp folder, a venv; commands
    and files are shown relative to the checkout, ``$SERVELAB_RESULTS/…`` or ``~/…``), and the
    "no GPU reference" line more than once. Code listings (``common.show_code``/``show_file``: they
    start with the file's name) are the project's own text and are not read for missing values."""
    found = []
    no_reference = 0
    for index, kind, text in _outputs(nb):
        if kind == "text/html":
            found += [f"cell {index}: a table cell reads {m.group(1)}" for m in HTML_MISSING.finditer(text)]
        elif not LISTING.search(text):
            for line in text.splitlines():
                if (m := MISSING.search(line)) and not line.lstrip().startswith(("$ ", "#")):
                    found.append(f"cell {index}: {m.group(1)} in {line.strip()[:160]!r}")
        if kind != "text/html":
            found += [f"cell {index}: absolute path {m.group(0)!r}" for m in ABSOLUTE.finditer(text)]
            no_reference += len(NO_REFERENCE.findall(text))
    if no_reference > 1:
        found.append(f"the 'no GPU reference' line {no_reference} times (once per notebook)")
    return found


# a verdict's one line as servelab.report.verdicts prints it (its details follow, indented)
VERDICT = re.compile(r"^(observed|NOT observed|too noisy to call|cannot show here): .+$", re.M)
LEGEND_CHARS = 100  # an explanatory line at least this long is a legend or a reason: said once per notebook
MOST_COLUMNS = 9


def _plain(nb: Any) -> list[tuple[int, str, bool]]:
    """(cell index, text, whether it is a table's text) of each stream and plain-text output."""
    found = []
    for index, kind, text in _outputs(nb):
        if kind == "text":
            found.append((index, text, False))
        elif kind == "text/plain":
            cell = nb.cells[index]
            html = "".join("".join(o.get("data", {}).get("text/html", "")) for o in cell.get("outputs", [])
                           if isinstance(o.get("data"), dict))
            found.append((index, text, "<table" in html))
    return found


def verdict_lines(nb: Any) -> list[str]:
    """Every verdict's one line in ``nb``'s outputs (the line before its folded details)."""
    return [m.group(0) for _, text, _ in _plain(nb) for m in VERDICT.finditer(text)]


def long_verdicts(nb: Any, most: int = 200) -> list[str]:
    """The verdict lines longer than ``most`` characters: a student reads each at a glance."""
    return [f"{len(line)} characters: {line[:120]}…" for line in verdict_lines(nb) if len(line) > most]


def repeated_legends(nb: Any, least: int = LEGEND_CHARS) -> list[str]:
    """Explanatory lines (a legend, a definition, a reason under a verdict: ``least`` characters or more,
    not a code listing, a command, a table's row, a listing's row (it starts with a number: a process
    seen again) or a progress line (it ends with "...": a server started again)) that ``nb`` prints more
    than once."""
    seen: dict[str, list[int]] = {}
    for index, text, table in _plain(nb):
        if table or LISTING.search(text):
            continue
        for line in text.splitlines():
            said = line.strip()
            if (len(said) >= least and not said.startswith(("$ ", "# ")) and not said[:1].isdigit()
                    and not said.endswith(("...", "…"))):
                seen.setdefault(said, []).append(index)
    return [f"cells {cells}: {said[:120]}…" for said, cells in seen.items() if len(cells) > 1]


def wide_tables(nb: Any, most: int = MOST_COLUMNS) -> list[str]:
    """HTML tables in ``nb``'s outputs with more than ``most`` columns (the widest row, row names
    included)."""
    found = []
    for index, kind, text in _outputs(nb):
        if kind != "text/html":
            continue
        for table in re.findall(r"<table.*?</table>", text, re.S):
            rows = re.findall(r"<tr.*?</tr>", table, re.S)
            widest = max((len(re.findall(r"<t[hd][\s>]", row)) for row in rows), default=0)
            if widest > most:
                found.append(f"cell {index}: a table {widest} columns wide")
    return found
