#!/bin/bash
# the passing calibration cal1 with the 2-rank vector codelets' means multiplied by F
cd /work/wt/simdefaults
F=$1; d=/tmp/sd-c/cal1x$F; rm -rf $d; cp -a /tmp/sd-c/cal1 $d
for f in $d/mpi/.starpu/sampling/codelets/45/dnn_cl_vec_{add,zero}.vm; do
  awk -v F=$F 'BEGIN{OFS="\t"} /^[0-9a-f]+\t/ && NF>=8 { $4 = sprintf("%e", $4*F); $6 = sprintf("%e", $6*F); $7 = sprintf("%e", $7*F*F) } {print}' $f > $f.new && mv $f.new $f
done
export ANP_SIM_CALIB_DIR=$d
t=$(DNN_BREAKDOWN=2 bash scripts/simulate.sh --no-build --quiet --csv /tmp/sd-c/x.csv --net lenet5 --batch 128 --chunks 2 --nodes 2 --cores 1 --ncpu 1 --network infinite --allreduce tree --bucket-mb 0 --steps 20 2>&1)
echo "$t" > /tmp/sd-c/twox$F.txt
b=$(grep -o 'images_per_s=[0-9.]*' /tmp/sd-c/twox$F.txt | cut -d= -f2)
echo "x$F: two $b ratio $(awk -v b=$b 'BEGIN{print b/2/10807.2}')"
