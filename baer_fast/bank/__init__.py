"""The expert bank: pairs in, signals out (queries, shared questions, single-pass and generative runs)."""
