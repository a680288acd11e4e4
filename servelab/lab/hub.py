"""What the notebooks in Chameleon's JupyterHub print (01, 02, 08): their settings as a table, whether a
cell creates anything, and where to go once the node is up."""

from __future__ import annotations

from typing import Any

import pandas as pd

from servelab.core.paths import ON_THE_NODE
from servelab.lab.params import LabParams


def settings(config: Any) -> pd.DataFrame:
    """A settings dataclass (``provisioning``'s ``ChameleonConfig``) as a table of what the next cells
    will use, one row per field, instead of its one-line repr; empty values show as "(none)"."""
    from dataclasses import fields

    values = {f.name: getattr(config, f.name) for f in fields(config)}
    shown = [str(v) if v not in ("", None, {}, []) else "(none)" for v in values.values()]
    return pd.DataFrame({"setting": list(values), "value": shown})

def plan_mode(p: LabParams) -> None:
    """Say whether the provisioning cells create anything (``p.plan``), in a sentence."""
    print("plan mode: the next cells print what they would create on Chameleon and call nothing "
          f"(target {p.target!r})" if p.plan else
          f"live: the next cells create and delete resources on Chameleon (target {p.target!r})")

def node_jupyter(node: Any, config: Any = None) -> None:
    """Where to go after 02: the node's Jupyter server, where notebooks ``ON_THE_NODE`` run (target docker),
    and the line that copies the student's work here, with 02's settings (``config``)."""
    from provisioning import fetch_line

    keep = ("Your measurements and saved notebooks stay on the node, and go with it: 08 copies them here "
            "before it deletes anything; to copy them here at any time while the lease runs, run this in "
            f"one of the lab's notebooks here (after its first cell):\n  {fetch_line(config)}")
    if node is None:
        print("plan mode: on Chameleon this prints the node's Jupyter URL, its certificate's fingerprint and "
              f"where its token is; notebooks {ON_THE_NODE} run there with target='docker'.\n{keep}")
        return
    access = node.jupyter
    sha = access.tls_sha256 if access is not None else "(not reported: run 02's set-up cell again)"
    token = access.token_file if access is not None else ".jupyter-token in the lab's folder"
    print(f"Open the node's Jupyter server and run notebooks {ON_THE_NODE} there with target='docker':\n"
          f"  {node.jupyter_url}\n"
          "  Its certificate was made on the node, so the browser warns once: go on only if the "
          f"certificate's SHA-256 fingerprint (the browser's certificate viewer) is\n  {sha}\n"
          "  Its token is never printed: read it from a terminal of Chameleon's Jupyter and paste it into "
          f"the login page:\n  ssh {node.user}@{node.address} cat {token}\n"
          f"SSH for nvtop: ssh {node.user}@{node.address}\n"
          "  (from a terminal in Chameleon's Jupyter, File → New → Terminal: the server got the hub's key "
          "pair; from another machine add -i with the private key of the key pair you gave as key_name)\n"
          f"{keep}")
