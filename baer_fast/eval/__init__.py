"""Evaluation: reads scores and signals, computes metrics and reports. Imported by nothing
in the pipeline (fit/score never depend on it)."""
