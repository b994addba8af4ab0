"""Adapters to training libraries (TRL). Each imports its library lazily."""
