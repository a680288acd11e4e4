"""The Chameleon node over SSH, below both ``provisioning`` and ``servelab.targets``: its shell
(``shell``: commands and files as the login user, a stop that ends a remote command at once) and
what the node measured brought back (``fetch``: packed there, copied, unpacked, in a time limit).
Nothing here imports python-chi or the rest of the lab (docs/decisions/2026-11-28-class-day-third-pass.md)."""
