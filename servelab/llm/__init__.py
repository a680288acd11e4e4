"""Serving a language model: the lab's small causal LM, the engine behind an OpenAI-compatible
endpoint (``transformers serve``, wrapped so bad requests get a 4xx), and a streaming client that
measures time to first token and inter-token latency (notebook 09)."""
