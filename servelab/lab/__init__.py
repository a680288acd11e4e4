"""The lab itself: notebook parameters, the headless runner, and the steps the notebooks call.

**The shape of a step module.** Each lab step (a notebook, registered in ``servelab.core.lab_steps``)
has one module, ``stepNN_<topic>.py``, which its notebook imports as ``step``. In order:

1. the docstring: "Notebook NN: <what it measures>";
2. its constants: the names of its rows (as the registry lists them), the columns it shows, and
   ``SPREAD_OVER`` (what a verdict's noise band spans);
3. the notebook's calls: one function per cell that acts (deploy, measure, plot, show), each printing
   what it runs; the measuring itself lives in the layer below (``servelab.triton``, ``servelab.bench``,
   ``servelab.llm``, ``servelab.scaling``), never in the notebook;
4. ``sections(data: RunData) -> list[Section]``: its part of the report;
5. ``rules(data: RunData) -> list[Check]``: its expected effects, checked on a run's rows.

A module that outgrows the 400-line cap splits by part, each still ``stepNN_*``: ``stepNN_report``
takes ``sections`` and ``rules`` (the registry's ``report`` names it), ``stepNN_views`` the tables and
plots, ``stepNN_<part>`` a part of the measuring (09's ``step09_vllm``, 10's ``step10_triton_queue``).
What several steps share is named for what it serves: ``triton_steps`` (the Triton notebooks'
plumbing), ``triton_views``, ``triton_stats``, ``gourmetgram``, ``monitoring``, ``common`` (what every
notebook uses). Adding a step: the checklist in ``docs/guides/architecture.md`` ("Adding a lab step").

Importing the package (every notebook does) shows the lab's own warnings as plain lines in the cell's
output (``servelab.core.notices``).
"""

from servelab.core.notices import show_plainly

show_plainly()
