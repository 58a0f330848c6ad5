#!/bin/bash
# The study's final runs: run.sh and run_one_core.sh on the merged calibration (calib_draws.sh:
# the smallest of 3 draws' means per shape), with the time breakdown (DNN_BREAKDOWN=1, bd_* columns).
set -euo pipefail
D="$(cd "$(dirname "$0")" && pwd)"
export TAG=min DNN_BREAKDOWN=1 ANP_SIM_CALIB_DIR="$HOME/.cache/starpu-anp/sim/calib-caffe-seed-min"
"$D/run.sh" caffe_lenet 64 1 2 4 8 16
"$D/run_one_core.sh" caffe_lenet 64 2 4 8 16
"$D/run.sh" cifar10_quick 96 1 2 4 8 16
"$D/run_one_core.sh" cifar10_quick 96 2 4 8 16
