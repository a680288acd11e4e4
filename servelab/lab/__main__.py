"""``python -m servelab.lab run|report ...``: the headless runner's command line."""

from servelab.lab.runner import main

raise SystemExit(main())
