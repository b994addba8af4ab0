"""Decode attention over slot buffers (kernels/decode_attention.py): the Triton kernel (interpreted
on CPU, compiled on CUDA) and its torch reference against an fp64 computation.

Tolerance (flash-attention's rule): the kernel's error against fp64 is at most twice torch's own
SDPA error in the same dtype (with a masked 4-D mask, as the decoder calls it today), plus the
input dtype's rounding of the output."""
import math

import pytest
import torch

from baer_fast.kernels.decode_attention import decode_attention, decode_attention_ref
from baer_fast.runtime.decode_kernel import masked_sdpa

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _case(device, dtype, *, hq, hkv, d, dv, lengths, slots_n=7, cols=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    b = len(lengths)
    cols = cols or max(lengths) + 3
    q = torch.randn(b, hq, d, generator=g).to(device, dtype)
    k = torch.randn(slots_n, hkv, cols, d, generator=g).to(device, dtype)
    v = torch.randn(slots_n, hkv, cols, dv, generator=g).to(device, dtype)
    slots = torch.randperm(slots_n, generator=g)[:b].to(device)
    return q, k, v, slots, torch.tensor(lengths, device=device)


def _exact(q, k, v, slots, lengths, scale):
    return decode_attention_ref(q.double(), k.double(), v.double(), slots, lengths, scale=scale)


@pytest.mark.parametrize("dot", [False, True], ids=["sums", "dot"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: str(t)[6:])
@pytest.mark.parametrize("hq,hkv,d,dv", [(2, 2, 64, 64), (8, 2, 40, 40), (6, 2, 72, 72), (4, 1, 24, 16)])
def test_kernel_within_twice_torch_error(device, dtype, hq, hkv, d, dv, dot):
    if dot and dtype == torch.bfloat16 and not torch.cuda.is_available():
        pytest.skip("the Triton interpreter's bf16 tl.dot is wrong (numpy has no bf16); fp16 runs this path on CPU")
    lengths = [1, 37, 70, 33]
    q, k, v, slots, lens = _case(device, dtype, hq=hq, hkv=hkv, d=d, dv=dv, lengths=lengths)
    scale = 1 / math.sqrt(d)
    exact = _exact(q, k, v, slots, lens, scale)
    got = decode_attention(q, k, v, slots, lens, scale=scale, split=32, dot=dot)     # several chunks a row
    torch_err = (masked_sdpa(q, k, v, slots, lens, scale=scale).double() - exact).abs().max().item()
    err = (got.double() - exact).abs().max().item()
    # a sum of n rounded terms errs by about sqrt(n) ulps; torch's error on one draw can be luckier than
    # that (numpy 1.26's interpreter dot: 8.9e-7 against 2 x 2.4e-7 + 1 ulp)
    floor = math.sqrt(max(lengths)) * torch.finfo(dtype).eps * exact.abs().max().item()
    assert got.dtype == dtype and got.shape == (len(lengths), hq, dv)
    assert err <= 2 * torch_err + floor, (err, torch_err)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: str(t)[6:])
def test_reference_is_the_masked_softmax(dtype):
    """The reference (the CPU path) itself: within twice SDPA's error too, and columns past a
    row's length never matter (NaN there changes nothing)."""
    q, k, v, slots, lens = _case("cpu", dtype, hq=4, hkv=2, d=32, dv=32, lengths=[3, 50, 17])
    scale = 1 / math.sqrt(32)
    exact = _exact(q, k, v, slots, lens, scale)
    ref = decode_attention_ref(q, k, v, slots, lens, scale=scale)
    torch_err = (masked_sdpa(q, k, v, slots, lens, scale=scale).double() - exact).abs().max().item()
    assert (ref.double() - exact).abs().max().item() <= 2 * torch_err + torch.finfo(dtype).eps
    for b, n in enumerate(lens.tolist()):
        k[slots[b], :, n:] = float("nan")
        v[slots[b], :, n:] = float("nan")
    assert torch.equal(decode_attention_ref(q, k, v, slots, lens, scale=scale), ref)


def test_kernel_never_reads_past_a_rows_length(device):
    q, k, v, slots, lens = _case(device, torch.float32, hq=4, hkv=2, d=32, dv=32, lengths=[5, 70, 1])
    want = decode_attention(q, k, v, slots, lens, scale=0.2, split=32)
    for b, n in enumerate(lens.tolist()):
        k[slots[b], :, n:] = float("nan")
        v[slots[b], :, n:] = float("nan")
    assert torch.equal(decode_attention(q, k, v, slots, lens, scale=0.2, split=32), want)


def test_bad_shapes_are_refused(device):
    q, k, v, slots, lens = _case(device, torch.float32, hq=3, hkv=2, d=16, dv=16, lengths=[4])
    with pytest.raises(ValueError, match="multiple"):
        decode_attention(q, k, v, slots, lens, scale=1.0)
