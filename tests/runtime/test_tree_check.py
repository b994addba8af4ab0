"""The load-time tree probe (probes.check_tree_path): a judge whose forward cannot run the
prefix engine's 4-D tree masks at explicit positions is refused at load with a clear error,
instead of crashing mid-run (BLOOM) or giving verdicts that are not its own (MPT); the families
it passes run with engine == naive."""
import pytest

from baer_fast.runtime import probes
from baer_fast.runtime.model.load import ModelError
from baer_fast.runtime.open import load_judge
from tests.fixtures.checks import engine_vs_naive
from tests.fixtures.tiny_models import build_model_dir, make_pairs


@pytest.fixture(scope="module")
def arch_dir(tmp_path_factory):
    made = {}

    def get(arch):
        if arch not in made:
            made[arch] = build_model_dir(str(tmp_path_factory.mktemp(arch)), arch=arch, seed=11)
        return made[arch]
    return get


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_alibi_from_the_sequence_is_refused(arch_dir, dtype):
    """MPT builds its ALiBi biases from the sequence layout, not the position ids."""
    with pytest.raises(ModelError, match="MptForCausalLM.*does not honour the engine's attention mask or position ids"):
        load_judge(arch_dir("mpt"), dtype=dtype)


def test_the_refusal_is_right(arch_dir, monkeypatch):
    """With the probe switched off MPT loads, and the engine's verdicts are not the model's own."""
    monkeypatch.setattr(probes, "check_tree_path", lambda loaded: 0.0)
    assert engine_vs_naive(load_judge(arch_dir("mpt")), make_pairs(3, seed=2)) > 1e-3


def test_a_forward_that_rejects_4d_masks_is_refused(arch_dir):
    with pytest.raises(ModelError, match=r"BloomForCausalLM: its forward cannot take .*ValueError"):
        load_judge(arch_dir("bloom"))


def test_a_forward_that_bypasses_its_base_model_loads(arch_dir):
    """OPT's forward calls model.decoder, not its base model: the load probe's hook never fires,
    and the hidden states come from the base model itself. Its learned positions follow the
    position ids, so it passes the tree probe and runs exactly."""
    opt = load_judge(arch_dir("opt"))
    assert engine_vs_naive(opt, make_pairs(4, seed=3)) <= 1e-5


@pytest.mark.parametrize("dtype, bound", [("float32", 1e-5), ("bfloat16", 0.1)])
def test_judges_that_run_pass_the_probe(qwen_dir, dtype, bound):
    assert probes.check_tree_path(load_judge(qwen_dir, dtype=dtype)) <= bound


def test_low_precision_tolerance_tracks_rounding(qwen_dir, monkeypatch):
    """bf16's bar is 0.1 or 8x the rounding noise of the probe continued from a cache, the larger."""
    m = load_judge(qwen_dir, dtype="bfloat16")
    monkeypatch.setattr(probes, "TOL_LOW", 0.0)
    monkeypatch.setattr(probes, "_continuation_noise", lambda *a: 0.0)
    with pytest.raises(ModelError, match="--dtype float32 settles it"):
        probes.check_tree_path(m)


@pytest.mark.slow
def test_a_deep_bf16_judge_is_not_refused_for_its_rounding(tmp_path):
    """28 layers of random Qwen3-1.7B-shaped weights in bf16 (4 GB, ~35 s): the probe's rounding
    noise alone is ~0.06 in log-probability, above a fixed 0.1 bar's comfort; the bar scales with it."""
    from benchmarks.random_judge import load_random
    m = load_random(str(tmp_path), "qwen3-1.7b", device="cpu", dtype="bfloat16")
    assert probes.check_tree_path(m) < 0.5        # raises if refused; measured 0.062 (noise 0.064)


@pytest.mark.parametrize("bad, refused", [(1, False), (3, False), (4, True), (9, True)])
def test_a_minority_of_missed_prompts_is_rounding(qwen_dir, monkeypatch, bad, refused):
    """Rounding can flip a mixture-of-experts routing on one prompt (Mixtral in bf16: 0.87 on one
    of nine), or in one tree's shared prefix (three), while a forward that ignores the mask or the
    positions misses on most (MPT: 6 of 9): the probe refuses when more than a third of its
    prompts below a shared prefix miss."""
    from baer_fast.runtime.naive import NaiveEngine
    m = load_judge(qwen_dir)
    real = NaiveEngine.run

    def off(self, groups):                     # the plain forward, `bad` of its probe prompts moved by 0.9
        res = real(self, groups)
        below = [(g, q) for g in range(len(groups)) for q in range(len(groups[g]))]
        for g, q in below[:bad]:
            res.logprobs[g][q] = [x + 0.9 for x in res.logprobs[g][q]]
        return res
    monkeypatch.setattr(NaiveEngine, "run", off)
    if refused:
        with pytest.raises(ModelError, match=f"on {bad} of 9 load-time probe prompts"):
            probes.check_tree_path(m)
    else:
        assert 0.89 < probes.check_tree_path(m) < 0.91


def test_mixtral_loads_in_bf16(tmp_path):
    """The case behind the rule: this tiny Mixtral's engine equals naive in fp32, and in bf16 (on
    the CPU this was written on) a routing flip moved one probe prompt by 0.87. It loads."""
    path = build_model_dir(str(tmp_path), arch="mixtral", seed=12)
    assert engine_vs_naive(load_judge(path), make_pairs(3, seed=5)) <= 1e-5
    assert load_judge(path, dtype="bfloat16").tree_probe_err is not None
