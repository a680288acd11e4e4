"""Commands as the README and the guides (``docs/guides/``) give them to a new user, for the tests that run
them."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from servelab.core.paths import REPO_ROOT
from servelab.site.guides import guide_paths

README = REPO_ROOT / "README.md"


def documentation() -> str:
    """The README and every guide, one after the other: what a new user reads."""
    return "\n\n".join(path.read_text(encoding="utf-8") for path in (README, *guide_paths()))


def bash_lines(readme: Path | None = None) -> list[str]:
    """Every command line in the ```bash blocks of ``readme`` (default: the README and the guides), a line
    ending in ``\\`` joined with the next."""
    text = readme.read_text() if readme is not None else documentation()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    return [line.strip() for block in blocks for line in block.replace("\\\n", " ").splitlines()]


def engine_command() -> list[str]:
    """The LLM engine's command as the README gives it (its first one in a ```bash block)."""
    pattern = r"(\.venv/bin/)?python -m servelab\.llm\.engine "
    lines = [line for line in bash_lines() if re.match(pattern, line)]
    assert lines, "no guide gives a `python -m servelab.llm.engine` command in a ```bash block"
    return shlex.split(lines[0].split("#")[0])


def fastapi_command() -> list[str]:
    """The FastAPI service's command as the README gives it (its first ``servelab.serving.serve`` line)."""
    pattern = r"(\.venv/bin/)?python -m servelab\.serving\.serve "
    lines = [line for line in bash_lines() if re.match(pattern, line)]
    assert lines, "no guide gives a `python -m servelab.serving.serve` command in a ```bash block"
    return shlex.split(lines[0].split("#")[0])


def gourmetgram_command(readme: Path | None = None) -> tuple[dict[str, str], list[str]]:
    """GourmetGram's command as ``readme`` (default: the README and the guides) gives it (its first gunicorn
    line): the variables set before it, and its argv."""
    lines = [line for line in bash_lines(readme) if re.search(r"(^|\s)\.venv/bin/gunicorn ", line)]
    where = readme.name if readme else "the guides"
    assert lines, f"{where} give no `.venv/bin/gunicorn` command in a ```bash block"
    words = shlex.split(lines[0].split(" # ")[0])
    env = {}
    while "=" in words[0] and not words[0].startswith("."):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    return env, words


def runnable(argv: list[str]) -> list[str]:
    """``argv`` as run from the lab's folder with this interpreter's venv (``.venv/bin/X`` is its ``X``)."""
    first = argv[0]
    if first.startswith(".venv/bin/"):
        first = str(Path(sys.executable).with_name(first.removeprefix(".venv/bin/")))
    return [first, *argv[1:]]
