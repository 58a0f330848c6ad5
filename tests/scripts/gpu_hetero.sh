#!/usr/bin/env bash
# gpu_hetero — 5 training steps of resnet8 under STARPU_SCHED=dmda with every CPU worker StarPU
# starts and one CUDA worker (STARPU_NCUDA=1, STARPU_NCPU unset), DNN_CUDA_MATH=fp32, against the
# CPU-only run (STARPU_NCUDA=0) with the same seed, data and chunks:
#   - per-step losses finite and within 1e-3 relative of the CPU-only ones;
#   - both kinds of worker executed tasks: StarPU's per-worker counts at shutdown
#     (STARPU_WORKER_STATS=1, written to STARPU_WORKER_STATS_FILE: a "CPU k" or "CUDA d.s (...)"
#     line, then "<n> task(s)"), summed per kind, are both > 0; the CUDA count must also exceed
#     the step count (a GPU that ran only a stray task or two does not count as sharing the work).
# Skipped (77) only when the gpu_workers helper reports no CUDA worker.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpulib.sh"
gpu_require_cuda
HET_CFG=(STARPU_SCHED=dmda STARPU_NCUDA=1)
[ "$GPU_FAKE" = 1 ] && HET_CFG=(STARPU_SCHED=dmda STARPU_NCUDA=0)
H="$(train_run het resnet8 "${HET_CFG[@]}" STARPU_WORKER_STATS=1 STARPU_WORKER_STATS_FILE="$TMP/stats.txt")" ||
  { cat "$TMP/het.err" >&2; fail "heterogeneous run failed"; }
C="$(train_run cpu resnet8 STARPU_NCUDA=0)" || { cat "$TMP/cpu.err" >&2; fail "CPU-only run failed"; }
echo "dmda cpu+cuda: $H"
echo "cpu only:      $C"
[ "$FAILS" = 0 ] || finish
losses_match cpu het 1e-3
[ -s "$TMP/stats.txt" ] || fail "no worker stats in STARPU_WORKER_STATS_FILE"
counts="$(awk '/^CUDA/ { k = "cuda" } /^CPU/ { k = "cpu" } /task\(s\)/ && k != "" { n[k] += $1; k = "" }
  END { printf "cpu=%d cuda=%d", n["cpu"], n["cuda"] }' "$TMP/stats.txt")"
echo "tasks executed per kind: $counts"
ncpu_tasks="${counts#cpu=}"; ncpu_tasks="${ncpu_tasks%% *}"; ncuda_tasks="${counts##*cuda=}"
[ "$ncpu_tasks" -gt 0 ] || fail "no task ran on a CPU worker ($counts)"
if [ "$GPU_FAKE" = 1 ]; then
  echo "(no CUDA worker in this stand-in run: the CUDA count is not checked)"
else
  [ "$(result_field "$H" ncuda)" = 1 ] || fail "the heterogeneous run reports ncuda=$(result_field "$H" ncuda)"
  [ "$ncuda_tasks" -gt "$GPU_STEPS" ] || fail "the CUDA worker executed $ncuda_tasks task(s) ($counts)"
fi
finish
