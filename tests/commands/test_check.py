"""`baer-fast check --model PATH`: what the loader chose for a judge, and whether it runs."""
import json

from baer_fast import protocols
from baer_fast.cli import main
from tests.fixtures.tiny_models import build_model_dir


def _check(capsys, path, *extra):
    rc = main(["check", "--model", path, *extra])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _probe_tol(loaded) -> float:
    """The tree probe's own prompts: 2x the naive fp32 path's error vs float64 for each of two paths."""
    from baer_fast.runtime.probes import TREES, probe_prompts
    from baer_fast.runtime.queries import Query
    from tests.fixtures.tolerances import naive_logprob_error, paths_tol
    vocab = loaded.model.get_input_embeddings().num_embeddings
    choices = tuple(range(1, 33)) if vocab > 33 else tuple(range(vocab))
    return paths_tol(naive_logprob_error(loaded, [[Query(ids, choices) for ids in probe_prompts(vocab, t)]
                                                  for t in range(TREES)]))


def test_a_judge_that_runs(capsys, qwen_dir, loaded_models):
    rc, out, _ = _check(capsys, qwen_dir)
    assert rc == 0 and out.strip().endswith("ok: this judge runs on the hf engine, every expert (some with "
                                            "smaller budgets: see budgets)")
    assert "--max-new-tokens reference=" in out
    assert "Qwen3ForCausalLM" in out and "takes a system message" in out and "tree probe" in out
    assert "decode steps attend in width groups" in out
    rc, out, _ = _check(capsys, qwen_dir, "--json")
    r = json.loads(out)
    assert rc == 0 and r["class"] == "Qwen3ForCausalLM" and r["dtype"] == "float32"
    assert r["tree_probe"]["max_abs_logprob_diff"] <= _probe_tol(loaded_models(qwen_dir)) and r["decoder"]["ok"] is True
    assert r["decoder"]["width_groups"] is True
    assert r["kv_bytes_per_token"] == 2 * 2 * (2 * 16) * 4          # layers x (K + V) x (heads x dim) x fp32
    assert r["weights_bytes"] == 4 * sum(t.numel() for t in loaded_models(qwen_dir).model.parameters())
    # every expert that reads a verdict: its labels, each one token id, distinct (pride re-weights
    # direct's verdicts; calibraeval reads its own label-exchanged prompt too)
    assert set(r["labels"]) == {n for n in protocols.ALL if n != "pride"}
    assert all(len(set(ids.values())) == len(ids) for ids in r["labels"].values())
    # the prompts' own tokens: every prompt and generative expert, the pairwise ones above pointwise's
    assert set(r["prompt_overhead_tokens"]) == set(protocols.PROMPT_EXPERTS + protocols.GENERATIVE)
    assert r["prompt_overhead_tokens"]["direct"] > r["prompt_overhead_tokens"]["reference"] > 0
    # the room each expert leaves a pair: context less its prompts, its generation reserve and the margin;
    # reference's default 4096-token budget leaves none on this 4096-token judge, and check says what fits
    ov = r["prompt_overhead_tokens"]
    assert r["room_tokens"]["reference"] == 4096 - ov["reference"] - 4096 - 32
    assert r["room_tokens"]["direct"] == 4096 - ov["direct"] - 32
    assert r["room_tokens"]["prepair"] == 4096 - ov["prepair"] - 2 * 256 - 32       # both analyses in its verdict
    assert r["too_short_for"] == [] and r["budget_too_large_for"] == ["reference"]
    assert r["max_new_tokens_that_fit"]["reference"] == 4096 - ov["reference"] - 32 - 32


def test_the_overhead_is_what_a_pair_adds_to(capsys, qwen_dir, loaded_models):
    """A pair's longest direct prompt is the overhead plus its own text's tokens (to a few merges)."""
    from baer_fast.io.records import Pair
    from baer_fast.bank.prompting import PromptEncoder
    from baer_fast.bank.queries import build_queries
    from tests.fixtures.tiny_models import text_of_tokens
    _, out, _ = _check(capsys, qwen_dir, "--json")
    overhead = json.loads(out)["prompt_overhead_tokens"]["direct"]
    m = loaded_models(qwen_dir)
    enc = PromptEncoder(m.tokenizer, model_name="tiny", context_len=m.context_len)
    pair = Pair("x", text_of_tokens(m.tokenizer, 40, 1), text_of_tokens(m.tokenizer, 60, 2),
                text_of_tokens(m.tokenizer, 50, 3))
    longest = max(len(q.ids) for q in build_queries(enc, pair, ["direct"])[0])
    assert abs(longest - (overhead + 150)) <= 6


