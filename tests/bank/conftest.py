"""The tiny judge model of the runtime tests (tests/fixtures/tiny_models.py), for the bank's tests."""
from __future__ import annotations

import pytest

from tests.fixtures.tiny_models import build_model_dir


@pytest.fixture(scope="session")
def qwen_dir(tmp_path_factory):
    return build_model_dir(str(tmp_path_factory.mktemp("qwen3")), arch="qwen3")
