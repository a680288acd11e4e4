"""The key that opens Triton's model control to the lab's own clients, and those clients.

Every Triton the lab starts restricts its model-control, shared-memory, trace and logging APIs
(``servelab.triton.command.RESTRICTED_APIS``) to requests that carry ``KEY_HEADER`` with the key in
``KEY_FILE`` (the checkout's ``.triton-admin-key``: 192 random bits, mode 600, made by whichever of the lab's
parts needs it first: ``scripts/docker_host.sh``, a stack, a local server). The compose stack hands the
file to the Triton container as a secret; the local server gets the key on its command line. The lab's
clients (:func:`control_client`) send it; a load request from anyone else is refused (HTTP 403). Why:
docs/decisions/2026-12-01-exposure.md
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from servelab.core.keys import key_in
from servelab.core.paths import REPO_ROOT
from servelab.triton.command import KEY_HEADER, SHOWN_KEY

KEY_FILE = REPO_ROOT / ".triton-admin-key"
KEY_SETTING = "SERVELAB_TRITON_KEY_FILE"  # another file (a test's, a second checkout's own)


def key_file() -> Path:
    return Path(os.environ.get(KEY_SETTING) or KEY_FILE)


def admin_key(path: Path | None = None) -> str:
    """The lab's key, made (mode 600, 48 hex digits) when the file is missing or empty."""
    return key_in(Path(path or key_file()))


def headers(path: Path | None = None) -> dict[str, str]:
    """The header a raw request to a restricted API needs."""
    return {KEY_HEADER: admin_key(path)}


def curl_header() -> str:
    """The key as a shown ``curl`` line sends it: read from its file by the shell, never printed."""
    return f'-H "{KEY_HEADER}: {SHOWN_KEY}"'


def control_client(url: str, **options: Any) -> Any:
    """A tritonclient HTTP client for ``url`` (host:port) that sends the lab's key with every request."""
    import tritonclient.http as httpclient
    from tritonclient._plugin import InferenceServerClientPlugin

    class AdminKey(InferenceServerClientPlugin):
        def __init__(self, key: str) -> None:
            self.key = key

        def __call__(self, request: Any) -> None:
            request.headers[KEY_HEADER] = self.key

    client = httpclient.InferenceServerClient(url, **options)
    client.register_plugin(AdminKey(admin_key()))
    return client
