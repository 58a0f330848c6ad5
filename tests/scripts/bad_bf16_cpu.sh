#!/usr/bin/env bash
# bad_bf16_cpu — --precision bf16 on a CPU without AVX512_BF16 is refused: exit 2 and one line for
# train, eval and bench, tested on any CPU through the test hook DNN_CPU_MASK=avx512_bf16
# (runtime/knobs.c: dnn_cpu_has_bf16 then says 0). Checks:
#   1. train, eval, bench --precision bf16 under the mask: exit 2, one line naming --precision
#      bf16 and AVX512_BF16 (a build with CUDA says it after StarPU started, and offers
#      STARPU_NCPU=0 where CUDA workers exist; one without, before);
#   2. negative control: the same commands without the mask run (exit 0) on a CPU that has
#      AVX512_BF16 (so 1 fails for the mask, not for the command), and fp32 under the mask runs;
#   3. the GPUs alone: under the mask with STARPU_NCPU=0 a build with CUDA does not refuse for the
#      CPU (no CPU worker computes); there without a GPU StarPU has no worker (exit 1, not the
#      bf16 line), with one it trains (exit 0, or 2 naming a GPU older than compute capability
#      8.0); a build without CUDA refuses (exit 2, the same line as 1);
#   4. a bad DNN_CPU_MASK value: exit 2 naming the variable and avx512_bf16.
source "$(dirname "$0")/lib.sh"
set -euo pipefail
A="$STARPU_ANP"
export STARPU_NCPU=1
BENCH=(bench --net lenet5 --batch 8 --steps 1 --warmup 0 --quiet)
TRAIN=(train --net lenet5 --data synthetic --batch 8 --max-steps 1 --quiet)
EVAL=(eval --data synthetic --batch 8 --val-batches 1 --checkpoint "$TMP/l5.ckpt" --quiet)
# A build with CUDA links cuDNN (CMakeLists.txt: DNN_HAVE_CUDA); its refusal waits for the workers.
CUDA_BUILD=0
# (not `ldd | grep -q` under pipefail: grep exits at the first match, ldd may then die of SIGPIPE and the
# pipeline's status would say "no CUDA")
case "$(ldd "$A" 2>/dev/null)" in *libcudnn*) CUDA_BUILD=1 ;; esac
HAS_BF16=0
grep -qw avx512_bf16 /proc/cpuinfo && HAS_BF16=1
echo "build with CUDA: $CUDA_BUILD; CPU with AVX512_BF16: $HAS_BF16"

"$A" "${TRAIN[@]}" --checkpoint "$TMP/l5.ckpt" >/dev/null 2>"$TMP/ckpt.err" ||
  { fail "making the eval checkpoint: $(tail -2 "$TMP/ckpt.err")"; finish; }

# 1 and 2
for name in train eval bench; do
  case "$name" in train) CMD=("${TRAIN[@]}") ;; eval) CMD=("${EVAL[@]}") ;; bench) CMD=("${BENCH[@]}") ;; esac
  if expect_rc 2 env DNN_CPU_MASK=avx512_bf16 "$A" "${CMD[@]}" --precision bf16; then
    [[ "$ERR" == *"--precision bf16: this CPU has no AVX512_BF16 (cpuid)"*"use --precision fp32"* ]] ||
      fail "$name under the mask: the line does not say why: $ERR"
    [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] || fail "$name under the mask: not one line: $ERR"
  fi
  expect_rc 0 env DNN_CPU_MASK=avx512_bf16 "$A" "${CMD[@]}" --precision fp32 || true
  if [ "$HAS_BF16" = 1 ]; then
    expect_rc 0 "$A" "${CMD[@]}" --precision bf16 || fail "negative control: $name --precision bf16 without the mask"
  fi
done

# 3: the GPUs alone
if [ "$CUDA_BUILD" = 1 ]; then
  RC=0
  ERR="$(STARPU_NCPU=0 DNN_CPU_MASK=avx512_bf16 timeout 120 "$A" "${BENCH[@]}" --precision bf16 2>&1 >/dev/null)" || RC=$?
  [[ "$ERR" != *"this CPU has no AVX512_BF16"* ]] || fail "STARPU_NCPU=0: refused for the CPU, which runs nothing: $ERR"
  case "$RC" in
    0) echo "STARPU_NCPU=0: bf16 ran on the CUDA workers" ;;
    1) [[ "$ERR" == *"error:"* ]] || fail "STARPU_NCPU=0, no GPU: exit 1 without an error line: $ERR" ;;
    2) [[ "$ERR" == *"--precision bf16: CUDA worker"*"compute capability"* ]] ||
         fail "STARPU_NCPU=0: exit 2 with another line: $ERR" ;;
    *) fail "STARPU_NCPU=0: exit $RC: $ERR" ;;
  esac
else
  expect_rc 2 env STARPU_NCPU=0 DNN_CPU_MASK=avx512_bf16 "$A" "${BENCH[@]}" --precision bf16 &&
    { [[ "$ERR" == *"--precision bf16: this CPU has no AVX512_BF16"* ]] || fail "no CUDA, STARPU_NCPU=0: $ERR"; }
fi

# 4
if expect_rc 2 env DNN_CPU_MASK=avx2 "$A" "${BENCH[@]}"; then
  [[ "$ERR" == "error: DNN_CPU_MASK=avx2: expected avx512_bf16"* ]] || fail "DNN_CPU_MASK=avx2: $ERR"
fi
finish
