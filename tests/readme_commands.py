"""Commands as the README gives them to a new user, for the tests that run them."""

from __future__ import annotations

import re
import shlex

from servelab.core.paths import REPO_ROOT


def engine_command() -> list[str]:
    """The LLM engine's command as the README gives it (its first one in a ```bash block)."""
    blocks = re.findall(r"```bash\n(.*?)```", (REPO_ROOT / "README.md").read_text(), re.S)
    lines = [line for block in blocks for line in block.splitlines()
             if re.match(r"(\.venv/bin/)?python -m servelab\.llm\.engine ", line)]
    assert lines, "the README gives no `python -m servelab.llm.engine` command in a ```bash block"
    return shlex.split(lines[0].split("#")[0])
