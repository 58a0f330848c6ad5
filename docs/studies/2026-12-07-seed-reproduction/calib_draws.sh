#!/bin/bash
# Three calibration draws of every shape of the seed study (caffe_lenet batch 64, cifar10_quick
# batch 96; chunks of batch/C samples, C = 1..16; at nice -15), merged by the smallest mean per
# shape (merge_min.py) into $CACHE/sim/calib-caffe-seed-min.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
D="$ROOT/docs/studies/2026-12-07-seed-reproduction"
C="$HOME/.cache/starpu-anp/sim"
export DNN_CONV_ALGO=im2col OPENBLAS_CORETYPE=Haswell
for draw in 1 2 3; do
  for nb in caffe_lenet:64 cifar10_quick:96; do
    for c in 1 2 4 8 16; do
      echo "# draw $draw ${nb%%:*} chunks of $(( ${nb##*:} / c )): $(date -u +%T), $(uptime | sed 's/.*load average/load average/')"
      ANP_SIM_CALIB_DIR="$C/calib-caffe-seed-d$draw" nice -n -15 timeout 1200 "$ROOT/scripts/simulate.sh" --no-build \
        --quiet --net "${nb%%:*}" --batch "${nb##*:}" --chunks "$c" --cores "$c" --cpu e5-2667v2 --calibrate-only
    done
  done
done
python3 "$D/merge_min.py" "$C/calib-caffe-seed-min" "$C/calib-caffe-seed-d1" "$C/calib-caffe-seed-d2" "$C/calib-caffe-seed-d3"
