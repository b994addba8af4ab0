"""The loaded judge model: load, masks, constrained readout, KV and past caches, FLOP model."""
