"""Scaling out (notebook 10): the Food-11 model as a Ray Serve deployment, its autoscaling config as
data with the Kubernetes manifest it corresponds to, a local Ray cluster that cleans up after itself,
and an open-loop load generator that records a time series. Why: docs/decisions/2026-11-23-ray-serve.md
"""
