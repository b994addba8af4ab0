"""Data roles (selection / calibration / test) and condition-level head choice."""
