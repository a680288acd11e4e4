"""``python -m servelab.site [results/<run>] [--compare results/<gpu-run>] [--out DIR] [--serve]``.

Builds the handout site from the notebooks' sources and a run's folder (default: the newest run under
``results/``), nothing re-executed; a committed reference run (``results/reference/<name>/``;
``$SERVELAB_REFERENCE`` picks one, ``none`` none) is put beside unless ``--compare`` names another or
``--no-compare``; ``--serve`` then serves it on 127.0.0.1 until Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import sys
from collections.abc import Sequence
from pathlib import Path

from servelab.site.build import SiteError, build, default_compare, newest_run
from servelab.site.links import Links
from servelab.site.provenance import RunFolderError


def serve(folder: Path, port: int) -> None:
    """Serve ``folder`` on http://127.0.0.1:``port``/ until Ctrl-C."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        print(f"serving http://127.0.0.1:{port}/ (Ctrl-C stops)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()


def main(argv: Sequence[str] | None = None) -> int:
    about = " ".join(__doc__.split("\n\n")[1].replace("``", "").split())
    parser = argparse.ArgumentParser(prog="./lab site", description=about)
    parser.add_argument("run_dir", nargs="?", type=Path,
                        help="a run's folder (default: the newest in results/)")
    parser.add_argument("--compare", type=Path,
                        help="a second run's folder (a GPU node's), or a folder of runs (its newest): set "
                             "beside (default: the newest in results/reference/, when there is one)")
    parser.add_argument("--no-compare", action="store_true",
                        help="no second run beside, not even the reference")
    parser.add_argument("--out", type=Path, help="where the site goes (default: <run>/site)")
    parser.add_argument("--repo", help="the lab repository's web address the pages link to (default: "
                                       "$SERVELAB_REPO_URL, the CI's, pyproject.toml's [project.urls] "
                                       "Repository, or the checkout's origin)")
    parser.add_argument("--launch", help="where students open a notebook: an address with {notebook} (the "
                                         "page's notebooks/NN_name.ipynb) or the lab's Trovi artifact "
                                         "(default: $SERVELAB_LAUNCH_URL, else the notebook in the student's "
                                         "clone on Chameleon's JupyterHub)")
    parser.add_argument("--serve", action="store_true", help="serve the built site on 127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="--serve's port (default 8000)")
    args = parser.parse_args(argv)
    try:
        run_dir = args.run_dir or newest_run()
        if not run_dir.is_dir():
            raise RunFolderError(f"{run_dir} is not a folder: give a run's folder, e.g. results/<run>")
        if args.compare is not None and not args.compare.is_dir():
            raise RunFolderError(f"--compare {args.compare} is not a folder: give a run's folder")
        compare = None if args.no_compare else args.compare or default_compare()
        if compare is not None and args.compare is None:
            print(f"site: beside it, the reference run {compare} (--no-compare leaves it out)", flush=True)
        out = build(run_dir, args.out, compare, links=Links.find(args.repo, args.launch))
    except (RunFolderError, SiteError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.serve:
        try:
            serve(out, args.port)
        except OSError as exc:
            print(f"error: cannot serve on 127.0.0.1:{args.port} ({exc.strerror}): pick another --port",
                  file=sys.stderr)
            return 2
    else:
        print(f"open {out / 'index.html'}, or preview: python3 -m http.server -d {out} 8000")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
