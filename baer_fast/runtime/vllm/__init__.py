"""The vLLM backend (optional): one engine on vLLM's offline `LLM`, and data-parallel replicas."""
