"""What answers on the node's public address (notebook 02's last cell): the node's listening TCP sockets,
read over SSH (``ss -Hltn``), checked against the lab's one allowlist (``servelab.core.exposure.PUBLIC``:
SSH, the node's Jupyter server, GourmetGram). Anything else listening beyond loopback stops the notebook
with one line that names it (a ``ProvisioningError``). Why: docs/decisions/2026-12-01-exposure.md
"""

from __future__ import annotations

from typing import Any

from provisioning import messages as msg
from provisioning.config import ChameleonConfig, ProvisioningError
from provisioning.node import run_on_node
from servelab.core.exposure import (
    LISTENING_COMMAND,
    PUBLIC,
    Listener,
    allowlist_text,
    outside_allowlist,
    parse_ss,
)


def check_exposure(node: Any, config: ChameleonConfig) -> list[Listener]:
    """List what listens on ``node`` (the ``provisioning.Node`` that ``launch`` returned; None: plan mode)
    and say what answers on its public address; raises ProvisioningError, in one line, when anything
    beyond the allowlist does. Returns the listeners on public addresses."""
    allowed = allowlist_text()
    if node is None:
        print(f"plan mode: on Chameleon this lists what listens on the node ({LISTENING_COMMAND} over SSH) "
              f"and stops if anything but {allowed} answers on its public address")
        return []
    listeners = parse_ss(run_on_node(node.server, config, LISTENING_COMMAND))
    extra = outside_allowlist(listeners)
    if extra:
        raise ProvisioningError(msg.NODE_LISTENS_PUBLICLY(where=f"the node ({node.address})", allowed=allowed,
                                                          extra=", ".join(str(item) for item in extra)))
    public = sorted({item for item in listeners if not item.loopback},
                    key=lambda item: (item.port, item.address))
    ports = sorted({item.port for item in public})
    shown = ", ".join(f"{port} ({PUBLIC[port]})" for port in ports) or "nothing"
    print(f"On the node's public address {node.address} only these answer: {shown}; every other server of "
          f"the lab listens on its loopback (127.0.0.1) only. Allowed: {allowed}.")
    return public
