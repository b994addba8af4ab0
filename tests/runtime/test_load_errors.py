"""The model folder's problems are one located line (exit 2), before the weights load; the weight
files counted are exactly the ones transformers loads; their fingerprint tells checkpoints apart."""
import json
import os
import shutil

import pytest

from baer_fast.cli import main
from baer_fast.errors import InputError
from baer_fast.io.records import Pair, write_pairs
from baer_fast.runtime.model import folder
from baer_fast.runtime.model import load as model_loader


def _copy(src, tmp_path, name):
    d = tmp_path / name
    shutil.copytree(src, d)
    return d


def _refused(path, *, match):
    """load_model refuses `path` with one line matching `match`, before any weights load."""
    with pytest.raises(InputError, match=match) as e:
        model_loader.load_model(str(path), device="cpu")
    assert "\n" not in str(e.value)
    return str(e.value)


@pytest.fixture
def no_weight_loads(monkeypatch):
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained",
                        lambda *a, **k: pytest.fail("weights loaded"))


def test_malformed_config_json_is_located(tmp_path, qwen_dir, no_weight_loads):
    d = _copy(qwen_dir, tmp_path, "badjson")
    (d / "config.json").write_text('{"model_type": "qwen3",\n')
    msg = _refused(d, match="not valid JSON")
    assert msg.startswith(f"{d / 'config.json'}:2: ")
    (d / "config.json").write_text("[1, 2]")
    _refused(d, match="not a model config")


def test_an_unknown_model_type_is_named(tmp_path, qwen_dir, no_weight_loads):
    d = _copy(qwen_dir, tmp_path, "unsupported")
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "model_type": "frobnicator"}))
    msg = _refused(d, match="model_type 'frobnicator' is not a model transformers")
    assert msg.startswith(f"{d / 'config.json'}: ")
    (d / "config.json").write_text(json.dumps({**cfg, "model_type": "frobnicator",
                                               "auto_map": {"AutoConfig": "frob.FrobConfig"}}))
    _refused(d, match="--trust-remote-code")


