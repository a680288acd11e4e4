"""serve-system lab: the code that notebooks, tests and the serving apps share.

Sub-modules are imported on demand so that a light consumer (the ONNX app, the
Flask app) never pays for — or needs — torch.
"""

__version__ = "0.1.0"
