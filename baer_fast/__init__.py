"""baer-fast: pairwise LLM judging with Backbone-Adaptive Evidence Routing (BAER)."""
__version__ = "0.1.0"
