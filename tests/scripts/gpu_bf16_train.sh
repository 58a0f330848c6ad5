#!/usr/bin/env bash
# gpu_bf16_train — --precision bf16 on the GPU alone: 5 training steps of resnet8 on one CUDA
# worker (STARPU_NCPU=0 STARPU_NCUDA=1), with the CPU's AVX512_BF16 hidden (DNN_CPU_MASK=avx512_bf16:
# a run without CPU workers needs none, apps/starpu_anp.c check_precision and
# runtime/dnn_runtime.c dnn_runtime_check_bf16). Checks:
#   - the bf16 run succeeds, says precision=bf16 and ncuda=1, and its per-step losses are finite;
#   - bf16 really ran: its losses differ from the fp32 run's of the same seed and data (the same
#     command with --precision fp32), in at least one step;
#   - the same bf16 command twice gives the same losses (cuDNN's deterministic algorithms first);
#   - with a CPU worker too (STARPU_NCPU=1) the mask still refuses: exit 2, the one line.
# Skipped (77) only when the gpu_workers helper reports no CUDA worker.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpulib.sh"
gpu_require_cuda
[ "$GPU_FAKE" = 0 ] || { echo "SKIP: DNN_GPU_TEST_CPU_AS_CUDA: a CPU cannot stand in for a GPU-only bf16 run"; exit 77; }
GPU=(STARPU_NCPU=0 STARPU_NCUDA=1 DNN_CPU_MASK=avx512_bf16)
# the metrics' train_step losses (printed to 6 decimals)
losses() { awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "loss") c = i; next } c && $1 == "train_step" { print $c }' "$1"; }
run() { # TAG PRECISION
  env "${GPU[@]}" DNN_CUDA_MATH=fp32 timeout "${GPU_RUN_TIMEOUT:-120}" "$STARPU_ANP" train --net resnet8 \
    --data synthetic --batch 64 --chunks 4 --seed 1 --max-steps 5 --no-eval --precision "$2" \
    --metrics "$TMP/$1.csv" --quiet 2>"$TMP/$1.err" | tail -1
}
B1="$(run bf16a bf16)" || { cat "$TMP/bf16a.err" >&2; fail "bf16 GPU-only run failed"; finish; }
[ "$(result_field "$B1" precision)" = bf16 ] || fail "the result line does not say precision=bf16: $B1"
[ "$(result_field "$B1" ncuda)" = 1 ] || fail "the result line does not say ncuda=1: $B1"
L16="$(losses "$TMP/bf16a.csv")"
[ "$(printf '%s\n' "$L16" | grep -c .)" = 5 ] || fail "not 5 per-step losses in $TMP/bf16a.csv: $L16"
for l in $L16; do [[ "$l" =~ ^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$ ]] || fail "bf16 loss not finite: $l"; done
F="$(run fp32 fp32)" || { cat "$TMP/fp32.err" >&2; fail "fp32 GPU-only run failed"; }
[ "$(losses "$TMP/fp32.csv")" != "$L16" ] || fail "bf16 and fp32 gave the same losses: bf16 did not run"
run bf16b bf16 >/dev/null || fail "second bf16 run failed"
[ "$(losses "$TMP/bf16b.csv")" = "$L16" ] || fail "the same bf16 command twice gave other losses"
echo "losses bf16: $(echo $L16) / fp32: $(losses "$TMP/fp32.csv" | paste -sd ' ')"
if expect_rc 2 env STARPU_NCPU=1 STARPU_NCUDA=1 DNN_CPU_MASK=avx512_bf16 "$STARPU_ANP" bench --net lenet5 --batch 8 \
     --steps 1 --warmup 0 --precision bf16 --quiet; then
  [[ "$ERR" == *"--precision bf16: this CPU has no AVX512_BF16 (cpuid) and the run has 1 CPU worker"* ]] ||
    fail "a CPU worker beside the GPU: $ERR"
fi
finish
