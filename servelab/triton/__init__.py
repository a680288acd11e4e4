"""Triton Inference Server for the lab: server handle, model repository, config
editing, perf_analyzer runs and server statistics — experiments as code.

Submodules are imported on demand (``from servelab.triton.server import TritonServer``)
so that importing the package costs nothing.
"""
