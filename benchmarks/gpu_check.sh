#!/usr/bin/env bash
# GPU check: one command, run from the repo root on a CUDA machine (a lent GPU session).
#
#   bash benchmarks/gpu_check.sh            # results under $OUT if set, else ./gpu_check_out
#
# Installs nothing and assumes none of our pins: it uses the machine's own python, torch,
# triton, transformers, and pytest/pytest-benchmark if they are there.
#   1. makes `baer_fast` (with `kernels/` as `baer_fast.kernels`) importable from this checkout:
#      already importable, else a link baer_fast/kernels -> ../kernels in the checkout for the
#      run (removed on exit);
#   2. tests, compiled on CUDA (TRITON_INTERPRET unset): tests/gpu (engine == naive in fp32,
#      CUDA == CPU, bf16 error no worse than naive, Triton readout inside the engine, decoder ==
#      HF generate, Judge antisymmetry in bf16) and tests/kernels (slow ones included)
#      -> tests.xml, tests.log; without pytest a plain-Python kernel smoke check -> in summary;
#   3. benchmarks, never failing the check (all output -> bench.log):
#      bench_kernels (pytest-benchmark -> bench_kernels.json),
#      bench_engine at the Qwen3-8B shape, bf16 (naive vs prefix engine; the real-lengths
#      workload on 4 LLMBar sample pairs, to stay within its timeout -> bench_engine.json),
#      bench_decode at the Qwen3-8B shape on 3 LLMBar sample pairs (HF generate vs the batched
#      decoder, its steps in width groups and in one width -> bench_decode.json),
#      bench_decode --steps 64 at the Qwen3-8B shape (run first of the benchmarks): 64 greedy rows
#      decoding together through eager masked SDPA steps (kernels torch), eager decode-attention
#      kernel steps (kernels auto, taken only if its load-time numerical probe passes) and steps
#      replayed from CUDA graphs (graphs auto, taken only if their load-time probe gives the eager
#      tokens; the log says which): tokens/s, step time, the weights-read floor (weights over the
#      measured copy bandwidth) -> bench.log and summary.json;
#      profile_decode --variants at the same shape: the decode-attention kernel's launch variants
#      (us per call, error against float64) and captured steps with the sums, default and fastest
#      launch -> bench.log and summary.json;
#      bench_backends if vllm is installed (-> bench_backends.json);
#   4. summary.json: environment, exit codes, the benchmark lines.
# At most 8 files come back from a lent machine: the list above is exactly 8. A lent machine's
# command may run 10 minutes: each step's timeout is cut to what is left of BUDGET_S (default 570 s),
# and a step with under 30 s left is skipped (the log says so).
# Exit status: non-zero when the tests fail; benchmarks never fail the check.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$ROOT/gpu_check_out}"
PY="${PYTHON:-python3}"
TMP="$(mktemp -d)"
mkdir -p "$OUT"
cd "$ROOT" || exit 2
unset TRITON_INTERPRET                    # compiled kernels, not the interpreter
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_check: no CUDA device visible to torch; nothing to check" >&2
    exit 2
fi

# 1. import path: `kernels/` is installed as `baer_fast.kernels` only by setup.py. Without an
# install, a link in the checkout maps it for this run: pytest puts the checkout itself first on
# sys.path, so a mapped copy elsewhere on PYTHONPATH would be shadowed by the checkout's baer_fast/.
if ! "$PY" -P -c "import baer_fast.kernels.dispatch" 2>/dev/null; then
    ln -sfn ../kernels "$ROOT/baer_fast/kernels"
    trap 'rm -f "$ROOT/baer_fast/kernels"; rm -rf "$TMP"' EXIT
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
BUDGET_S="${BUDGET_S:-570}"
# the timeout for a step that may take $1 s: what is left of the budget if less; 0: skip it
limit() { local left=$((BUDGET_S - SECONDS)); (( left < 30 )) && echo 0 || echo $(( $1 < left ? $1 : left )); }
run_for() {             # run_for SECONDS NAME CMD...: the command under its limit, or a skip line in the log
    local t; t=$(limit "$1"); shift
    local name=$1; shift
    if (( t == 0 )); then echo "== $name skipped: the ${BUDGET_S}s budget is spent" >> "$LOG"; return 124; fi
    timeout "$t" "$@"
}
"$PY" -P - > "$TMP/env.json" <<'EOF'
import json, os, platform, torch, triton, transformers, baer_fast.kernels.dispatch as d
print(json.dumps({"python": platform.python_version(), "torch": torch.__version__,
                  "triton": triton.__version__, "transformers": transformers.__version__,
                  "gpu": torch.cuda.get_device_name(0), "cpus": os.cpu_count(),
                  "has_triton_gpu": d.HAS_TRITON_GPU, "dispatch": d.__file__}))
