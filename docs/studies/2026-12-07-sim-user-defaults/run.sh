#!/bin/bash
# sim_sanity section 1 with fresh calibrations: the per-node ratio and the critical paths
cd /work/wt/simdefaults
for i in "$@"; do
  export ANP_SIM_CALIB_DIR=/tmp/sd-c/cal$i
  rm -rf $ANP_SIM_CALIB_DIR
  o=$(DNN_BREAKDOWN=2 bash scripts/simulate.sh --no-build --quiet --csv /tmp/sd-c/s$i.csv --net lenet5 --batch 64 --chunks 2 --nodes 1 --cores 1 --ncpu 1 --network infinite --steps 20 2>&1)
  t=$(DNN_BREAKDOWN=2 bash scripts/simulate.sh --no-build --quiet --csv /tmp/sd-c/s$i.csv --net lenet5 --batch 128 --chunks 2 --nodes 2 --cores 1 --ncpu 1 --network infinite --allreduce tree --bucket-mb 0 --steps 20 2>&1)
  echo "$o" > /tmp/sd-c/one$i.txt; echo "$t" > /tmp/sd-c/two$i.txt
  a=$(grep -o 'images_per_s=[0-9.]*' /tmp/sd-c/one$i.txt | cut -d= -f2); b=$(grep -o 'images_per_s=[0-9.]*' /tmp/sd-c/two$i.txt | cut -d= -f2)
  echo "run $i: one $a two $b ratio $(awk -v a=$a -v b=$b 'BEGIN{print b/2/a}') load $(cut -d' ' -f1 /proc/loadavg)"
done
