"""Constants the kernels share with their numpy references of record (imports nothing).

EPS: expert probabilities are clipped to [EPS, 1 - EPS] before the logit (features.evidence
re-exports it; artifacts store it).
"""
EPS = 1e-3