EOF
cat "$TMP/env.json"

LOG="$OUT/bench.log"        # the benchmarks' one log (and the budget's skip lines)
: > "$LOG"

# 2. tests, compiled on the GPU
if "$PY" -c "import pytest" 2>/dev/null; then
    run_for 170 tests "$PY" -P -m pytest tests/gpu tests/kernels -q -rs -s -m "slow or not slow" -p no:cacheprovider \
        -o addopts="" --junitxml="$OUT/tests.xml" 2>&1 | tee "$OUT/tests.log"
    TESTS_RC=${PIPESTATUS[0]}
else
    run_for 170 smoke "$PY" -P - "$TMP/gpu_smoke.json" <<'EOF'
"""No pytest here: compiled kernels vs references at the shapes that matter, one JSON."""
import json, sys
import numpy as np, torch
from baer_fast.features import evidence as numpy_ref
from baer_fast.kernels.choice_logits import choice_logits, choice_logits_ref
from baer_fast.kernels.evidence_features import evidence_features

def readout(dtype, shared, bias):
    g = torch.Generator(device="cuda").manual_seed(0)
    v, h, n, c = 151_936, 4096, 2048, 10
    w = (torch.randn(v, h, generator=g, device="cuda") / h ** 0.5).to(dtype)
    x = torch.randn(n, h, generator=g, device="cuda").to(dtype)
    ids = torch.randint(0, v, (c,) if shared else (n, c), generator=g, device="cuda")
    b = torch.randn(v, generator=g, device="cuda").to(dtype) if bias else None
    ids2 = ids if ids.dim() == 2 else ids.expand(n, -1)
    exact = torch.einsum("nh,nch->nc", x.double(), w[ids2].double())
    exact = torch.log_softmax(exact + (b[ids2].double() if bias else 0), -1)
    err_k = (choice_logits(x, w, ids, bias=b).double() - exact).abs().max().item()
    err_t = (choice_logits_ref(x, w, ids, bias=b).double() - exact).abs().max().item()
    floor = 4 * torch.finfo(torch.float32).eps * (1 + exact.abs().max().item())
    return {"err_kernel": err_k, "err_torch": err_t, "ok": err_k <= 2 * err_t + floor}

def evidence(dtype):
    rng = np.random.default_rng(0)
    u = rng.random((100_000, 16, 5)); u[rng.random(u.shape) < 0.3] = np.nan; u[0] = np.nan
    want = numpy_ref.evidence(u)
    got = evidence_features(torch.from_numpy(u).to("cuda", dtype))
    errs = [float(np.abs(g.double().cpu().numpy() - w).max()) for g, w in zip(got, want)]
    return {"max_err": max(errs), "ok": max(errs) <= (1e-12 if dtype == torch.float64 else 1e-4)}

res = {f"readout-{str(dt)[6:]}-{'shared' if s else 'per_row'}-{'bias' if b else 'nobias'}":
       readout(dt, s, b) for dt in (torch.float32, torch.bfloat16, torch.float16)
       for s in (True, False) for b in (True, False)}
res.update({f"evidence-{str(dt)[6:]}": evidence(dt) for dt in (torch.float64, torch.float32)})
json.dump(res, open(sys.argv[1], "w"), indent=1)
print(json.dumps(res))
sys.exit(0 if all(r["ok"] for r in res.values()) else 1)
EOF
    TESTS_RC=$?
fi

# 3. benchmarks (never fail the check)
export BENCH_KERNELS_JSON="$TMP/bench_kernels_line.json"
echo "== bench_decode --steps 64 (qwen3-8b shape, bf16: masked eager, kernel eager, captured)" >> "$LOG"
run_for 150 bench_decode_steps "$PY" -P benchmarks/bench_decode.py --steps 64 --prompt-tokens 512 --budget 64 --shape qwen3-8b \
    --device cuda --dtype bfloat16 > "$TMP/bench_decode_steps_line.json" 2>> "$LOG"
