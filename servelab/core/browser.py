"""Where a student's browser reaches a server of the lab that listens on the Docker host's loopback only
(servelab.core.exposure): through the node's Jupyter server, behind its token. jupyter-server-proxy
serves ``http://localhost:PORT/PATH`` at ``<the Jupyter server>/proxy/PORT/PATH`` and names that prefix in
``X-Forwarded-Prefix``; :func:`proxied_scope` gives it to a FastAPI app as its ``root_path``, so its
Swagger page asks for ``/proxy/PORT/openapi.json``. :func:`in_browser` says where to open a URL.
Why: docs/decisions/2026-12-01-exposure.md
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping
from typing import Any
from urllib.parse import urlsplit

PROXY_SETTING = "SERVELAB_BROWSER_PROXY"  # docker-compose-jupyter.yaml sets it to "/proxy/" in the container
_PREFIX = re.compile(r"/proxy/\d{1,5}")  # what jupyter-server-proxy sends, and nothing else is taken


def proxied_scope(scope: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """``scope`` with ``root_path`` set to the proxy's prefix when jupyter-server-proxy forwarded the request
    (its ``X-Forwarded-Prefix``, only of the form ``/proxy/PORT``); otherwise as it is."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"x-forwarded-prefix":
            prefix = value.decode("latin-1").rstrip("/")
            if _PREFIX.fullmatch(prefix) and not scope.get("root_path"):
                return {**scope, "root_path": prefix}
    return scope


def in_browser(url: str, environ: MutableMapping[str, str] | None = None) -> str:
    """Where a browser opens ``url`` (a server of the lab on this host): in the node's Jupyter container,
    the path under this Jupyter server (``/proxy/8000/docs``, after the server's address); elsewhere
    ``url`` itself."""
    proxy = (os.environ if environ is None else environ).get(PROXY_SETTING, "")
    parts = urlsplit(url)
    if not proxy or parts.hostname not in ("localhost", "127.0.0.1") or not parts.port:
        return url
    return f"{proxy.rstrip('/')}/{parts.port}{parts.path or '/'}" + (f"?{parts.query}" if parts.query else "")
