"""The expert runtime: model loading, prefix-shared batched prefill, constrained readout.

`runner.run_experts` is the entry point; `engine.PrefixEngine` (token ids in, verdict
log-probabilities out) and `naive.NaiveEngine` (its plain-forward reference) know nothing
about prompts or labels.
"""
