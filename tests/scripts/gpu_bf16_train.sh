#!/usr/bin/env bash
# gpu_bf16_train — --precision bf16 on the GPU alone: 5 training steps of resnet8 on one CUDA
# worker (STARPU_NCPU=0 STARPU_NCUDA=1), with the CPU's AVX512_BF16 hidden (DNN_CPU_MASK=avx512_bf16:
# a run without CPU workers needs none, apps/starpu_anp.c check_precision and
# runtime/dnn_runtime.c dnn_runtime_check_bf16). Checks:
#   - the bf16 run succeeds, says precision=bf16 and ncuda=1, and its per-step losses are finite;
#   - bf16 really ran: its losses differ from the fp32 run's of the same seed and data (the same
#     command with --precision fp32), in at least one step;
#   - and by no more than bf16 does on the CPU: max over the 5 steps of |loss_bf16 - loss_fp32| <= B,
#     B = 2.0e-3. Derived from the same runs on the CPU (AMD EPYC Zen 5, 2 CPU workers, DNN_CONV_ALGO
#     auto; the command below, seeds 1..8): the per-seed maxima of that gap were 3.1e-4, 6.8e-4,
#     1.5e-4, 4.2e-4, 3.1e-4, 3.0e-4, 2.7e-4, 5.0e-4 (mean of all 40 steps 1.7e-4, largest 6.8e-4).
#     The GPU's bf16 conv rounds its result to bf16 once more than the CPU's (cuDNN writes y in x's
#     type: 3 roundings of u = 2^-8 against 2, tests/gpu_conv2d_bf16.c), so 1.5 x 6.8e-4, and a
#     factor 2 for the seed-to-seed spread of the gap (the largest is 2.2x the median seed's):
#     B = 2 x 1.5 x 6.8e-4 = 2.0e-3. Negative control, that B separates a wrong model: the fp32
#     run with --seed 2 (another initialisation) must differ from seed 1's by more than B (on the
#     CPU seeds 2..8 differ from seed 1 by 0.023 to 0.122, 11x B and more). The CPU measurement:
#       for s in 1 2 3 4 5 6 7 8; do for p in fp32 bf16; do starpu_anp train --net resnet8 \
#         --data synthetic --batch 64 --chunks 4 --seed $s --max-steps 5 --no-eval --precision $p \
#         --metrics $s.$p.csv --quiet; done; done     (STARPU_NCPU=2; the train_step rows' loss)
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
run() { # TAG PRECISION [SEED]
  env "${GPU[@]}" DNN_CUDA_MATH=fp32 timeout "${GPU_RUN_TIMEOUT:-120}" "$STARPU_ANP" train --net resnet8 \
    --data synthetic --batch 64 --chunks 4 --seed "${3:-1}" --max-steps 5 --no-eval --precision "$2" \
    --metrics "$TMP/$1.csv" --quiet 2>"$TMP/$1.err" | tail -1
}
# max over the steps of |a - b|, two runs' losses (one a line)
max_gap() { paste <(printf '%s\n' "$1") <(printf '%s\n' "$2") | awk '{ d = $1 - $2; d = d < 0 ? -d : d; if (d > m) m = d } END { printf "%.6g\n", m }'; }
B=2.0e-3 # the bound above, derived from the CPU's bf16-fp32 loss gaps
B1="$(run bf16a bf16)" || { cat "$TMP/bf16a.err" >&2; fail "bf16 GPU-only run failed"; finish; }
[ "$(result_field "$B1" precision)" = bf16 ] || fail "the result line does not say precision=bf16: $B1"
[ "$(result_field "$B1" ncuda)" = 1 ] || fail "the result line does not say ncuda=1: $B1"
L16="$(losses "$TMP/bf16a.csv")"
[ "$(printf '%s\n' "$L16" | grep -c .)" = 5 ] || fail "not 5 per-step losses in $TMP/bf16a.csv: $L16"
for l in $L16; do [[ "$l" =~ ^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$ ]] || fail "bf16 loss not finite: $l"; done
F="$(run fp32 fp32)" || { cat "$TMP/fp32.err" >&2; fail "fp32 GPU-only run failed"; }
L32="$(losses "$TMP/fp32.csv")"
[ "$L32" != "$L16" ] || fail "bf16 and fp32 gave the same losses: bf16 did not run"
GAP="$(max_gap "$L16" "$L32")"
echo "max |loss bf16 - loss fp32| over 5 steps: $GAP (bound $B)"
fcmp "$GAP <= $B" || fail "bf16 and fp32 losses differ by $GAP, beyond the CPU-derived bound $B"
run fp32s2 fp32 2 >/dev/null || { cat "$TMP/fp32s2.err" >&2; fail "fp32 GPU-only run with --seed 2 failed"; }
CTL="$(max_gap "$(losses "$TMP/fp32s2.csv")" "$L32")"
echo "negative control: max |loss seed 2 - loss seed 1| (fp32): $CTL"
fcmp "$CTL > $B" || fail "negative control: another seed's losses are within $B of seed 1's, so the bound tests nothing"
run bf16b bf16 >/dev/null || fail "second bf16 run failed"
[ "$(losses "$TMP/bf16b.csv")" = "$L16" ] || fail "the same bf16 command twice gave other losses"
echo "losses bf16: $(echo $L16) / fp32: $(losses "$TMP/fp32.csv" | paste -sd ' ')"
if expect_rc 2 env STARPU_NCPU=1 STARPU_NCUDA=1 DNN_CPU_MASK=avx512_bf16 "$STARPU_ANP" bench --net lenet5 --batch 8 \
     --steps 1 --warmup 0 --precision bf16 --quiet; then
  [[ "$ERR" == *"--precision bf16: this CPU has no AVX512_BF16 (cpuid) and the run has 1 CPU worker"* ]] ||
    fail "a CPU worker beside the GPU: $ERR"
fi
finish
