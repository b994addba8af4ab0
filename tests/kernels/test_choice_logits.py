"""choice_logits (Triton) against choice_logits_ref (torch) and an fp64 reference.

The accuracy rule (flash-attention's): the kernel's error against fp64 is at most twice the
torch reference's own error, plus a floor of a few fp32 ulps of the largest logit. Both
paths upcast their inputs exactly to fp32, so what differs is only summation order.
"""
from __future__ import annotations

import math

import pytest
import torch

from baer_fast.kernels.choice_logits import MAX_CHOICES, choice_logits, choice_logits_ref

# inputs are upcast exactly to fp32 on both paths, so the gap is fp32 summation order whatever the
# input dtype (bounded in _assert_accurate by the torch path's own error vs fp64)
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
VOCABS = [32000, 32001, 151_936]
HIDDEN = [64, 257, 4096]
CHOICES = [2, 10]
ROWS = [1, 7, 1024]


def _slow_if(cond: bool):
    return [pytest.mark.slow] if cond else []


def _matrix():
    """Every combination; interpreted N=1024 x H=4096 tiles take 5-15 s each, so they are slow."""
    for dtype in DTYPES:
        for v in VOCABS:
            for h in HIDDEN:
                for c in CHOICES:
                    for n in ROWS:
                        slow = _slow_if(n == 1024 and h == 4096)
                        yield pytest.param(dtype, v, h, c, n, marks=slow,
                                           id=f"{str(dtype)[6:]}-V{v}-H{h}-C{c}-N{n}")


def _ids(n: int, c: int, v: int, gen: torch.Generator) -> torch.Tensor:
    """[N, C] int64 ids, including the first and last vocabulary rows (offset extremes)."""
    ids = torch.randint(0, v, (n, c), generator=gen)
    ids[0, 0], ids[-1, -1] = v - 1, 0
    return ids


def _sparse_head(v: int, h: int, dtype: torch.dtype, ids: torch.Tensor, gen: torch.Generator,
                 device: torch.device) -> torch.Tensor:
    """weight [V, H] with only the rows in `ids` filled, and NaN in their neighbours.

    torch.empty touches no pages, so a 151936 x 4096 head costs only the rows written; a
    read of a wrong row (off by one, wrong stride) would turn the output NaN.
    """
    w = torch.empty((v, h), dtype=dtype, device=device)
    rows = ids.unique()
    near = torch.cat([rows - 1, rows + 1]).clamp(0, v - 1)
    w[near[~torch.isin(near, rows)].to(device)] = float("nan")
    w[rows.to(device)] = (torch.randn(len(rows), h, generator=gen) / math.sqrt(h)).to(device, dtype)
    return w


def _exact(hidden, weight, ids, bias=None) -> torch.Tensor:
    """fp64 log-softmax over the gathered rows, computed from the same (rounded) inputs."""
    ids = ids if ids.dim() == 2 else ids.expand(hidden.shape[0], -1)
    logits = torch.einsum("nh,nch->nc", hidden.double(), weight[ids].double())
    if bias is not None:
        logits = logits + bias[ids].double()
    return torch.log_softmax(logits, dim=-1)


def _assert_accurate(hidden, weight, ids, bias=None, **kernel_kw) -> torch.Tensor:
    got = choice_logits(hidden, weight, ids, bias=bias, **kernel_kw)
    ref = choice_logits_ref(hidden, weight, ids, bias=bias)
    exact = _exact(hidden, weight, ids, bias)
    assert got.shape == ref.shape and got.dtype == torch.float32
    assert torch.isfinite(got).all()
    err_kernel = (got.double() - exact).abs().max().item()
    err_torch = (ref.double() - exact).abs().max().item()
    # floor: 4 fp32 ulps of the largest |logprob|, the rounding of any fp32 computation of it;
    # it keeps the rule meaningful where torch happens to be exact (0 vs 1-ulp kernel error).
    floor = 4 * torch.finfo(torch.float32).eps * (1.0 + exact.abs().max().item())
    assert err_kernel <= 2 * err_torch + floor, (err_kernel, err_torch, floor)
    # each within its bound of the exact value, so kernel vs torch within their sum
    torch.testing.assert_close(got, ref, rtol=0, atol=3 * err_torch + floor)
    return got


@pytest.mark.parametrize("dtype, v, h, c, n", list(_matrix()))
def test_matches_fp64_within_twice_torch_error(dtype, v, h, c, n, device):
    gen = torch.Generator().manual_seed(v + h + c + n)
    ids = _ids(n, c, v, gen)
    weight = _sparse_head(v, h, dtype, ids, gen, device)
    hidden = torch.randn(n, h, generator=gen).to(device, dtype)
    _assert_accurate(hidden, weight, ids.to(device))


def test_reads_only_the_chosen_rows(device):
    """Every other row of the head and of the bias is NaN: the output must stay finite."""
    gen = torch.Generator().manual_seed(0)
    v, h, n, c = 1000, 96, 9, 4
    ids = torch.randint(0, v, (n, c), generator=gen)
    weight = torch.full((v, h), float("nan"))
    bias = torch.full((v,), float("nan"))
    weight[ids] = torch.randn(n, c, h, generator=gen)
    bias[ids] = torch.randn(n, c, generator=gen)
    hidden = torch.randn(n, h, generator=gen)
    for tile in (None, 64):
        _assert_accurate(hidden.to(device), weight.to(device), ids.to(device), bias.to(device),
                         tile_elems=tile)


