"""The expert bank: pairs in, signals out (query building, single-pass and generative runs, derived experts)."""