STEPS_RC=$?
cat "$TMP/bench_decode_steps_line.json" >> "$LOG"
echo "== profile_decode --variants (qwen3-8b shape, bf16: decode-attention launches, captured steps)" >> "$LOG"
run_for 130 profile_decode "$PY" -P benchmarks/profile_decode.py --shape qwen3-8b --device cuda --dtype bfloat16 \
    --variants --no-profile > "$TMP/profile_variants_line.json" 2>> "$LOG"
VARIANTS_RC=$?
echo "== bench_kernels" >> "$LOG"
if "$PY" -c "import pytest, pytest_benchmark" 2>/dev/null; then
    run_for 60 bench_kernels "$PY" -P -m pytest benchmarks/bench_kernels.py -q -s -p no:cacheprovider -o addopts="" \
        --benchmark-json="$OUT/bench_kernels.json" >> "$LOG" 2>&1
else
    run_for 60 bench_kernels "$PY" -P benchmarks/bench_kernels.py >> "$LOG" 2>&1
fi
KERNELS_RC=$?
echo "== bench_engine (qwen3-8b shape, bf16)" >> "$LOG"
run_for 110 bench_engine "$PY" -P benchmarks/bench_engine.py --shape qwen3-8b --device cuda --dtype bfloat16 \
    --pairs 8 --rounds 2 --warmup 1 --memory-gb 48 --sample-pairs 4 --json "$OUT/bench_engine.json" >> "$LOG" 2>&1
ENGINE_RC=$?
echo "== bench_decode (qwen3-8b shape, bf16)" >> "$LOG"
run_for 120 bench_decode "$PY" -P benchmarks/bench_decode.py --shape qwen3-8b --device cuda --dtype bfloat16 \
    --pairs 3 --rounds 1 --budget 32 --warmup 1 --memory-gb 48 --sample --unsplit > "$OUT/bench_decode.json" 2>> "$LOG"
DECODE_RC=$?
# vLLM backend: hf engine vs vLLM on the same token ids, only if this python already has vllm.
if "$PY" -c "import vllm" 2>/dev/null; then
    echo "== bench_backends" >> "$LOG"
    run_for 200 bench_backends "$PY" -P benchmarks/bench_backends.py --rounds 3 --json "$OUT/bench_backends.json" >> "$LOG" 2>&1
    BACKENDS_RC=$?
else
    echo "== bench_backends skipped: vllm is not installed here" >> "$LOG"
    BACKENDS_RC=-1
fi
tail -n 40 "$LOG"

# 4. summary
"$PY" - "$OUT" "$TMP" "$TESTS_RC" "$KERNELS_RC" "$ENGINE_RC" "$DECODE_RC" "$BACKENDS_RC" "$STEPS_RC" "$VARIANTS_RC" <<'EOF'
import json, os, sys
out, tmp = sys.argv[1], sys.argv[2]
rc = dict(zip(["tests", "bench_kernels", "bench_engine", "bench_decode", "bench_backends", "bench_decode_steps",
                    "profile_decode"],
              map(int, sys.argv[3:])))
def read(folder, name):
    path = os.path.join(folder, name)
    try:
        with open(path) as f:
            return json.loads(f.read().strip().splitlines()[-1]) if name.endswith("_line.json") or \
                name == "bench_decode.json" else json.load(f)
    except (OSError, ValueError, IndexError):
        return None
summary = {"env": read(tmp, "env.json"), "rc": rc, "smoke": read(tmp, "gpu_smoke.json"),
           "bench_kernels": read(tmp, "bench_kernels_line.json"), "bench_engine": read(out, "bench_engine.json"),
           "bench_decode": read(out, "bench_decode.json"), "bench_backends": read(out, "bench_backends.json"),
           "bench_decode_steps": read(tmp, "bench_decode_steps_line.json"),
           "profile_decode": read(tmp, "profile_variants_line.json")}
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(summary, f, indent=1)
print(json.dumps({k: v for k, v in summary.items() if k in ("env", "rc")}))
EOF
exit "$TESTS_RC"
