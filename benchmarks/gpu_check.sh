#!/usr/bin/env bash
# GPU check for the Triton kernels: one command, run from the repo root on a CUDA machine.
#
#   bash benchmarks/gpu_check.sh            # results under $OUT if set, else ./gpu_check_out
#
# What it does, installing nothing and assuming none of our pins (it uses the machine's own
# python, torch, triton, and pytest/pytest-benchmark only if they are there):
#   1. makes `baer_fast.kernels` importable from this checkout: already importable, else a
#      symlink view (baer_fast/* + kernels/ as baer_fast/kernels) on PYTHONPATH;
#   2. runs tests/kernels COMPILED (TRITON_INTERPRET unset; CUDA tensors; slow and gpu-marked
#      tests included) -> kernel_tests.xml, kernel_tests.log;
#      without pytest, a plain-Python check of the compiled kernels against their
#      references instead -> gpu_smoke.json;
#   3. runs benchmarks/bench_kernels.py (pytest-benchmark, or its standalone loop without it)
#      -> bench_kernels.json (full stats, pytest-benchmark only) and bench_kernels_line.json;
#   4. writes summary.json: environment, exit codes, the benchmark line.
# Exit status: non-zero when the kernel checks fail; benchmarks never fail the check.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$ROOT/gpu_check_out}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
cd "$ROOT" || exit 2
unset TRITON_INTERPRET                    # compiled kernels, not the interpreter

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_check: no CUDA device visible to torch; nothing to check" >&2
    exit 2
fi

# 1. import path: `kernels/` is installed as `baer_fast.kernels` only by setup.py.
if ! "$PY" -P -c "import baer_fast.kernels.dispatch" 2>/dev/null; then
    VIEW="$(mktemp -d)"
    mkdir -p "$VIEW/baer_fast"
    for entry in "$ROOT"/baer_fast/*; do ln -s "$entry" "$VIEW/baer_fast/"; done
    ln -s "$ROOT/kernels" "$VIEW/baer_fast/kernels"
    export PYTHONPATH="$VIEW${PYTHONPATH:+:$PYTHONPATH}"
fi
# -P: the checkout's own baer_fast/ (which lacks kernels/) must not shadow the view.
"$PY" -P - > "$OUT/env.json" <<'EOF'
import json, platform, torch, triton, baer_fast.kernels.dispatch as d
print(json.dumps({"python": platform.python_version(), "torch": torch.__version__,
                  "triton": triton.__version__, "gpu": torch.cuda.get_device_name(0),
                  "has_triton_gpu": d.HAS_TRITON_GPU, "dispatch": d.__file__}))
EOF
cat "$OUT/env.json"

# 2. kernel tests, compiled
if "$PY" -c "import pytest" 2>/dev/null; then
    timeout 360 "$PY" -P -m pytest tests/kernels -q -m "slow or not slow" -p no:cacheprovider \
        --import-mode=importlib --junitxml="$OUT/kernel_tests.xml" 2>&1 | tee "$OUT/kernel_tests.log"
    TESTS_RC=${PIPESTATUS[0]}
else
    timeout 360 "$PY" -P - "$OUT/gpu_smoke.json" <<'EOF'
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
export BENCH_KERNELS_JSON="$OUT/bench_kernels_line.json"
if "$PY" -c "import pytest, pytest_benchmark" 2>/dev/null; then
    timeout 180 "$PY" -P -m pytest benchmarks/bench_kernels.py -q -s -p no:cacheprovider \
        --import-mode=importlib --benchmark-json="$OUT/bench_kernels.json" 2>&1 \
        | tee "$OUT/bench_kernels.log"
else
    timeout 180 "$PY" -P benchmarks/bench_kernels.py 2>&1 | tee "$OUT/bench_kernels.log"
fi
BENCH_RC=${PIPESTATUS[0]}

# 4. summary
"$PY" - "$OUT" "$TESTS_RC" "$BENCH_RC" <<'EOF'
import json, os, sys
out, tests_rc, bench_rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def read(name):
    path = os.path.join(out, name)
    return json.load(open(path)) if os.path.exists(path) else None
summary = {"env": read("env.json"), "kernel_tests_rc": tests_rc, "bench_rc": bench_rc,
           "bench": read("bench_kernels_line.json"), "smoke": read("gpu_smoke.json")}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(json.dumps(summary))
EOF
# ==== vLLM backend: hf engine vs vLLM on the same token ids (section owned by the vLLM backend) ====
# Installs nothing: runs only if this machine's python already has vllm; never changes the
# exit status. -> bench_backends.json (one JSON line), bench_backends.log.
if "$PY" -c "import vllm" 2>/dev/null; then
    timeout 480 "$PY" -P benchmarks/bench_backends.py --rounds 3 --json "$OUT/bench_backends.json" \
        > "$OUT/bench_backends.log" 2>&1 || echo "gpu_check: bench_backends failed (see its log)" >&2
    tail -n 8 "$OUT/bench_backends.log"
else
    echo "gpu_check: vllm is not installed here; bench_backends skipped" | tee "$OUT/bench_backends.log" >&2
fi
# ==== end vLLM backend ====

exit "$TESTS_RC"
