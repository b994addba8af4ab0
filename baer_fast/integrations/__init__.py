"""Adapters to training libraries (TRL, veRL; OpenRLHF talks to `baer-fast serve` directly).
Each imports its library lazily, or not at all."""
