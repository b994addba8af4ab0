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
