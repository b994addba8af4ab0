"""Bad models and bad pairs fail with one clear line, before any silent guess."""
import os
import shutil
import sys

import pytest

from baer_fast.cli import main
from baer_fast.errors import BaerError, InputError
from baer_fast.io.records import Pair, write_pairs
from baer_fast.runtime.open import load_judge
from baer_fast.bank.prompting import PromptEncoder
from baer_fast.bank.runner import run_experts


def _one_line(err) -> str:
    msg = str(err)
    assert "\n" not in msg
    return msg


def test_missing_model_dir(tmp_path):
    with pytest.raises(InputError) as e:
        load_judge(str(tmp_path / "nope"))
    assert "model directory not found" in _one_line(e.value)


def test_pickle_weights_refused(tmp_path, qwen_dir):
    d = tmp_path / "pickled"
    shutil.copytree(qwen_dir, d)
    os.rename(d / "model.safetensors", d / "pytorch_model.bin")
    with pytest.raises(InputError) as e:
        load_judge(str(d))
    assert "pytorch_model.bin" in _one_line(e.value) and "safetensors" in str(e.value)


def test_model_without_chat_template(tmp_path, qwen_dir):
    d = tmp_path / "no_template"
    shutil.copytree(qwen_dir, d)
    for name in ("chat_template.jinja", "chat_template.json"):
        if (d / name).exists():
            os.unlink(d / name)
    cfg = (d / "tokenizer_config.json").read_text()
    assert "chat_template" not in cfg or True
    import json
    obj = json.loads(cfg)
    obj.pop("chat_template", None)
    (d / "tokenizer_config.json").write_text(json.dumps(obj))
    with pytest.raises(InputError) as e:
        load_judge(str(d))
    assert "no chat template" in _one_line(e.value)


def test_weight_count_from_headers_equals_the_loaded_model(model_dir, loaded_models):
    from baer_fast.runtime.model.load import weight_elements
    model = loaded_models(model_dir).model
    assert weight_elements(model_dir) == sum(p.numel() for p in model.parameters())   # tied rows once


def test_weights_that_cannot_fit_are_refused_before_loading(tmp_path, capsys, qwen_dir, monkeypatch):
    """An 8B model in fp32 (CPU's default) does not fit in 24 GiB: one clear line, not the OOM killer."""
    from baer_fast.runtime.model import load as model_loader
    need32 = 4 * model_loader.weight_elements(qwen_dir)
    monkeypatch.setattr(model_loader, "free_bytes", lambda device: need32 - 1)
    loads = []
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained",
                        lambda *a, **k: loads.append(a) or pytest.fail("weights loaded"))
    with pytest.raises(model_loader.ModelError) as e:
        load_judge(qwen_dir, device="cpu")
    msg = _one_line(e.value)
    name = os.path.basename(os.path.normpath(qwen_dir))
    assert name in msg and "float32" in msg and "--dtype bfloat16" in msg and "cpu has" in msg
    pairs = tmp_path / "pairs.jsonl"
    write_pairs(str(pairs), [Pair("x", "q", "a", "b")])
    rc = main(["experts", "--model", qwen_dir, "--input", str(pairs), "--out", str(tmp_path / "s.jsonl"),
               "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1].startswith("error:") and "--dtype bfloat16" in err[-1]
    monkeypatch.setattr(model_loader, "free_bytes", lambda device: need32 // 2 - 1)     # bf16 does not fit either
    with pytest.raises(model_loader.ModelError) as e:
        load_judge(qwen_dir, device="cpu", dtype="bfloat16")
    assert "bfloat16" in str(e.value) and "--dtype" not in str(e.value)
    assert loads == []


def test_a_quantized_checkpoint_is_sized_as_stored(qwen_dir, monkeypatch):
    """fp8/GPTQ/AWQ weights stay in their stored types: elements x bf16 would refuse an fp8 judge
    that fits (and undercount packed 4-bit ones); the files' size is the estimate."""
    import torch
    from transformers import AutoConfig

    from baer_fast.runtime.model import load as model_loader
    config = AutoConfig.from_pretrained(qwen_dir)
    config.quantization_config = {"quant_method": "fp8"}
    stored = model_loader.stored_bytes(qwen_dir)
    assert stored != 2 * model_loader.weight_elements(qwen_dir)
    bf16 = torch.bfloat16
    monkeypatch.setattr(model_loader, "free_bytes", lambda device: stored)
    model_loader.check_fits(qwen_dir, "cpu", bf16, config)                   # fits as stored
    monkeypatch.setattr(model_loader, "free_bytes", lambda device: stored - 1)
    with pytest.raises(model_loader.ModelError, match="as stored") as e:
        model_loader.check_fits(qwen_dir, "cpu", bf16, config)
    assert "--dtype" not in str(e.value)


@pytest.mark.parametrize("free", ["exact", "unknown"])
def test_weights_that_fit_load(qwen_dir, monkeypatch, free):
    from baer_fast.runtime.model import load as model_loader
    need = 2 * model_loader.weight_elements(qwen_dir)
    monkeypatch.setattr(model_loader, "free_bytes", lambda device: need if free == "exact" else None)
    m = load_judge(qwen_dir, device="cpu", dtype="bfloat16")
    assert str(m.dtype) == "torch.bfloat16"


def test_cuda_free_memory_counts_the_allocators_unused_blocks(monkeypatch):
    """In an RLHF process the trainer's freed blocks stay reserved by torch's caching allocator;
    the judge's weights can take them, so they count as free."""
    import torch

    from baer_fast.runtime.model.load import free_bytes
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda dev=None: (5 << 30, 80 << 30))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda dev=None: 60 << 30)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda dev=None: 30 << 30)
    assert free_bytes("cuda") == free_bytes("cuda:0") == 35 << 30


