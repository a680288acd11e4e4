"""Command line: ``python -m provisioning plan|check|reserve|launch|teardown [--project P] [--site S] ...``.

Every failure prints ``error: <one line>`` on stderr and exits 1 (130 when
interrupted); ``SERVELAB_DEBUG=1`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import os
import sys

from provisioning import from_env, launch, preflight, reserve, teardown
from provisioning.config import CODE_SOURCES, ProvisioningError
from provisioning.errors import describe, one_line
from provisioning.plan import format_plan, provision_plan

DEBUG_VAR = "SERVELAB_DEBUG"


def _run(args: argparse.Namespace) -> None:
    params = {key: value for key, value in vars(args).items()
              if key not in ("action", "minutes", "keep_lease")}
    config = from_env(**params, duration=args.minutes)
    if args.action == "plan":
        print(format_plan(provision_plan(config)))
    elif args.action == "check":
        preflight(config)
        print("All checks passed: nothing was created.")
    elif args.action == "reserve":
        reserve(config)
    elif args.action == "launch":
        launch(config)
    else:
        teardown(config, keep_lease=args.keep_lease)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m provisioning", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["plan", "check", "reserve", "launch", "teardown"],
                        help="check: every check reserve/launch run first, creating nothing")
    for name in ("project", "site", "lease-name", "server-name", "node-type", "image", "key-name",
                 "repo-url", "repo-ref", "remote-dir"):
        parser.add_argument(f"--{name}")
    parser.add_argument("--code-source", choices=CODE_SOURCES,
                        help="upload (default): send this checkout; git: clone --repo-url on the node")
    parser.add_argument("--minutes", type=int, help="lease duration in minutes (default 170)")
    parser.add_argument("--keep-lease", action="store_true", help="teardown: delete only the server")
    args = parser.parse_args(argv)
    debug = os.environ.get(DEBUG_VAR, "") not in ("", "0")
    try:
        _run(args)
    except KeyboardInterrupt:
        if debug:
            raise
        print("error: interrupted", file=sys.stderr)
        return 130
    except ProvisioningError as exc:
        if debug:
            raise
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 1
    except Exception as exc:  # python-chi, keystoneauth, Fabric, ...: still one line
        if debug:
            raise
        print(f"error: {describe(exc)} ({DEBUG_VAR}=1 shows the traceback)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
