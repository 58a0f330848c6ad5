#!/bin/bash
# What the bandwidth sharing does where tasks stream from memory: cifar10_quick, 16 chunks of 64
# samples (conv1's output alone is 8.4 MB, beyond a Xeon core's 3.1 MB share of its L3), on the
# simulated E5-2667 v2 node with its sockets' bandwidth shared (43.6 GB/s per socket) and without
# (the same node with 1000 GB/s per socket: the cores' own 8.7 GB/s only), 16 cores and 1.
# Usage: run_share.sh [NET BATCH] (default cifar10_quick 1024: 16 chunks of 64)
set -euo pipefail
NET="${1:-cifar10_quick}" BATCH="${2:-1024}"
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
D="$ROOT/docs/studies/2026-12-07-seed-reproduction"
export DNN_CONV_ALGO=im2col OPENBLAS_CORETYPE=Haswell
export ANP_SIM_CALIB_DIR="${ANP_SIM_CALIB_DIR:-$HOME/.cache/starpu-anp/sim/calib-caffe-seed}"
nice -n -15 timeout 1200 "$ROOT/scripts/simulate.sh" --no-build --quiet --net "$NET" --batch "$BATCH" --chunks 16 \
  --cores 16 --cpu e5-2667v2 --calibrate-only
for cores in 16 1; do
  out="$(nice -n 10 timeout 1200 "$ROOT/scripts/simulate.sh" --no-build --quiet --net "$NET" --batch "$BATCH" \
    --chunks 16 --cores "$cores" --ncpu "$cores" --cpu e5-2667v2 --steps 10 --warmup 2 --csv "$D/share-e5-$NET.csv" -- --pin-chunks)"
  echo "$out"
  # the same command (simulate.sh prints it) with the sockets' bandwidth unshared
  cmd="$(grep '^+ ' <<<"$out" | head -1 | sed 's/^+ //; s/ANP_SIM_CPU=e5-2667v2:52.8:8.7:43.6:8:25/ANP_SIM_CPU=e5-2667v2-unshared:52.8:8.7:1000:8:25/')"
  echo "+ $cmd"
  eval "nice -n 10 timeout 1200 $cmd" 2>/dev/null | grep '^result:'
done