@pytest.mark.parametrize("n, h, c, tile", [(7, 257, 3, 128), (13, 100, 3, 4096), (5, 1, 2, None),
                                           (33, 3, 16, 64), (100, 257, 10, 8192)])
def test_small_tiles_loop_over_h_and_partial_row_blocks(n, h, c, tile, device):
    """The GPU tile (8192) and smaller ones: several H steps, padded rows, padded choices."""
    gen = torch.Generator().manual_seed(n * h)
    ids = _ids(n, c, 500, gen)
    weight = torch.randn(500, h, generator=gen).to(device)
    hidden = torch.randn(n, h, generator=gen).to(device)
    _assert_accurate(hidden, weight, ids.to(device), tile_elems=tile)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shared", [True, False], ids=["ids[C]", "ids[N,C]"])
def test_bias_and_shared_or_per_row_ids(dtype, shared, device):
    gen = torch.Generator().manual_seed(3)
    v, h, n, c = 32001, 257, 7, 5
    ids = torch.randint(0, v, (c,) if shared else (n, c), generator=gen)
    weight = torch.randn(v, h, generator=gen).div(math.sqrt(h)).to(device, dtype)
    bias = torch.randn(v, generator=gen).to(device, dtype)
    hidden = torch.randn(n, h, generator=gen).to(device, dtype)
    got = _assert_accurate(hidden, weight, ids.to(device), bias)
    if shared:
        per_row_ids = ids.expand(n, -1).contiguous().to(device)
        per_row = choice_logits(hidden, weight, per_row_ids, bias=bias)
        torch.testing.assert_close(got, per_row, rtol=0, atol=0)


@pytest.mark.parametrize("c", [1, 3, 9, 16])
def test_choices_up_to_16_with_odd_h(c, device):
    gen = torch.Generator().manual_seed(c)
    ids = _ids(6, c, 777, gen)
    weight = torch.randn(777, 131, generator=gen).to(device)
    got = _assert_accurate(torch.randn(6, 131, generator=gen).to(device), weight, ids.to(device))
    torch.testing.assert_close(got.exp().sum(-1), torch.ones(6, device=device))


def test_tied_embeddings_and_strided_head(device):
    """The input embedding as LM head (a Parameter), a [H, V]-stored head seen transposed,
    and hidden states sliced at the last position (row stride T*H)."""
    torch.manual_seed(5)
    v, h, n, t = 4099, 65, 4, 3
    emb = torch.nn.Embedding(v, h).to(device)
    states = emb(torch.randint(0, v, (n, t), device=device))               # [N, T, H]
    ids = torch.tensor([17, 4098, 0], device=device)
    with torch.no_grad():
        _assert_accurate(states[:, -1], emb.weight, ids)                   # tied, [C] ids
        head_hv = torch.randn(h, v, device=device)                         # stored [H, V]
        _assert_accurate(states[:, -1], head_hv.T, ids.expand(n, -1))      # weight strides (1, V)


def test_int32_ids_and_empty_batch(device):
    gen = torch.Generator().manual_seed(9)
    weight = torch.randn(300, 40, generator=gen).to(device)
    hidden = torch.randn(3, 40, generator=gen).to(device)
    ids = torch.tensor([[1, 299], [0, 5], [7, 7]], dtype=torch.int32)
    _assert_accurate(hidden, weight, ids.to(device))
    empty = choice_logits(hidden[:0], weight, ids[:0].to(device))
    assert empty.shape == (0, 2) and empty.dtype == torch.float32


@pytest.mark.parametrize("case, error", [
    ("no_choices", ValueError), ("too_many_choices", ValueError), ("h_mismatch", ValueError),
    ("out_of_range", IndexError), ("ids_rows", ValueError), ("float_ids", ValueError),
])
def test_rejects_bad_inputs(case, error):
    hidden, weight = torch.randn(2, 8), torch.randn(100, 8)
    ids = {"no_choices": torch.zeros(2, 0, dtype=torch.long),
           "too_many_choices": torch.zeros(2, MAX_CHOICES + 1, dtype=torch.long),
           "h_mismatch": torch.zeros(2, 2, dtype=torch.long),
           "out_of_range": torch.tensor([0, 100]),
           "ids_rows": torch.zeros(3, 2, dtype=torch.long),
           "float_ids": torch.zeros(2, 2)}[case]
    if case == "h_mismatch":
        weight = torch.randn(100, 9)
    with pytest.raises(error):
        choice_logits(hidden, weight, ids)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shared", [True, False], ids=["ids[C]", "ids[N,C]"])
def test_compiled_kernel_at_qwen3_8b_shape(dtype, shared):
    """Compiled on the GPU with a full random 151936 x 4096 head and 2048 positions."""
    gen = torch.Generator(device="cuda").manual_seed(11)
    v, h, n, c = 151_936, 4096, 2048, 10
    weight = (torch.randn(v, h, generator=gen, device="cuda") / math.sqrt(h)).to(dtype)
    bias = torch.randn(v, generator=gen, device="cuda").to(dtype)
    ids = torch.randint(0, v, (c,) if shared else (n, c), generator=gen, device="cuda")
    hidden = torch.randn(n, h, generator=gen, device="cuda").to(dtype)
    _assert_accurate(hidden, weight, ids, bias)
    _assert_accurate(hidden, weight, ids)
