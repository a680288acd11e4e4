"""The handout site: the lab's notebooks as web pages with a real run's outputs (``python -m servelab.site``).

``provenance`` says where a run ran (and where each measurement did: its rows' ``device``), ``redact``
keeps the machine's paths and user names off the pages, ``outputs`` shapes a run's outputs for a page,
``compare`` sets a second run's beside, ``links`` says where pages link out, ``pages`` joins each
notebook's source with the outputs that run recorded, ``build`` turns them into a static site with Sphinx
and myst-nb. Why this tool: docs/decisions/2026-11-25-handout-site.md; the second pass:
docs/decisions/2026-11-26-handout-site-second-pass.md
"""
