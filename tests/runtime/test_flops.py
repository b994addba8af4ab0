"""The judge's FLOP model (model_loader.flop_model, queries.FlopModel): checked against torch's
own FLOP counter on plain eager forwards, where every attention score is computed densely, and
by hand where the counter cannot see the work (an MoE's grouped expert matmuls)."""
import pytest

from baer_fast.runtime.model.flops import flop_model
from baer_fast.runtime.open import load_judge
from tests.fixtures.tiny_models import build_model_dir
from tests.runtime.test_mla import MLA

DENSE = {"qwen3": {}, "llama": {}, "gemma2": {}, "gpt2": {"arch": "gpt2"},        # gpt2: Conv1D, learned positions
         "mla": {**MLA, "first_k_dense_replace": 2}}                              # query-key 24 wide, values 12


@pytest.mark.parametrize("name", sorted(DENSE))
def test_flops_equal_torch_flop_counter(name, tmp_path):
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    kw = {"arch": name, **DENSE[name]}
    loaded = load_judge(build_model_dir(str(tmp_path), **kw), attn="eager")
    fm, n = flop_model(loaded), 37
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        loaded.hidden(torch.randint(5, 500, (1, n)))
    # eager attention computes all n x n scores (the causal half is masked, not skipped)
    assert counter.get_total_flops() == fm.flops(n, n * n)


@pytest.mark.parametrize("arch", ["mixtral", "qwen2_moe"])
def test_moe_experts_count_at_their_routed_share(arch, tmp_path):
    loaded = load_judge(build_model_dir(str(tmp_path), arch=arch))
    cfg = loaded.model.config
    h, kv = cfg.hidden_size, cfg.num_key_value_heads * cfg.head_dim
    attention = 2 * h * h + 2 * kv * h                                  # q, o; k, v
    router = (cfg.num_local_experts if arch == "mixtral" else cfg.num_experts) * h
    if arch == "mixtral":
        mlp = cfg.num_experts_per_tok * 3 * h * cfg.intermediate_size   # top-2 of 4 experts
    else:                                                               # plus an always-on shared expert and its gate
        mlp = cfg.num_experts_per_tok * 3 * h * cfg.moe_intermediate_size + 3 * h * cfg.shared_expert_intermediate_size + h
    assert flop_model(loaded).weights == cfg.num_hidden_layers * (attention + router + mlp)


def test_engine_and_naive_count_the_same_scores_for_one_prompt(loaded_models, qwen_dir):
    """One prompt alone is a mask-free root: the engine takes SDPA's causal path, like the naive one."""
    from baer_fast.runtime.prefill import PrefixEngine
    from baer_fast.runtime.naive import NaiveEngine
    from baer_fast.runtime.queries import Query
    m = loaded_models(qwen_dir)
    group = [Query(tuple(range(5, 105)), (0, 1))]
    shared, naive = PrefixEngine(m).run([group]).stats, NaiveEngine(m).run([group]).stats
    assert shared.scores_computed == naive.scores_computed == 100 * 101 // 2
    assert flop_model(m).of(shared) == flop_model(m).of(naive)
