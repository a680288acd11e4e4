"""Command line: ``python -m provisioning plan|reserve|launch|teardown [--project P] [--site S] ...``."""

from __future__ import annotations

import argparse
import sys

from provisioning import from_env, launch, reserve, teardown
from provisioning.config import ProvisioningError
from provisioning.plan import format_plan, provision_plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m provisioning", description=__doc__)
    parser.add_argument("action", choices=["plan", "reserve", "launch", "teardown"])
    for name in ("project", "site", "lease-name", "server-name", "node-type", "image", "key-name",
                 "code-source", "repo-url", "repo-ref", "remote-dir"):
        parser.add_argument(f"--{name}")
    parser.add_argument("--minutes", type=int, help="lease duration in minutes (default 170)")
    parser.add_argument("--keep-lease", action="store_true", help="teardown: delete only the server")
    args = parser.parse_args(argv)
    params = {key: value for key, value in vars(args).items()
              if key not in ("action", "minutes", "keep_lease")}
    try:
        config = from_env(**params, duration=args.minutes)
        if args.action == "plan":
            print(format_plan(provision_plan(config)))
        elif args.action == "reserve":
            reserve(config)
        elif args.action == "launch":
            launch(config)
        else:
            teardown(config, keep_lease=args.keep_lease)
    except ProvisioningError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
