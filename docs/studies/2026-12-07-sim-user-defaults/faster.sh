#!/bin/bash
# cal1 with every one-process CPU mean multiplied by F (F < 1: a faster machine); 1 and 2 nodes
cd /work/wt/simdefaults
F=$1; d=/tmp/sd-c/cal1f$F; rm -rf $d; cp -a /tmp/sd-c/cal1 $d
for f in $d/.starpu/sampling/codelets/45/*.vm; do
  awk -v F=$F 'BEGIN{OFS="\t"} /^[0-9a-f]+\t/ && NF>=8 { $4 = sprintf("%e", $4*F); $6 = sprintf("%e", $6*F); $7 = sprintf("%e", $7*F*F) } {print}' $f > $f.new && mv $f.new $f
done
export ANP_SIM_CALIB_DIR=$d
o=$(bash scripts/simulate.sh --no-build --quiet --csv /tmp/sd-c/f.csv --net lenet5 --batch 64 --chunks 2 --nodes 1 --cores 1 --ncpu 1 --network infinite --steps 20 2>&1)
t=$(bash scripts/simulate.sh --no-build --quiet --csv /tmp/sd-c/f.csv --net lenet5 --batch 128 --chunks 2 --nodes 2 --cores 1 --ncpu 1 --network infinite --allreduce tree --bucket-mb 0 --steps 20 2>&1)
a=$(echo "$o" | grep -o 'images_per_s=[0-9.]*' | cut -d= -f2); b=$(echo "$t" | grep -o 'images_per_s=[0-9.]*' | cut -d= -f2)
echo "compute x$F: one $a two $b ratio $(awk -v a=$a -v b=$b 'BEGIN{print b/2/a}')"
