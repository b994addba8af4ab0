"""baer-fast: pairwise LLM judging with Backbone-Adaptive Evidence Routing (BAER)."""
__version__ = "0.1.0"
__all__ = ["Judge", "__version__"]


def __getattr__(name):
    # `from baer_fast import Judge` without importing torch for every `import baer_fast`
    if name == "Judge":
        from baer_fast.api import Judge
        return Judge
    raise AttributeError(f"module 'baer_fast' has no attribute {name!r}")