def test_free_bytes_reports_this_machine():
    from baer_fast.runtime.model.load import free_bytes
    free = free_bytes("cpu")
    assert free is not None and 0 < free <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_label_that_is_not_one_token(digits_dir, loaded_models):
    m = loaded_models(digits_dir)
    enc = PromptEncoder(m.tokenizer, model_name="qwen3-digits", context_len=m.context_len)
    assert len(enc.label_ids(tuple("123456789"))) == 9       # the score scale is safe here
    with pytest.raises(InputError) as e:
        enc.label_ids(("1", "10"))
    msg = _one_line(e.value)
    assert "'10'" in msg and "qwen3-digits" in msg and "2 tokens" in msg


def test_score_expert_runs_on_digit_splitting_tokenizer(digits_dir, loaded_models):
    pairs = [Pair("d", "What is 10 + 20?", "30", "It is 31 or 12.")]
    sig = run_experts(loaded_models(digits_dir), pairs, experts=["score"])
    assert len(sig[0].experts["score"]) == 2 and all(0 < u < 1 for u in sig[0].experts["score"])


def test_pair_longer_than_context(short_ctx_dir, loaded_models):
    long = "word " * 300
    with pytest.raises(InputError) as e:
        run_experts(loaded_models(short_ctx_dir), [Pair("long1", "q?", long, "short")], experts=["direct"])
    msg = _one_line(e.value)
    assert "long1" in msg and "context window" in msg and "(128)" in msg


