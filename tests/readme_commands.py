"""Commands as the README gives them to a new user, for the tests that run them."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from servelab.core.paths import REPO_ROOT


def bash_lines(readme: Path = REPO_ROOT / "README.md") -> list[str]:
    """Every command line in the file's ```bash blocks, a line ending in ``\\`` joined with the next."""
    blocks = re.findall(r"```bash\n(.*?)```", readme.read_text(), re.S)
    return [line.strip() for block in blocks for line in block.replace("\\\n", " ").splitlines()]


def engine_command() -> list[str]:
    """The LLM engine's command as the README gives it (its first one in a ```bash block)."""
    pattern = r"(\.venv/bin/)?python -m servelab\.llm\.engine "
    lines = [line for line in bash_lines() if re.match(pattern, line)]
    assert lines, "the README gives no `python -m servelab.llm.engine` command in a ```bash block"
    return shlex.split(lines[0].split("#")[0])


def fastapi_command() -> list[str]:
    """The FastAPI service's command as the README gives it (its first ``servelab.serving.serve`` line)."""
    pattern = r"(\.venv/bin/)?python -m servelab\.serving\.serve "
    lines = [line for line in bash_lines() if re.match(pattern, line)]
    assert lines, "the README gives no `python -m servelab.serving.serve` command in a ```bash block"
    return shlex.split(lines[0].split("#")[0])


def gourmetgram_command(readme: Path = REPO_ROOT / "README.md") -> tuple[dict[str, str], list[str]]:
    """GourmetGram's command as ``readme`` gives it (its first gunicorn line): the variables set before
    it, and its argv."""
    lines = [line for line in bash_lines(readme) if re.search(r"(^|\s)\.venv/bin/gunicorn ", line)]
    assert lines, f"{readme.name} gives no `.venv/bin/gunicorn` command in a ```bash block"
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