def test_a_truncated_safetensors_file_is_named(tmp_path, qwen_dir, no_weight_loads):
    d = _copy(qwen_dir, tmp_path, "truncated")
    blob = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(blob[:len(blob) // 2])
    _refused(d, match=r"model.safetensors: truncated or damaged: its header describes \d+ bytes")
    (d / "model.safetensors").write_bytes(blob[:100])              # cut inside the header
    _refused(d, match="model.safetensors: (truncated or not a safetensors file|not a safetensors file)")
    (d / "model.safetensors").write_bytes(b"")
    _refused(d, match="truncated or not a safetensors file")


def test_pickled_weights_with_a_stray_adapter_are_refused_as_pickle(tmp_path, qwen_dir, no_weight_loads):
    """The adapter's *.safetensors passed the old glob, then transformers raised OSError (no pickle loaded)."""
    d = _copy(qwen_dir, tmp_path, "stray_adapter")
    os.rename(d / "model.safetensors", d / "pytorch_model.bin")
    shutil.copy(d / "pytorch_model.bin", d / "adapter_model.safetensors")
    msg = _refused(d, match=r"only pickled weights \(pytorch_model.bin\)")
    assert "adapter_model.safetensors is not the model's weights" in msg
    os.unlink(d / "pytorch_model.bin")
    _refused(d, match="neither model.safetensors nor model.safetensors.index.json")


def test_missing_tokenizer_files_are_named_before_the_weights_load(tmp_path, qwen_dir, no_weight_loads):
    """transformers built an empty tokenizer from config.json alone: the error was a 0-token label."""
    d = _copy(qwen_dir, tmp_path, "notok")
    os.unlink(d / "tokenizer.json")
    os.unlink(d / "tokenizer_config.json")
    msg = _refused(d, match="no tokenizer files")
    assert msg.startswith(f"{d}: ") and "tokenizer.json" in msg and "vocab" in msg


def test_a_file_passed_as_the_model_is_called_a_file(tmp_path, no_weight_loads):
    gguf, other = tmp_path / "judge.Q4_K_M.gguf", tmp_path / "weights.safetensors"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00")
    other.write_bytes(b"\x00" * 16)
    msg = _refused(gguf, match="a GGUF file, not a model folder; GGUF is not supported")
    assert "safetensors" in msg
    _refused(other, match="a file, not a model folder")
    (tmp_path / "gguf_dir").mkdir()
    shutil.copy(gguf, tmp_path / "gguf_dir" / "m.gguf")
    (tmp_path / "gguf_dir" / "config.json").write_text("{}")
    _refused(tmp_path / "gguf_dir", match=r"GGUF weights \(m.gguf\) are not supported")


def test_cli_reports_a_bad_model_folder_in_one_line(tmp_path, qwen_dir, capsys):
    d = _copy(qwen_dir, tmp_path, "badjson")
    (d / "config.json").write_text("{")
    pairs = tmp_path / "pairs.jsonl"
    write_pairs(str(pairs), [Pair("x", "q", "a", "b")])
    for argv in (["check", "--model", str(d)],
                 ["experts", "--model", str(d), "--input", str(pairs), "--out", str(tmp_path / "s.jsonl")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert "Traceback" not in "".join(err) and err[-1].startswith(f"error: {d / 'config.json'}:1: ")


@pytest.fixture(scope="module")
def mistral_style(tmp_path_factory, qwen_dir):
    """As mistralai/Mistral-7B-Instruct-v0.3 ships: model-0000x-of-0000y shards + their index, and the
    same weights again as consolidated.safetensors (Mistral's own format; transformers ignores it)."""
    from transformers import AutoModelForCausalLM
    d = tmp_path_factory.mktemp("mistral_style") / "m"
    shutil.copytree(qwen_dir, d)
    os.unlink(d / "model.safetensors")
    AutoModelForCausalLM.from_pretrained(qwen_dir).save_pretrained(str(d), max_shard_size="200KB")
    shutil.copy(os.path.join(qwen_dir, "model.safetensors"), d / "consolidated.safetensors")
    return str(d)


def test_a_mistral_style_folder_counts_only_what_transformers_loads(mistral_style, qwen_dir, monkeypatch):
    shards = folder.weight_files(mistral_style)
    assert len(shards) > 1 and all("-of-" in os.path.basename(f) for f in shards)
    assert folder.weight_files(qwen_dir) == [os.path.join(qwen_dir, "model.safetensors")]
    n = model_loader.weight_elements(qwen_dir)
    assert model_loader.weight_elements(mistral_style) == n
    import torch
    monkeypatch.setattr(model_loader, "free_bytes", lambda device: int(4 * n * 1.5))   # room for 1.5 copies
    model_loader.check_fits(mistral_style, "cpu", torch.float32)
    m = model_loader.load_model(mistral_style, device="cpu")
    assert sum(p.numel() for p in m.model.parameters()) == n


def test_an_index_naming_a_missing_shard_is_named(tmp_path, mistral_style):
    d = _copy(mistral_style, tmp_path, "m")
    gone = os.path.basename(folder.weight_files(str(d))[-1])
    os.unlink(d / gone)
    with pytest.raises(InputError, match=f"model.safetensors.index.json maps tensors to {gone}, which is not"):
        folder.check_model_dir(str(d))


def test_the_fingerprint_tells_same_shaped_checkpoints_apart(tmp_path, qwen_dir, mistral_style):
    """`experts` resumed onto another checkpoint of the same file sizes and mixed two models."""
    from tests.fixtures.tiny_models import build_model_dir
    other = build_model_dir(str(tmp_path / "seed1"), seed=1)
    fp = folder.weights_fingerprint(qwen_dir)
    assert os.path.getsize(os.path.join(other, "model.safetensors")) == fp["model.safetensors"]["size"]
    assert folder.weights_fingerprint(other) != fp
    assert folder.weights_fingerprint(other)["model.safetensors"]["header_sha256"] == fp["model.safetensors"][
        "header_sha256"]                                           # same shapes: only the data tells them apart
    assert folder.weights_fingerprint(str(_copy(qwen_dir, tmp_path, "copy"))) == fp       # same files, anywhere
    assert json.loads(json.dumps(fp)) == fp
    sharded = folder.weights_fingerprint(mistral_style)
    assert sorted(sharded) == [os.path.basename(f) for f in folder.weight_files(mistral_style)]


def test_the_fingerprint_reads_a_few_samples_not_the_file(tmp_path, monkeypatch):
    """A 16 GB checkpoint must not be read whole: header + 3 x 64 KiB per file."""
    import torch
    from safetensors.torch import save_file
    d = tmp_path / "big"
    d.mkdir()
    (d / "config.json").write_text("{}")
    save_file({"w": torch.arange(4 << 20, dtype=torch.float32)}, str(d / "model.safetensors"))   # 16 MiB
    read = []
    real_open = open

    class Counting:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

        def __getattr__(self, name):
            return getattr(self.f, name)

        def read(self, n=-1):
            out = self.f.read(n)
            read.append(len(out))
            return out

    monkeypatch.setattr(folder, "open", lambda *a, **k: Counting(real_open(*a, **k)), raising=False)
    before = folder.weights_fingerprint(str(d))
    assert 0 < sum(read) < 1 << 20
    blob = bytearray((d / "model.safetensors").read_bytes())
    blob[-1] ^= 1                                                   # the end sample changes
    (d / "model.safetensors").write_bytes(bytes(blob))
    assert folder.weights_fingerprint(str(d)) != before


def test_engine_config_errors_name_the_flag(tmp_path, qwen_dir, capsys):
    from baer_fast.runtime.config import EngineConfig
    for kw, flag in (({"memory_budget_bytes": 0}, "--memory-gb"), ({"memory_budget_bytes": -1}, "--memory-gb"),
                     ({"batch_tokens": 0}, "--batch-tokens")):
        with pytest.raises(InputError, match=f"field '{flag}': must be") as e:
            EngineConfig(**kw)
        assert isinstance(e.value, ValueError)                     # as before, for code that builds configs
    pairs = tmp_path / "pairs.jsonl"
    write_pairs(str(pairs), [Pair("x", "q", "a", "b")])
    for flag, value in (("--memory-gb", "0"), ("--memory-gb", "-1"), ("--batch-tokens", "0")):
        out = tmp_path / "run" / "s.jsonl"
        rc = main(["experts", "--model", qwen_dir, "--input", str(pairs), "--out", str(out), "--experts", "direct",
                   "-q", flag, value])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and "Traceback" not in "".join(err) and f"field '{flag}'" in err[-1], err
