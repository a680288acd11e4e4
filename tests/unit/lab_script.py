"""The ``lab`` script in a folder of its own, with stand-ins for what it calls: ``scripts/setup.sh`` and the
venv's ``python`` each append the arguments they got to a log, so a test reads what the script ran."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from servelab.core.paths import REPO_ROOT


def stubbed_lab(folder: Path) -> tuple[Path, Path, dict[str, str]]:
    """(the copied ``lab`` script, the calls log, the environment that points it at the stand-in venv)."""
    (folder / "scripts").mkdir()
    shutil.copy(REPO_ROOT / "lab", folder / "lab")
    log = folder / "calls.log"
    for stub, body in ((folder / "scripts" / "setup.sh", f'echo "setup $*" >> {log}'),
                       (folder / "venv" / "bin" / "python", f'echo "python $*" >> {log}')):
        stub.parent.mkdir(parents=True, exist_ok=True)
        stub.write_text(f"#!/usr/bin/env bash\n{body}\n")
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    return folder / "lab", log, {**os.environ, "VENV": str(folder / "venv")}
