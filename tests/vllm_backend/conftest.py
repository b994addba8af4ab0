"""The tiny model the vLLM tests share (vLLM's CPU attention needs head_dim >= 64)."""
import pytest


@pytest.fixture(scope="session")
def hd64_model_dir(tmp_path_factory):
    from tests.fixtures.tiny_models import build_model_dir
    return build_model_dir(str(tmp_path_factory.mktemp("qwen3_hd64")), arch="qwen3", layers=2, hidden=128,
                           heads=2, kv_heads=1, head_dim=64, intermediate=256, max_pos=2048, seed=5)
