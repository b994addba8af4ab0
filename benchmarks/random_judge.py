"""Random-weight judges for the benchmarks: the CPU anchor model, or real 8B-class shapes on a GPU.

Nothing downloads. The tokenizer (trained locally, with a chat template) and the small anchor
model are written to a folder and loaded through the normal `--model PATH` loader. The large
shapes are built directly on the device from their config (writing 16 GB of random weights to
disk would only time the disk) and wrapped in the same LoadedModel the loader returns, so the
engine and the naive path run exactly as they do on a real checkpoint of that shape.

    from benchmarks.random_judge import load_random
    loaded = load_random(folder, "qwen3-8b", device="cuda", dtype="bfloat16")
"""
from __future__ import annotations

import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))   # for tests.fixtures

# (layers, hidden, heads, kv_heads, head_dim, intermediate, vocab) as the Qwen3 configs give them
SHAPES = {
    "anchor": dict(layers=4, hidden=256, heads=4, kv_heads=4, head_dim=64, intermediate=768, model_vocab=32768),
    "qwen3-1.7b": dict(layers=28, hidden=2048, heads=16, kv_heads=8, head_dim=128, intermediate=6144,
                       model_vocab=151936),
    "qwen3-8b": dict(layers=36, hidden=4096, heads=32, kv_heads=8, head_dim=128, intermediate=12288,
                     model_vocab=151936),
}
MAX_POS = 8192


def build_anchor_dir(folder: str) -> str:
    """The anchor model + tokenizer written to `folder` (the CPU benchmarks' model)."""
    from tests.fixtures.tiny_models import build_model_dir
    return build_model_dir(folder, arch="qwen3", max_pos=MAX_POS, seed=0, **SHAPES["anchor"])


def load_random(folder: str, shape: str = "anchor", *, device: str = "auto", dtype: str = "auto"):
    """A LoadedModel of `shape` with random weights (seeded); the tokenizer comes from `folder`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from baer_fast.runtime.model import load as ml
    from baer_fast.runtime.open import load_judge
    from tests.fixtures.tiny_models import _config

    if shape not in SHAPES:
        raise SystemExit(f"unknown shape {shape!r} (choose from {', '.join(SHAPES)})")
    path = build_anchor_dir(folder)
    if shape == "anchor":
        return load_judge(path, device=device, dtype=dtype)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
    s = dict(SHAPES[shape])
    cfg = _config("qwen3", s.pop("model_vocab"), max_pos=MAX_POS, **s)
    cfg._attn_implementation = "sdpa"
    cfg.initializer_range = 0.02     # Qwen3's own value: the tiny test models' 0.08 makes 36-layer logits explode
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=ml.resolve_dtype(device, dtype)).eval()
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return ml.LoadedModel(model, tok, f"{path}-{shape}", ml.cache_arg_name(model.base_model.forward),
                          ml._context_len(model.config), ml._kv_bytes_per_token(model),
                          ml.attention_windows(model.config))


def add_model_arguments(ap) -> None:
    """--shape, --device, --dtype: the benchmarks' model options (argparse)."""
    ap.add_argument("--shape", default="anchor", choices=sorted(SHAPES),
                    help="random-weight model shape: anchor (the CPU model) or a real judge's shape for a GPU")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto", help="auto: bf16 on CUDA, fp32 on CPU")
