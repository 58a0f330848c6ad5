#!/bin/bash
# As run_draws16.sh (LeNet only), with the vector codelets (the chunks' gradient sums) timed from
# the Xeon's one-core stream rate instead of their calibrated history: ANP_SIM_CPU_VEC_GBS=8.7
# (codelets/dnn_sim_model.c, cpu_vec_us: 1 us + bytes moved / rate; docs/SIMULATION.md).
set -euo pipefail
D="$(cd "$(dirname "$0")" && pwd)"
export ANP_SIM_CPU_VEC_GBS=8.7
for d in min d1 d2 d3; do
  export TAG="$d-vec" ANP_SIM_CALIB_DIR="$HOME/.cache/starpu-anp/sim/calib-caffe-seed-$d"
  "$D/run.sh" caffe_lenet 64 16
  "$D/run_one_core.sh" caffe_lenet 64 16
done
