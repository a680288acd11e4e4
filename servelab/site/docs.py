"""The repository's ``docs/…`` files the handout names, as pages of the site: a decision note
(``docs/decisions/x.md``) becomes ``docs/decisions/x.html``, rendered as MyST like the notebooks' prose, in
UTF-8, read on a phone as every page is; another text file (``docs/ci/gitlab-ci.yml``) becomes a page holding
it as highlighted code. Each links its source in the repository when the site knows it, and the ``docs/…``
files it names in turn become pages too. A guide (``docs/guides/*.md``, ``listed``) is a page of the sidebar
rather than one reached by links only, its generated blocks filled (``servelab.site.guides``) and its
images copied beside it. Why: docs/decisions/2026-11-28-gpu-reference-and-site-third-pass.md
"""

from __future__ import annotations

import html
import posixpath
import re
import shutil
from pathlib import Path

from servelab.site import guides
from servelab.site.links import Links, link_doc_references, referenced_file
from servelab.site.outputs import LANGUAGES, fence

ORPHAN = "---\norphan: true\n---\n\n"  # a page of the site reached by its links, not the sidebar's list
# a note named by its file name alone, as notes name their siblings: `2026-11-26-handout-site-second-pass.md`
SIBLING = re.compile(r"(?<![\w/.\-\[<\"'=])(`?)(\d{4}-\d{2}-\d{2}-[\w.\-]+?\.md)\1(?![\w/-])")


OUTSIDE = re.compile(r"\[([^\]]+)\]\(\.\./\.\./([^)#\s]+)(#[^)\s]*)?\)")


class DocPages:
    """The ``docs/…`` pages of one build: ``href`` names a page (and asks for it), ``write`` writes every page
    asked for into the Sphinx source folder ``src``, with the files those name."""

    def __init__(self, links: Links, src: Path) -> None:
        self.links, self.src = links, src
        self.asked: dict[str, Path] = {}  # repository path → the checkout's file
        self.written: set[str] = set()
        self.listed: dict[str, dict[str, guides.Fill]] = {}  # a guide in the sidebar → its blocks' fills

    def add_guide(self, path: Path, fills: dict[str, guides.Fill] | None = None) -> str:
        """Guide ``path`` (a file under ``docs/guides/``) as a page of the sidebar; returns its page's name
        in the Sphinx source (``docs/guides/x``). ``fills``: its generated blocks, by name."""
        relative = f"docs/guides/{Path(path).name}"
        self.asked[relative] = Path(path)
        self.listed[relative] = dict(fills or {})
        return relative.removesuffix(".md")

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
        if path in self.listed:
            text = guides.fill_blocks(text, self.listed[path])
            # a link to a repository file outside the guides (../../docker/README.md): its page here, or its
            # address in the repository, or its path as text
            text = OUTSIDE.sub(lambda m: self._outside(m, here), text)

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
            return ("" if path in self.listed else ORPHAN) + "\n".join(lines)
        language = LANGUAGES.get(Path(path).suffix) or LANGUAGES.get(Path(path).name, "text")
        marks = fence(text)
        return ORPHAN + f"# {path}\n\n{source}\n\n{marks}{language}\n{text.rstrip()}\n{marks}\n"

    def _outside(self, match: re.Match[str], here: str) -> str:
        words, path, anchor = match.group(1), match.group(2), match.group(3) or ""
        target = self.href(path) if path.startswith("docs/") else self.links.file(path)
        if not target:
            return words if words.strip("`") == path else f"{words} ({path})"
        if "://" not in target:
            target = posixpath.relpath(target, here)
        shown = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(words, quote=False))
        # inline HTML, not a page of the site
        return f'<a class="reference external" href="{html.escape(target + anchor)}">{shown}</a>'

    def write(self) -> None:
        """Every page asked for so far, and those their own text asks for."""
        while pending := [p for p in self.asked if p not in self.written]:
            for path in pending:
                self.written.add(path)
                target = self.src / (self.page_of(path).removesuffix(".html") + ".md")
                target.parent.mkdir(parents=True, exist_ok=True)
                text = self._source(path, self.asked[path])
                target.write_text(text, encoding="utf-8")
                for image in guides.images(text):  # shown beside the page, as in the repository
                    found = (self.asked[path].parent / image).resolve()
                    if found.is_file() and found.is_relative_to(self.asked[path].parent.resolve()):
                        (target.parent / image).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(found, target.parent / image)
