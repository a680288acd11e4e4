"""The repository's ``docs/…`` files the handout names, as pages of the site: a decision note
(``docs/decisions/x.md``) becomes ``docs/decisions/x.html``, rendered as MyST like the notebooks' prose, in
UTF-8, read on a phone as every page is; another text file (``docs/ci/gitlab-ci.yml``) becomes a page holding
it as highlighted code. Each links its source in the repository when the site knows it, and the ``docs/…``
files it names in turn become pages too. Why: docs/decisions/2026-11-28-gpu-reference-and-site-third-pass.md
"""

from __future__ import annotations

import html
import posixpath
import re
from pathlib import Path

from servelab.site.links import Links, link_doc_references, referenced_file
from servelab.site.outputs import LANGUAGES, fence

ORPHAN = "---\norphan: true\n---\n\n"  # a page of the site reached by its links, not the sidebar's list
# a note named by its file name alone, as notes name their siblings: `2026-11-26-handout-site-second-pass.md`
SIBLING = re.compile(r"(?<![\w/.\-\[<\"'=])(`?)(\d{4}-\d{2}-\d{2}-[\w.\-]+?\.md)\1(?![\w/-])")


class DocPages:
    """The ``docs/…`` pages of one build: ``href`` names a page (and asks for it), ``write`` writes every page
    asked for into the Sphinx source folder ``src``, with the files those name."""

    def __init__(self, links: Links, src: Path) -> None:
        self.links, self.src = links, src
        self.asked: dict[str, Path] = {}  # repository path → the checkout's file
        self.written: set[str] = set()

    @staticmethod
    def page_of(path: str) -> str:
        """The page a file becomes: ``docs/decisions/x.md`` → ``docs/decisions/x.html``, ``a.yml`` →
        ``a.yml.html``."""
        return (path.removesuffix(".md") if path.endswith(".md") else path) + ".html"

    def href(self, path: str) -> str:
        """The link for ``path`` from a page at the site's top: its page here; a file the checkout lacks, its
        address in the repository ("" without one)."""
        found = referenced_file(path)
        if found is None:
            return self.links.file(path)
        self.asked.setdefault(path, found)
        return self.page_of(path)

    def _source(self, path: str, found: Path) -> str:
        text = found.read_text(encoding="utf-8", errors="replace")
        here = posixpath.dirname(path)

        def relative(other: str) -> str:
            target = self.href(other)
            return posixpath.relpath(target, here) if target and "://" not in target else target

        address = self.links.file(path)
        source = (f'<p class="servelab-links"><a class="servelab-source" href="{html.escape(address)}">'
                  f"Its source in the repository ({html.escape(path)})</a></p>") if address else ""
        if path.endswith(".md"):
            def linked(part: str) -> str:  # a sibling's bare name gets its folder, then every path a link
                return link_doc_references(SIBLING.sub(
                    lambda m: m.group(0).replace(m.group(2), f"{here}/{m.group(2)}")
                    if referenced_file(f"{here}/{m.group(2)}") else m.group(0), part), relative)

            parts = text.split("```")  # the odd parts are fenced code: left as they are
            body = "```".join(linked(part) if k % 2 == 0 else part for k, part in enumerate(parts))
            lines = body.split("\n")
            first = next((i for i, line in enumerate(lines) if line.startswith("# ")), None)
            if first is None:
                lines.insert(0, f"# {path}\n")
                first = 0
            if source:
                lines.insert(first + 1, f"\n{source}\n")
            return ORPHAN + "\n".join(lines)
        language = LANGUAGES.get(Path(path).suffix) or LANGUAGES.get(Path(path).name, "text")
        marks = fence(text)
        return ORPHAN + f"# {path}\n\n{source}\n\n{marks}{language}\n{text.rstrip()}\n{marks}\n"

    def write(self) -> None:
        """Every page asked for so far, and those their own text asks for."""
        while pending := [p for p in self.asked if p not in self.written]:
            for path in pending:
                self.written.add(path)
                target = self.src / (self.page_of(path).removesuffix(".html") + ".md")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(self._source(path, self.asked[path]), encoding="utf-8")
