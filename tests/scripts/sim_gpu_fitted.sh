#!/usr/bin/env bash
# sim_gpu_fitted — the simulated GPUs fitted to published throughput stay honest
# (docs/studies/2026-12-07-gpu-models.md; sim/platform.py FITTED, sim/fit_gpu.py).
# ResNet-50 on one simulated GPU-only node of one GPU (--ncpu 0: nothing is calibrated), the
# published batch in one chunk (ANP_SIM_GPU_MEMSIZE_GB: this tool's activations of that batch
# exceed the card; the fit times the batch, as sim/fit_gpu.py does):
#  1. V100 (fp32, the default precision), batch 112: models_cuda=fitted-public, and images/s within
#     10% of NVIDIA DeepLearningExamples' 367 (PyTorch, DGX-1 16GB, 1 GPU, FP32; the V100's fit figure).
#  2. H200 (--gpu-precision tf32), batch 1280: within 10% of Lambda's 2259 (PyTorch 24.10, 1 GPU,
#     TF32), a figure the fit never saw (the H200 takes the H100's fitted efficiency); the platform
#     name and the CSV row say tf32.
#  3. sim/platform.py --gpu-models estimated: the assumed efficiencies, labelled estimated.
#  4. a precision the GPU has no units for (v100, bf16) is refused: exit 2, one line.
# (3 and 4 ask sim/platform.py itself, which simulate.sh runs and whose refusal it passes on with
# exit 2: two simulations keep the test near a minute on a loaded 2-core machine.)
# Skipped (77) only where SimGrid is absent.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT="${DNN_SOURCE_DIR:?}"
command -v smpicc >/dev/null && [ -f /usr/include/smpi/smpi.h ] || { echo "SKIP: SimGrid (smpicc) is absent"; exit 77; }
export ANP_REAL_BUILD="$(cd "$(dirname "$STARPU_ANP")/.." && pwd)"
export ANP_SIM_CALIB_DIR="$TMP/calib" ANP_SIM_GPU_MEMSIZE_GB=100000
sim() { # GPU BATCH [simulate.sh options...]: the result line on stdout
  local gpu="$1" batch="$2"; shift 2
  bash "$ROOT/scripts/simulate.sh" --quiet --csv "$TMP/s.csv" --net resnet50 --batch "$batch" --chunks 1 \
    --cores 4 --ncpu 0 --gpus 1 --gpu "$gpu" --steps 2 --warmup 1 --platform-dir "$TMP/p" "$@" 2>"$TMP/err" |
    grep '^result:' || { cat "$TMP/err" >&2; return 1; }
}
within() { # WHAT SIMULATED PUBLISHED: within 10%
  echo "$1: simulated $2 images/s, published $3"
  fcmp "$2 >= 0.9 * $3 && $2 <= 1.1 * $3" || fail "$1: simulated $2 images/s, not within 10% of the published $3"
}
# 1.
L="$(sim v100 112)" || fail "v100 run failed"
[ "$(result_field "$L" models_cuda)" = fitted-public ] || fail "v100: no models_cuda=fitted-public in: $L"
V="$(result_field "$L" images_per_s)"
within "V100 FP32 batch 112 (fit figure)" "$V" 367
# 2.
L="$(sim h200 1280 --gpu-precision tf32)" || fail "h200 tf32 run failed"
[ "$(result_field "$L" models_cuda)" = fitted-public ] || fail "h200 tf32: no models_cuda=fitted-public in: $L"
[[ "$(result_field "$L" platform)" == *-tf32-* ]] || fail "h200 tf32: the platform name does not say tf32: $L"
within "H200 TF32 batch 1280 (held out)" "$(result_field "$L" images_per_s)" 2259
# by the header's name: columns are appended (grad_precision came after gpu_precision)
[ "$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "gpu_precision") c = i } END { print $c }' "$TMP/s.csv")" = tf32 ] \
  || fail "the CSV row's gpu_precision is not tf32"
# 3.
P=(python3 "$ROOT/sim/platform.py" --out "$TMP/pp" --cores 4 --gpus 1 --gpu v100)
"${P[@]}" >/dev/null || fail "platform.py v100 failed"
[ "$(cat "$TMP/pp/models_cuda")" = fitted-public ] || fail "platform.py v100: models_cuda is not fitted-public"
"${P[@]}" --gpu-models estimated >/dev/null || fail "platform.py v100 --gpu-models estimated failed"
[ "$(cat "$TMP/pp/models_cuda")" = estimated ] || fail "--gpu-models estimated: models_cuda is not estimated"
[ "$(cut -d: -f4 "$TMP/pp/gpu.spec")" = 0.5 ] || fail "--gpu-models estimated: eff_compute is not 0.5: $(cat "$TMP/pp/gpu.spec")"
# 4.
rc=0
"${P[@]}" --gpu-precision bf16 >/dev/null 2>"$TMP/err" || rc=$?
[ "$rc" = 2 ] || fail "v100 bf16 exited $rc, want 2"
[ "$(wc -l <"$TMP/err")" = 1 ] && grep -q 'v100 has no such units' "$TMP/err" ||
  fail "v100 bf16: not one line with the reason: $(cat "$TMP/err")"
finish
