#!/usr/bin/env bash
# gpu_train_match — 5 training steps of lenet5 and of resnet8 (fused, the default DNN_FUSE=1) on
# one CUDA worker alone (STARPU_NCPU=0 STARPU_NCUDA=1: every task on the GPU, the data source's
# load tasks too) against CPU workers alone (STARPU_NCUDA=0), same seed, same synthetic data,
# same chunks, DNN_CUDA_MATH=fp32. Checks:
#   - both runs succeed and print ncuda=1 / ncuda=0;
#   - per-step losses (metrics CSV) finite and within 1e-3 relative;
#   - every tensor of the final checkpoints (weights, momentum buffers, batch-norm running
#     statistics) within 1e-3 in relative norm ||gpu - cpu|| / ||cpu||.
# Why 1e-3 for the parameters: on the CPU alone, changing the worker count (reduction order) or
# the convolution algorithm (im2col vs Winograd, a different FP32 summation) moves the worst
# tensor by 2e-7 (lenet5) to 1.7e-6 (resnet8) after 5 steps (measured here); cuDNN's FP32
# algorithms differ from the CPU's by more per op (up to ~1e-5), so 1e-3 leaves two orders of
# magnitude for 5 steps of amplification, while a wrong kernel (a missed mask, an overwrite
# instead of an accumulation, a wrong scale) moves some tensor by 1e-2 or more.
# Skipped (77) only when the gpu_workers helper reports no CUDA worker. Needs CUDA loaders
# (load_batch on a CUDA worker) for the CUDA-only run.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpulib.sh"
gpu_require_cuda
GPU_CFG=(STARPU_NCPU=0 STARPU_NCUDA=1)
CPU_CFG=(STARPU_NCUDA=0)
WANT_NCUDA=1
if [ "$GPU_FAKE" = 1 ]; then # a different FP32 path on the CPU stands in for the GPU
  GPU_CFG=(STARPU_NCUDA=0 STARPU_NCPU=1 DNN_CONV_ALGO=im2col)
  WANT_NCUDA=0
fi
for net in lenet5 resnet8; do
  G="$(train_run "$net-gpu" $net "${GPU_CFG[@]}")" || { cat "$TMP/$net-gpu.err" >&2; fail "$net: CUDA-only run failed"; continue; }
  C="$(train_run "$net-cpu" $net "${CPU_CFG[@]}")" || { cat "$TMP/$net-cpu.err" >&2; fail "$net: CPU-only run failed"; continue; }
  echo "$net cuda-only: $G"
  echo "$net cpu-only:  $C"
  [ "$(result_field "$G" ncuda)" = "$WANT_NCUDA" ] || fail "$net: the CUDA-only run reports ncuda=$(result_field "$G" ncuda)"
  [ "$(result_field "$C" ncuda)" = 0 ] || fail "$net: the CPU-only run reports ncuda=$(result_field "$C" ncuda)"
  [ "$(result_field "$G" fuse)" = 1 ] || fail "$net: fuse=$(result_field "$G" fuse), want the default 1"
  losses_match "$net-cpu" "$net-gpu" 1e-3
  params_match "$net-cpu" "$net-gpu" 1e-3
done
finish
