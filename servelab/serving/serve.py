"""Start a FastAPI inference service: uvicorn with ``WORKERS`` processes, the port checked, the URL said.

``python -m servelab.serving.serve fastapi_onnx.app:app --port 8000 [--host 0.0.0.0] [--workers 2]``
is what the Dockerfiles' CMD and the local target run. Contract:

- the port is bound here, before anything loads: a taken port (or a host that is not this machine's)
  stops the start with one line on stderr that names the option to change, and exit status 1;
- then one line on stdout says the URL it serves on and how many worker processes it starts;
- ``--workers`` (default ``$WORKERS``, else 1) worker processes each import the app, load the model
  and serve the one socket (uvicorn's supervisor; it replaces a worker that dies). With more than
  one, their Prometheus samples go to a fresh folder (``PROMETHEUS_MULTIPROC_DIR``, removed at exit)
  so that ``/metrics`` reports all of them, and ``WORKERS`` is set for the workers, whose settings
  divide the cores by it (``settings.py``);
- exit status 3 when the app failed to start (a bad setting, a missing model: the app's one line).
"""
# why: docs/decisions/2026-11-28-fastapi-stages-and-workers.md

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

from servelab.core.procs import PortError, bind_port, taken_port_line
from servelab.serving.settings import MULTIPROC_VARIABLE, SettingsError, processes_from_env


class StartError(RuntimeError):
    """The service cannot start as asked; the message says what to change."""


def listen_socket(host: str, port: int) -> socket.socket:
    """The bound (not yet listening) socket uvicorn will serve on, made as uvicorn makes its own."""
    try:
        sock = bind_port(host, port)
    except PortError as exc:
        raise StartError(f"{exc} (--port, --host)") from None
    if sock is None:  # worded as every lab server words it, with a port free now
        raise StartError(taken_port_line("", host, port, "--port {port}").removeprefix(": "))
    sock.set_inheritable(True)
    return sock


def url_of(host: str, port: int) -> str:
    """The URL a client on this machine uses; where the host is every interface, says so."""
    if host in ("0.0.0.0", "::", ""):
        return f"http://127.0.0.1:{port} (listening on every interface, {host or '0.0.0.0'})"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def shared_metrics_folder(workers: int) -> Path | None:
    """With several workers: an empty folder for their Prometheus samples, named in the environment the
    workers inherit, returned to be removed at the end. A folder the user named is emptied of old samples
    (as prometheus_client asks), whatever the workers, and kept."""
    given = os.environ.get(MULTIPROC_VARIABLE)
    if workers < 2 and not given:
        return None
    if given:
        folder = Path(given)
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.db"):
            old.unlink()
        return None  # the user's folder: emptied, not removed
    folder = Path(tempfile.mkdtemp(prefix="servelab-metrics-"))
    os.environ[MULTIPROC_VARIABLE] = str(folder)
    return folder


def serve(app: str, sock: socket.socket, workers: int, access_log: bool) -> int:
    """Run uvicorn on ``sock`` with ``workers`` processes until it is stopped; its exit status."""
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(app, host=host, port=port, workers=workers, access_log=access_log)
    if workers == 1:
        server = uvicorn.Server(config)
        server.run(sockets=[sock])
        return 0 if server.started else STARTUP_FAILURE
    supervisor = Multiprocess(config, sockets=[sock])
    supervisor.run()
    failed = any(p.exitcode == STARTUP_FAILURE for p in supervisor.processes)
    return STARTUP_FAILURE if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servelab.serving.serve",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("app", help="the app as uvicorn names it, e.g. fastapi_onnx.app:app")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    parser.add_argument("--workers", type=int, help="worker processes (default: $WORKERS, else 1)")
    parser.add_argument("--no-access-log", action="store_true", help="no log line per request")
    args = parser.parse_args(argv)
    name = args.app.split(".")[0]
    try:
        workers = args.workers if args.workers is not None else processes_from_env()
        if workers < 1:
            raise SettingsError(f"--workers {workers} must be at least 1")
        sock = listen_socket(args.host, args.port)
    except (SettingsError, StartError) as exc:
        print(f"{name} cannot start: {exc}", file=sys.stderr)
        return 1
    os.environ["WORKERS"] = str(workers)  # the workers' settings divide the cores by it
    folder = shared_metrics_folder(workers)
    processes = f"{workers} worker processes" if workers > 1 else "1 worker process"
    print(f"{name}: serving on {url_of(args.host, sock.getsockname()[1])} with {processes} (WORKERS); "
          "/health answers 200 once the model is loaded, /docs is the API's page", flush=True)
    try:
        return serve(args.app, sock, workers, access_log=not args.no_access_log)
    finally:
        sock.close()
        if folder is not None:  # ours: gone, and no longer named (main may run inside another program)
            shutil.rmtree(folder, ignore_errors=True)
            os.environ.pop(MULTIPROC_VARIABLE, None)


if __name__ == "__main__":
    sys.exit(main())
