"""A process whose parent died (Triton's model stubs after a killed kernel took their server down) is
adopted by the headless runner and stopped before the next notebook, instead of living on under init."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_an_orphan_is_adopted_and_stopped() -> None:
    # in a process of its own: the test must not make pytest itself a subreaper
    script = textwrap.dedent("""
        import os, subprocess, sys, time
        import psutil
        from servelab.core import procs
        adopting = procs.orphans_adopted()
        assert adopting.__enter__()
        before = procs.children()
        # a parent that starts a sleeper in its own session (as Triton starts its stubs) and dies at once
        subprocess.run([sys.executable, "-c", "import subprocess, sys; subprocess.Popen("
                        "[sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)"])
        time.sleep(0.5)
        orphans = [c for c in psutil.Process().children() if c.pid not in before]
        assert len(orphans) == 1, orphans  # ours now, not init's
        name = orphans[0].name()
        assert procs.stop_new_children(before, grace=2.0) == [name]
        assert not orphans[0].is_running()  # stopped and reaped
        adopting.__exit__(None, None, None)
        subprocess.run([sys.executable, "-c", "import subprocess, sys; subprocess.Popen("
                        "[sys.executable, '-c', 'import time; time.sleep(2)'], start_new_session=True)"])
        time.sleep(0.5)
        assert [c for c in psutil.Process().children() if c.pid not in before] == []  # init's again
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
