"""What a page does with a run's outputs: the figures among them (image outputs, and images embedded in an
HTML output, which are written as files of their own), written under the site's ``_figures/`` and shown so
that they open at full size; the tables and what a cell printed (its reading); a printed project file
(``common.show_code``/``show_file``) as highlighted code; the ``docs/…`` files a markdown output names as
links. Used by ``servelab.site.pages`` and ``servelab.site.compare``.
"""

from __future__ import annotations

import base64
import copy
import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from servelab.site.links import link_doc_references

IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/svg+xml": "svg"}
FIGURES = "_figures"  # in the built site: the figures written here (compared, or taken out of HTML)
_EMBEDDED = re.compile(r'<img\b[^>]*?\bsrc="data:(image/(?:png|jpeg|svg\+xml));base64,([^"]+)"[^>]*>', re.S)
_CAPTION = re.compile(r"<figcaption>(.*?)</figcaption>", re.S)
_LISTED = re.compile(r"^# (\S+?)(?:,| \()", re.M)  # common.show_code/show_file: "# path, lines …"
LANGUAGES = {".py": "python", ".sh": "bash", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml",
             ".json": "json", ".pbtxt": "protobuf", ".cfg": "ini", ".ini": "ini", ".md": "markdown",
             "Dockerfile": "docker", "Makefile": "make"}


def fence(text: str) -> str:
    """A code fence longer than any run of backticks in ``text``."""
    return "`" * max([3, *(len(run) + 1 for run in re.findall(r"`+", text))])


def raw_html(markup: str) -> Any:
    """A markdown cell holding ``markup`` as it is (MyST's raw directive: blank lines and all)."""
    marks = fence(markup)
    return nbformat.v4.new_markdown_cell(f"{marks}{{raw}} html\n{markup}\n{marks}")


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _rich(output: Any) -> dict[str, Any]:
    return output.get("data", {}) if output.get("output_type") in ("display_data", "execute_result") else {}


@dataclass(frozen=True)
class Figure:
    """One figure of a cell's outputs: its file's extension, its bytes, the caption it came with."""

    ext: str
    data: bytes
    caption: str = ""


def figures_of(outputs: Sequence[Any]) -> list[Figure]:
    """The figures among a cell's outputs, in order: image outputs and images embedded in HTML outputs."""
    found = []
    for output in outputs:
        data = _rich(output)
        image = next(((mime, ext) for mime, ext in IMAGE_TYPES.items() if mime in data), None)
        if image is not None:
            text = _text(data[image[0]])
            found.append(Figure(image[1], text.encode() if image[1] == "svg" else base64.b64decode(text)))
        elif "text/html" in data:
            markup = _text(data["text/html"])
            caption = " ".join(html.unescape(re.sub(r"<[^>]+>", "", c)) for c in _CAPTION.findall(markup))
            for match in _EMBEDDED.finditer(markup):
                ext = IMAGE_TYPES[match.group(1)]
                found.append(Figure(ext, base64.b64decode(match.group(2)), caption.strip()))
    return found


def has_figure(output: Any) -> bool:
    data = _rich(output)
    return any(m in data for m in IMAGE_TYPES) or bool(_EMBEDDED.search(_text(data.get("text/html", ""))))


def without_figures(outputs: Sequence[Any]) -> list[Any]:
    return [o for o in outputs if not has_figure(o)]


def tables_of(outputs: Sequence[Any]) -> list[str]:
    """The HTML tables among a cell's outputs (a DataFrame's ``_repr_html_``), in order."""
    return [_text(_rich(o)["text/html"]) for o in outputs
            if "<table" in _text(_rich(o).get("text/html", "")) and not has_figure(o)]


def reading_of(outputs: Sequence[Any]) -> str:
    """What a cell printed (its reading of the numbers), less the lines that name a saved plot's file."""
    printed = "".join(_text(o["text"]) for o in outputs if o.get("output_type") == "stream")
    lines = [line for line in printed.splitlines() if not line.startswith("plot saved: ")]
    return "\n".join(lines).strip()


