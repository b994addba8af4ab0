"""Read, validate and write the interchange formats (pairs, signals, scores); dataset adapters."""