def test_cli_reports_one_line_and_exit_2(tmp_path, capsys, qwen_dir):
    pairs = tmp_path / "pairs.jsonl"
    write_pairs(str(pairs), [Pair("x", "q", "a", "b")])
    rc = main(["experts", "--model", str(tmp_path / "missing"), "--input", str(pairs),
               "--out", str(tmp_path / "s.jsonl")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1].startswith("error:") and "model directory not found" in err[-1]
    rc = main(["experts", "--model", qwen_dir, "--input", str(pairs), "--out", str(tmp_path / "s.jsonl"),
               "--experts", "direct,bogus"])
    assert rc == 2 and "bogus" in capsys.readouterr().err


def test_triton_readout_requested_without_it_fails_loudly(loaded, monkeypatch):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: --kernels triton is valid here")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    from baer_fast.runtime.config import EngineConfig
    with pytest.raises(BaerError):
        run_experts(loaded, [Pair("x", "q", "a", "b")], experts=["direct"], config=EngineConfig(kernels="triton"))


@pytest.fixture(scope="module")
def nan_model_dir(tmp_path_factory, qwen_dir):
    """The tiny Qwen3 with its final norm's weight set to NaN: every logit comes out NaN."""
    import torch
    from transformers import AutoModelForCausalLM
    d = tmp_path_factory.mktemp("nan_model") / "broken-qwen3"
    shutil.copytree(qwen_dir, d)
    model = AutoModelForCausalLM.from_pretrained(qwen_dir)
    with torch.no_grad():
        model.model.norm.weight.fill_(float("nan"))
    model.save_pretrained(str(d), safe_serialization=True)
    return str(d)


def test_non_finite_verdicts_stop_with_the_model_and_pairs_named(nan_model_dir, loaded_models):
    pairs = [Pair("nan1", "Add 2 and 3.", "5", "6"), Pair("nan2", "Name a prime.", "7", "9")]
    with pytest.raises(BaerError) as e:
        run_experts(loaded_models(nan_model_dir), pairs, experts=["direct", "score"])
    msg = _one_line(e.value)
    assert "broken-qwen3" in msg and "non-finite" in msg and "nan1 (direct)" in msg and "nan2 (score)" in msg


def test_cli_reports_non_finite_verdicts_in_one_line(tmp_path, capsys, nan_model_dir):
    pairs = tmp_path / "pairs.jsonl"
    write_pairs(str(pairs), [Pair("x", "q", "a", "b")])
    out = tmp_path / "s.jsonl"
    rc = main(["experts", "--model", nan_model_dir, "--input", str(pairs), "--out", str(out), "--experts", "direct"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1].startswith("error:") and "non-finite" in err[-1] and "x (direct)" in err[-1]
    assert not out.exists() or "NaN" not in out.read_text()


def _hub_kernels_installed(monkeypatch):
    """Pretend the Hub's `kernels` distribution is installed in the range transformers uses
    (transformers >= 5.25 requires it)."""
    monkeypatch.setattr("transformers.utils.import_utils.is_kernels_available", lambda *a, **k: True)
    monkeypatch.delitem(sys.modules, "kernels", raising=False)


def test_checkout_kernels_shadowing_the_hub_package_is_named(monkeypatch, qwen_dir):
    """From the checkout's root, `import kernels` finds kernels/ (baer_fast.kernels); with the Hub
    package installed, transformers would fail inside its integrations. One line says why instead."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    monkeypatch.syspath_prepend(root)
    _hub_kernels_installed(monkeypatch)
    with pytest.raises(BaerError) as e:
        load_judge(qwen_dir)
    msg = _one_line(e.value)
    assert os.path.join(root, "kernels") in msg and "python -P" in msg


def test_the_hub_kernels_package_itself_passes_the_check(monkeypatch, tmp_path):
    from baer_fast.runtime.model.load import check_kernels_not_shadowed
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    _hub_kernels_installed(monkeypatch)
    check_kernels_not_shadowed()


def test_truncate_cuts_over_long_pairs_symmetrically_instead_of_stopping(tmp_path, capsys):
    """experts / score --model refuse a pair longer than the judge's context (nothing cut on one
    side); --truncate cuts it as the Python Judge does: every pair gets runs, the cut ones are
    marked, and the cut is the same for a pair and its swap (runs mirror)."""
    from baer_fast.io.records import read_signals
    from tests.fixtures.tiny_models import build_model_dir

    model = build_model_dir(str(tmp_path / "llama_192"), arch="llama", max_pos=192, seed=3)
    long = "word " * 300
    pairs = tmp_path / "pairs.jsonl"
    write_pairs(str(pairs), [Pair("long1", "q?", long, "short"), Pair("long2", "q?", "short", long),
                             Pair("ok", "q?", "yes", "no")])
    out = tmp_path / "sig.jsonl"
    args = ["experts", "--model", model, "--input", str(pairs), "--experts", "direct", "-q"]
    assert main([*args, "--out", str(tmp_path / "refused.jsonl")]) == 2
    assert "context window" in capsys.readouterr().err
    assert main([*args, "--out", str(out), "--truncate"]) == 0
    recs = {r.id: r for r in read_signals(str(out))}
    assert [r.meta.get("truncated") for r in recs.values()] == [True, True, None]
    mirror, swapped = recs["long1"].swapped(), recs["long2"]
    # exact, as for every swapped pair (bank/canonical.py): the cut is the same, so are the prompts
    assert mirror.experts == swapped.experts and mirror.meta["len_a"] == swapped.meta["len_a"] < len(long)


def test_an_over_long_pair_is_located_before_any_work_and_set_aside_under_skip(tmp_path, capsys):
    """Without --truncate an over-long pair stopped the run mid-way with no file or line, and under
    score --on-error skip it still stopped the whole run. Now: file:line at the first one, before any
    model work (no signals written); under skip it goes to the rejects and the rest is scored."""
    import json

    from baer_fast import protocols
    from baer_fast.bank.prompting import PromptEncoder
    from baer_fast.bank.truncation import over_long
    from baer_fast.runtime.model.load import tokenizer_and_context
    from tests.fixtures.tiny_models import build_model_dir

    model = build_model_dir(str(tmp_path / "llama_192"), arch="llama", max_pos=192, seed=3)
    pairs = tmp_path / "pairs.jsonl"
    write_pairs(str(pairs), [Pair("ok", "q?", "yes", "no"), Pair("long", "q?", "word " * 300, "short"),
                             Pair("ok2", "q?", "fine", "good")])
    sig = tmp_path / "sig.jsonl"
    assert main(["experts", "--model", model, "--input", str(pairs), "--experts", "direct", "-q",
                 "--out", str(sig)]) == 2
    err = capsys.readouterr().err
    assert f"{pairs}:2: field 'response_a': pair 'long'" in err and "context window" in err
    assert not sig.exists()
    from baer_fast import artifact
    head = tmp_path / "head.json"
    artifact.save(str(head), artifact.default_artifact())
    out = tmp_path / "scores.jsonl"
    assert main(["score", "--model", model, "--head", str(head), "--input", str(pairs), "--out", str(out),
                 "--on-error", "skip", "-q"]) == 0
    assert [json.loads(l)["id"] for l in out.read_text().splitlines() if '"id"' in l] == ["ok", "ok2"]
    rejected = [json.loads(l) for l in (tmp_path / "scores.jsonl.rejects.jsonl").read_text().splitlines()]
    assert [(r["line"], r["field"]) for r in rejected] == [(2, "response_a")]
    tok, n, _ = tokenizer_and_context(model)
    # the quick length filter never hides a pair the exact check would refuse
    for words in range(0, 200, 7):
        p = Pair("p", "q?", "word " * words, "short")
        refused = bool(over_long([p], tok, n, ["direct"]))
        enc = PromptEncoder(tok, model_name="m", context_len=1 << 62)
        longest = max(len(enc.encode(q, pair_id="p", expert="direct"))
                      for q in protocols.get("direct").prompts(p.question, p.response_a, p.response_b))
        assert refused == (longest > n), words


def test_an_unknown_dtype_names_the_choices(qwen_dir):
    """The loader raised KeyError: 'float17'."""
    from baer_fast.runtime.model.load import load_model
    with pytest.raises(InputError, match="unknown dtype 'float17' \\(choose from auto, float32"):
        load_model(qwen_dir, dtype="float17")


def test_a_device_this_torch_cannot_use_is_one_line_and_leaves_no_output(qwen_dir, tmp_path, capsys):
    """--device cuda on a CPU-only torch was an AssertionError traceback (check, experts, Judge), and
    experts left an empty <out>.raw.jsonl and its progress record behind."""
    import torch

    from baer_fast.runtime.model.load import load_model
    with pytest.raises(InputError, match="unknown device 'foo'"):
        load_model(qwen_dir, device="foo")
    missing = "cuda:99" if torch.cuda.is_available() else "cuda"
    with pytest.raises(InputError, match="field '--device'"):
        load_model(qwen_dir, device=missing)
    pairs = tmp_path / "pairs.jsonl"
    write_pairs(str(pairs), [Pair("ok", "q?", "yes", "no")])
    out = tmp_path / "run" / "x.jsonl"
    assert main(["experts", "--model", qwen_dir, "--input", str(pairs), "--device", missing, "--out", str(out)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not out.parent.exists() or not list(out.parent.iterdir())
