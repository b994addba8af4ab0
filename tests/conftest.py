"""Suite-wide settings. Under CI (CI=true) hypothesis runs derandomized, so a green run is
reproducible and a red one names the same failing example on a rerun; locally it explores."""
import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def poisoned_empty(monkeypatch):
    """Every torch.empty float tensor starts as NaN, so reading a column nobody wrote shows up.
    Masked columns still enter attention (score + dtype-min, weight x value): uninitialised memory
    there is a bug whose symptom, NaN verdicts, depends on what the allocator hands back."""
    import torch
    empty = torch.empty

    def nan_empty(*args, **kwargs):
        t = empty(*args, **kwargs)
        return t.fill_(float("nan")) if t.is_floating_point() else t
    monkeypatch.setattr(torch, "empty", nan_empty)


@pytest.fixture
def refused_width_groups(monkeypatch):
    """The width-group attention raises, as under remote code that picks its attention classes
    by name and knows none of ours (the engine and the decoder must fall back to one width)."""
    from baer_fast.runtime.plan import width_groups

    def refuse(*args, **kwargs):
        raise KeyError(f"{width_groups.NAME} is not an attention class of this model")
    monkeypatch.setattr(width_groups, "attention", refuse)
