"""The exactness tests' own tiny model: a module sets MODEL_SEED and gets `own_model_dir` (a
Qwen3-architecture checkpoint written for that module) and `own_engine` (the prefix engine on it,
loaded through the path a real model takes)."""
import pytest

from tests.fixtures.tiny_models import build_model_dir


@pytest.fixture(scope="module")
def own_model_dir(request, tmp_path_factory):
    name = request.module.__name__.rsplit(".", 1)[-1]
    return build_model_dir(str(tmp_path_factory.mktemp(name)), arch="qwen3", seed=request.module.MODEL_SEED,
                           max_pos=512)


@pytest.fixture(scope="module")
def own_engine(own_model_dir):
    from baer_fast.runtime.open import load_judge, open_engine
    return open_engine(load_judge(own_model_dir))
