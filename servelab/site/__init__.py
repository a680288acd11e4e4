"""The handout site: the lab's notebooks as web pages with a real run's outputs (``python -m servelab.site``).

``provenance`` says where a run ran, ``pages`` joins each notebook's source with the outputs that run
recorded, ``build`` turns them into a static site with Sphinx and myst-nb. Why this tool:
docs/decisions/2026-11-25-handout-site.md
"""
