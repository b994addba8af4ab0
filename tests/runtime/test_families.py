"""Model families beyond the ones the other runtime tests build: each loads through `--model
PATH` (passing the load-time probes, in fp32 and in bf16), its prefix-engine runs equal the
naive path over the single-pass bank, and the decoder's greedy tokens equal HF `generate`.
Tiny random models."""
import pytest

from tests.fixtures.checks import assert_decoder_equals_generate
from tests.fixtures.tolerances import assert_engine_matches_naive
from tests.fixtures.tiny_models import _BY_NAME, build_model_dir, make_pairs

REFUSED = ("mpt", "bloom")                       # tests/runtime/test_tree_check.py
OWN_FILE = ("minicpm3",)                         # tests/runtime/test_latent_attention.py
FAMILIES = [f for f in _BY_NAME if f not in REFUSED + OWN_FILE]


@pytest.mark.parametrize("family", FAMILIES)
def test_family_runs_exactly(family, tmp_path):
    from transformers import CONFIG_MAPPING

    from baer_fast.runtime.open import load_judge
    if family not in CONFIG_MAPPING:
        pytest.skip(f"{family} is newer than this transformers")
    path = build_model_dir(str(tmp_path), arch=family, seed=12)
    m = load_judge(path)
    assert_engine_matches_naive(m, make_pairs(3, seed=5, long=2))
    assert_decoder_equals_generate(m, [list(range(5, 30)), list(range(7, 16))], 5)
    load_judge(path, dtype="bfloat16")          # the load-time probe takes bf16 rounding for what it is
