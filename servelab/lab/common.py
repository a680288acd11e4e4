"""What every notebook calls, from one import (``from servelab.lab import common``); each name lives in
the module of its concern:

- ``show``: project files shown as they are (``show_file``, ``show_code``);
- ``stack``: the target's stack (``open_stack``, ``stop_stacks``, ``hostport``, ``Endpoint``);
- ``tables``: results as tables (``record``, ``concat``, ``show_columns``, ``Measured``,
  ``results_overview``, ``WRITTEN_BY``, ``util_columns``);
- ``gpu_reference``: the GPU reference run's rows (``reference``);
- ``this_run``: what this run shows (``what_this_run_shows``, ``Verdicts``);
- ``hub``: the hub's notebooks' cells (``settings``, ``plan_mode``, ``node_jupyter``).

The library imports each from its own module; the notebooks keep this one name.
"""

from servelab.lab.gpu_reference import reference
from servelab.lab.hub import node_jupyter, plan_mode, settings
from servelab.lab.show import show_code, show_file
from servelab.lab.stack import Endpoint, hostport, open_stack, stop_stacks
from servelab.lab.tables import (
           WRITTEN_BY,
           Measured,
           concat,
           record,
           results_overview,
           show_columns,
           util_columns,
)
from servelab.lab.this_run import Verdicts, what_this_run_shows

__all__ = ["WRITTEN_BY", "Endpoint", "Measured", "Verdicts", "concat", "hostport", "node_jupyter",
           "open_stack", "plan_mode", "record", "reference", "results_overview", "settings", "show_code",
           "show_columns", "show_file", "stop_stacks", "util_columns", "what_this_run_shows"]
