"""The expert bank: pairs in, signals out (query building, question sharing, single-pass and
generative runs, derived experts)."""
