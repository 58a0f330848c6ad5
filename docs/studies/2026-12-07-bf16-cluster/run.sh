#!/usr/bin/env bash
# run.sh — the simulations of docs/studies/2026-12-07-bf16-cluster.md: ResNet-50, 1 and 16 nodes of 4 H200 over EDR,
# GPU-only (--ncpu 0), simulate.sh's defaults (auto: rhd, 1 MiB buckets), --gpu-precision fp32|bf16 x
# --grad-precision fp32|bf16; then the ANP K80 cluster (16 x 4 K80 dies over FDR) with fp32 math, fp32|bf16
# gradients, as the ANP table of docs/studies/2026-12-07-published-clusters.md (128 per node in 8 chunks: 256 in 4 do
# not fit a K80 die's 12 GB; the synchronous parameter server). One simulation at a time (16 simulated ResNet-50 ranks in one process). Rows go to the CSVs beside
# this script. Usage: run.sh [h200|k80]... (both by default), from the repository root.
set -euo pipefail
D=docs/studies/2026-12-07-bf16-cluster
for what in "${@:-h200 k80}"; do for w in $what; do
  case "$w" in
  h200)
    for gp in fp32 bf16; do for wire in fp32 bf16; do
      ANP_SIM_CPU_VEC_GBS=10 nice -n 10 timeout 1800 scripts/simulate.sh --net resnet50 --batch-per-node 256 --chunks 4 \
        --nodes 1,16 --cores 32 --gpus 4 --gpu h200 --ncpu 0 --network edr --steps 3 --warmup 1 --calib-steps 5 \
        --gpu-precision "$gp" --grad-precision "$wire" --quiet --csv "$D/h200-edr.csv" -- --pin-chunks
    done; done ;;
  k80)
    for wire in fp32 bf16; do
      ANP_SIM_CPU_VEC_GBS=10 nice -n 10 timeout 1800 scripts/simulate.sh --net resnet50 --batch-per-node 128 --chunks 8 \
        --nodes 1,16 --cores 16 --gpus 4 --gpu k80 --ncpu 0 --network fdr --mode sync --allreduce ps --steps 3 \
        --warmup 1 --grad-precision "$wire" --quiet --csv "$D/k80-fdr-ps.csv" -- --pin-chunks --bucket-mb 0
    done ;;
  *) echo "run.sh: '$w': expected h200 or k80" >&2; exit 2 ;;
  esac
done; done
