"""gunicorn's settings for GourmetGram. From the lab's folder: ``.venv/bin/gunicorn -c
flask_app/gunicorn_conf.py --bind 127.0.0.1:5000 --threads 4 "flask_app.app:create_app()"``.

Flags on the command line override the values here. Before any worker starts, the app's settings are
read and its upload folder opened (a bad value stops gunicorn with one line naming the variable) and
each address is tried (a port already taken stops it with one line naming ``--bind``). Once it
listens, one line says the URL, the backend and where the uploads are kept within which bound.
"""

from __future__ import annotations

import sys
from typing import Any

bind = ["127.0.0.1:5000"]
threads = 4  # one worker's threads share its backend client (flask_app/backends.py)
timeout = 60


def on_starting(server: Any) -> None:
    """Refuse, in one line each, a setting the app cannot use and an address another program holds."""
    from flask_app.settings import SettingsError
    from servelab.core.procs import PortError, bind_port, taken_port_line

    try:
        _, uploads = _app_settings(server)
        uploads.open()
    except SettingsError as exc:
        _refuse(f"GourmetGram: {exc}")
    except OSError as exc:
        _refuse(f"GourmetGram: cannot write its upload folder {exc.filename or ''} ({exc.strerror}): "
                "set INSTANCE_PATH to a folder it may write")
    for address in server.cfg.address:
        if isinstance(address, tuple):
            host, port = str(address[0]), int(address[1])
            try:
                probe = bind_port(host, port)
            except PortError as exc:
                _refuse(f"GourmetGram: {exc} (--bind HOST:PORT)")
            if probe is None:
                _refuse(taken_port_line("GourmetGram", host, port, f"--bind {host}:{{port}}"))
            else:
                probe.close()


def when_ready(server: Any) -> None:
    """One line: where the page is served, its backend, and where uploads go within which bound."""
    settings, uploads = _app_settings(server)
    urls = ", ".join(str(listener) for listener in server.LISTENERS)
    server.log.info("GourmetGram serving on %s (backend %s at %s; uploads kept in %s within %s)", urls,
                    settings.backend, settings.backend_url, uploads.folder, uploads.describe())


def _app_settings(server: Any) -> tuple[Any, Any]:
    from flask_app.settings import Settings
    from flask_app.uploads import UploadFolder

    settings = Settings.from_env()
    return settings, UploadFolder(settings.upload_dir, settings.uploads_max_bytes, settings.uploads_max_files,
                                  server.log)


def _refuse(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
    sys.exit(1)
