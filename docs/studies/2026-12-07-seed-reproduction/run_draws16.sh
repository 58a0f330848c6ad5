#!/bin/bash
# The 16-core prediction on each calibration draw alone (calib_draws.sh's d1, d2, d3): 16 cores and
# 1 core with the same 16 chunks, both nets, for the spread the calibration leaves.
set -euo pipefail
D="$(cd "$(dirname "$0")" && pwd)"
for d in d1 d2 d3; do
  export TAG="$d" ANP_SIM_CALIB_DIR="$HOME/.cache/starpu-anp/sim/calib-caffe-seed-$d"
  "$D/run.sh" caffe_lenet 64 16
  "$D/run_one_core.sh" caffe_lenet 64 16
  "$D/run.sh" cifar10_quick 96 16
  "$D/run_one_core.sh" cifar10_quick 96 16
done