class FigureFiles:
    """Writes figures under ``folder`` (the site's ``_figures/``) as ``<stem>-cell<N>-<side>-<k>.<ext>``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def write(self, stem: str, index: int, side: str, k: int, figure: Figure) -> str:
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"{stem}-cell{index}-{side}-{k}.{figure.ext}"
        (self.folder / name).write_bytes(figure.data)
        return f"{FIGURES}/{name}"


def img(href: str, alt: str) -> str:
    """An image that opens at its full size when tapped."""
    return (f'<a class="servelab-full" href="{href}" title="open full size">'
            f'<img src="{href}" alt="{html.escape(alt)}"></a>')


def externalised(outputs: Sequence[Any], write: Callable[[int, Figure], str]) -> list[Any]:
    """The outputs with each figure embedded in an HTML output written as a file and linked from there."""
    done, count = [], 0
    for output in outputs:
        data = _rich(output)
        markup = _text(data.get("text/html", ""))
        if "text/html" in data and _EMBEDDED.search(markup):
            def to_file(match: re.Match[str]) -> str:
                nonlocal count
                ext = IMAGE_TYPES[match.group(1)]
                href = write(count, Figure(ext, base64.b64decode(match.group(2))))
                count += 1
                alt = re.search(r'\balt="([^"]*)"', match.group(0))
                return img(href, html.unescape(alt.group(1)) if alt else "figure")

            output = copy.deepcopy(output)
            output["data"]["text/html"] = _EMBEDDED.sub(to_file, markup)
        done.append(output)
    return done


def listing(source: str, outputs: list[Any]) -> list[Any]:
    """A cell that prints project files (``common.show_code``/``show_file``): its printout as highlighted
    code, one block per file, in the language of the file's name. Other cells' outputs are left as is."""
    if not re.match(r"\s*(common\.)?show_(code|file)\(", source):
        return outputs
    done = []
    for output in outputs:
        if output.get("output_type") != "stream":
            done.append(output)
            continue
        text = _text(output["text"])
        starts = [m.start() for m in _LISTED.finditer(text)] or [0]
        blocks = []
        for begin, end in zip([0, *starts[1:]], [*starts[1:], len(text)], strict=True):
            chunk = text[begin:end].rstrip("\n")
            named = _LISTED.match(chunk)
            path = Path(named.group(1)) if named else Path()
            language = LANGUAGES.get(path.suffix) or LANGUAGES.get(path.name, "text")
            marks = fence(chunk)
            blocks.append(f"{marks}{language}\n{chunk}\n{marks}")
        done.append(nbformat.v4.new_output("display_data", data={"text/markdown": "\n\n".join(blocks),
                                                                 "text/plain": text}))
    return done


def linked(outputs: list[Any], docs: Callable[[str], str] | None) -> list[Any]:
    """The outputs with each ``docs/…`` file a markdown output or a printout names made a link (copies:
    the download keeps the outputs as they are). A printout that names one becomes the same text as
    HTML, in the box a printout has; one with terminal colours (a warning) is left as it is."""
    done = []
    for output in outputs:
        markdown = _rich(output).get("text/markdown")
        if markdown is not None and docs:
            output = copy.deepcopy(output)
            output["data"]["text/markdown"] = link_doc_references(_text(markdown), docs)
        elif docs and output.get("output_type") == "stream" and output.get("name") == "stdout":
            text = _text(output.get("text", ""))
            escaped = html.escape(text, quote=False)
            if "\x1b" not in text and (shown := link_doc_references(escaped, docs)) != escaped:
                output = nbformat.v4.new_output("display_data", data={
                    # the classes myst-nb gives a printout, so that it looks like the others
                    "text/html": ('<div class="output stream highlight-myst-ansi notranslate '
                                  'servelab-printout"><div class="highlight">'
                                  f'<pre>{shown}</pre></div></div>'),
                    "text/plain": text})
        done.append(output)
    return done