def test_a_context_too_short_for_some_experts_is_said_and_exits_2(capsys, tmp_path):
    """A 224-token judge: check said "ok ... every expert", yet `experts --experts cot` refused every pair."""
    path = build_model_dir(str(tmp_path / "short"), arch="qwen3", seed=3, max_pos=224)
    rc, out, _ = _check(capsys, path, "--json")
    r = json.loads(out)
    assert rc == 2 and r["decoder"]["ok"] and r["context_len"] == 224
    assert {"cot", "deliberate", "self_consistency"} <= set(r["too_short_for"])
    assert "direct" not in r["too_short_for"] and r["room_tokens"]["direct"] >= 32
    rc, out, _ = _check(capsys, path)
    assert rc == 2 and "partly: the context is too short for " in out and out.strip().endswith("the other experts run")


def test_a_template_without_a_system_role(capsys, tmp_path):
    from tests.bank.test_chat_templates import NO_SYSTEM
    path = build_model_dir(str(tmp_path / "check_nosys"), arch="llama", seed=5, chat_template=NO_SYSTEM)
    rc, out, _ = _check(capsys, path, "--json")
    assert rc == 0 and json.loads(out)["system_role"] is False


def test_a_judge_that_cannot_run(capsys, tmp_path):
    path = build_model_dir(str(tmp_path / "mpt"), arch="mpt", seed=11)
    rc, out, err = _check(capsys, path)
    lines = err.strip().splitlines()
    assert rc == 2 and out == "" and lines[-1].startswith("error:") and "does not honour" in lines[-1]


def test_a_decoder_that_fails_leaves_the_single_pass_bank(capsys, qwen_dir, monkeypatch):
    """A forward that refuses the decoder's slot cache (remote code calling a cache method it does
    not have): the bank still runs, the generative experts do not, exit 2 and the output says so."""
    from baer_fast.runtime import decode

    def refuse(self, slots, ids, pos, groups=None):
        raise AttributeError("'_SlotCache' object has no attribute 'get_usable_length'")
    monkeypatch.setattr(decode.Decoder, "_forward", refuse)
    rc, out, _ = _check(capsys, qwen_dir)
    assert rc == 2 and "get_usable_length" in out and out.strip().splitlines()[-1].startswith("partly:")


def test_a_decoder_off_by_one_is_caught(capsys, qwen_dir, monkeypatch):
    """Greedy tokens computed one position off are not the model's own: the probe's gap shows it."""
    from baer_fast.runtime import decode
    real = decode.Decoder._forward
    monkeypatch.setattr(decode.Decoder, "_forward", lambda self, slots, ids, pos, groups=None: real(self, slots, ids, pos + 1, groups))
    rc, out, _ = _check(capsys, qwen_dir, "--json")
    r = json.loads(out)["decoder"]
    assert rc == 2 and r["ok"] is False and "not the model's own" in r["why"]


def test_a_forward_refusing_width_groups_still_decodes(capsys, qwen_dir, refused_width_groups):
    """Remote code that knows none of our attention names: the probe's decoder falls back to one
    width per step, the judge still runs every expert, and the output says how steps attend."""
    rc, out, _ = _check(capsys, qwen_dir)
    assert rc == 0 and "decode steps attend in one width" in out
    rc, out, _ = _check(capsys, qwen_dir, "--json")
    assert rc == 0 and json.loads(out)["decoder"]["width_groups"] is False


def test_quiet_hides_the_weight_loading_bar_too(capsys, qwen_dir, monkeypatch):
    """-q ("no progress bars") also silences transformers' weight-loading bar, for that run only."""
    import transformers.utils.logging as tf_logging
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    tf_logging.enable_progress_bar()
    rc, _, err = _check(capsys, qwen_dir, "-q")
    assert rc == 0 and "Loading weights" not in err
    assert tf_logging.is_progress_bar_enabled()
    rc, _, err = _check(capsys, qwen_dir)
    assert rc == 0 and "Loading weights" in err
