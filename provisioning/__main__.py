"""Command line: ``python -m provisioning plan|check|reserve|launch|fetch|teardown|release-ip ...``.
``plan --nodes 2``: the plan for a Ray cluster over two nodes (notebook 10), plan mode only.
``class plan|reserve|status|cleanup --roster FILE``: a class's leases (``provisioning.roster``).

reserve and launch record what they create or adopt in a state file (``--state``, default
results/chameleon-state.json); teardown deletes what it records as created, adopted things too
with ``--delete-adopted``. ``--lease-start`` reserves ahead; ``--lease-id`` adopts a lease. Without
``--project`` or CHI_PROJECT, the project is the state file's (what reserve used), else OS_PROJECT_NAME.
Every failure prints ``error: <one line>`` on stderr and exits 1 (130 when
interrupted; SIGTERM/SIGHUP end it like a failure); ``SERVELAB_DEBUG=1`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import os
import sys

from provisioning import configure, fetch_work, launch, preflight, release_ip, reserve, teardown
from provisioning import messages as msg
from provisioning.config import CODE_SOURCES, ProvisioningError
from provisioning.errors import SignalGuard, Terminated, describe, one_line, signals_raise
from provisioning.plan import format_plan, provision_plan
from provisioning.ray_cluster import ray_cluster_plan
from servelab.core.notices import DEBUG_VAR

NOT_SETTINGS = ("action", "minutes", "keep_lease", "delete_adopted", "lease_only", "state", "nodes", "force")


def _run(args: argparse.Namespace, signals: SignalGuard) -> None:
    params = {key: value for key, value in vars(args).items() if key not in NOT_SETTINGS}
    # the state file's project too; a plan names the project in its first step
    config = configure(state=args.state, show=args.action != "plan", **params, duration=args.minutes)
    if args.action == "plan" and args.nodes > 1:
        title = f"Ray cluster over {args.nodes} nodes for notebook 10 (plan only: nothing is created)"
        print(format_plan(ray_cluster_plan(config, nodes=args.nodes), title=title))
    elif args.action == "plan":
        print(format_plan(provision_plan(config, args.state)))
    elif args.action == "check":
        preflight(config)
        print("All checks passed: nothing was created.")
    elif args.action == "reserve":
        reserve(config, state=args.state)
    elif args.action == "launch":
        launch(config, state=args.state)
    elif args.action == "fetch":
        fetch_work(config)
    elif args.action == "release-ip":
        if not args.floating_ip:
            raise ProvisioningError(msg.RELEASE_IP_NEEDS_ADDRESS())
        release_ip(config, args.floating_ip, force=args.force)
    else:
        with signals.deferred("the teardown"):  # a teardown cut short leaves things held
            result = teardown(config, keep_lease=args.keep_lease, delete_adopted=args.delete_adopted,
                              state=args.state, lease_only=args.lease_only)
        if result is not None:
            print(f"Teardown: {result.line()}")


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["class"]:
        from provisioning.roster import main as class_main

        return class_main(given[1:])
    parser = argparse.ArgumentParser(prog="python -m provisioning", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["plan", "check", "reserve", "launch", "fetch", "teardown",
                                           "release-ip"],
                        help="check: every check reserve/launch run first, creating nothing; fetch: copy the "
                             "node's results/ and saved notebooks to results/from-node/ here; release-ip: "
                             "release the unbound floating IP --floating-ip (one this lab allocated for "
                             "--server-name's server; --force for any other)")
    for name in ("project", "site", "lease-name", "server-name", "node-type", "image", "key-name",
                 "repo-url", "repo-ref", "remote-dir"):
        parser.add_argument(f"--{name}")
    parser.add_argument("--floating-ip", help="use this free floating IP of the project (kept at teardown) "
                                              "instead of allocating one for this run")
    parser.add_argument("--lease-id", help="adopt this lease (e.g. made ahead in the GUI) instead of by name")
    parser.add_argument("--lease-start",
                        help="reserve ahead: ISO 8601 (no offset: the site's time zone) or +2h "
                             "(default: now)")
    parser.add_argument("--lease-wait-minutes", type=int,
                        help="wait for a lease starting within this many minutes (default 30), else stop")
    parser.add_argument("--state", help="the state file (default results/chameleon-state.json)")
    parser.add_argument("--code-source", choices=CODE_SOURCES,
                        help="upload (default): send the lab's own files (git ls-files, else "
                             "provisioning/lab-files.txt); git: clone --repo-url on the node")
    parser.add_argument("--minutes", type=int, help="lease duration in minutes (default 170)")
    parser.add_argument("--nodes", type=int, default=1,
                        help="plan: with 2 or more, the plan for a Ray cluster over that many reserved nodes "
                             "(notebook 10; planned only, reserve and launch make one node)")
    parser.add_argument("--keep-lease", action="store_true", help="teardown: keep the lease")
    parser.add_argument("--lease-only", action="store_true",
                        help="teardown: only the lease named by --lease-id (else --lease-name): no server, "
                             "no floating IP, no other lease of the state file (a class slot)")
    parser.add_argument("--force", action="store_true",
                        help="release-ip: also an IP a reservation holds or this lab did not allocate for "
                             "--server-name's server (a classmate's, an instructor's)")
    parser.add_argument("--delete-adopted", action="store_true",
                        help="teardown: also delete what was found and reused (adopted), not only "
                             "what was created")
    args = parser.parse_args(argv)
    if args.nodes < 1:
        parser.error(f"--nodes {args.nodes}: give 1 (the single-node plan) or more")
    if args.lease_only and args.action != "teardown":
        parser.error(f"--lease-only works with teardown only, not {args.action}")
    if args.force and args.action != "release-ip":
        parser.error(f"--force works with release-ip only, not {args.action}")
    if args.nodes > 1 and args.action != "plan":
        parser.error(f"--nodes {args.nodes} works with plan only: reserve and launch make one node")
    debug = os.environ.get(DEBUG_VAR, "") not in ("", "0")
    try:
        with signals_raise() as signals:
            _run(args, signals)
    except KeyboardInterrupt:
        if debug:
            raise
        print("error: interrupted", file=sys.stderr)
        return 130
    except Terminated as exc:  # SIGTERM/SIGHUP: a stop, ended like a failure
        if debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 1
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
