"""baer-fast: pairwise LLM judging with Backbone-Adaptive Evidence Routing (BAER)."""
from baer_fast.runtime.reproducible import set_default as _reproducible_gemms

_reproducible_gemms()       # before torch's MKL starts: same CPU GEMM, same bits (runtime/reproducible.py)
__version__ = "0.1.0"
__all__ = ["Judge", "__version__"]


def __getattr__(name):
    # `from baer_fast import Judge` without importing torch for every `import baer_fast`
    if name == "Judge":
        from baer_fast.api import Judge
        return Judge
    raise AttributeError(f"module 'baer_fast' has no attribute {name!r}")
