#!/usr/bin/env bash
# sim_sanity — what a simulation must show whatever its models:
#  1. two simulated nodes doing the same per-node work (sync, tree all-reduce) give the same
#     per-node images/s as one node when the network is infinitely fast: never more, and, at 256
#     samples per node, at most 10% less. A free network does not make the all-reduce free: its
#     own tasks (StarPU-MPI's reduction into rank 0 for tree; 2(N-1) slice copies and sums per
#     parameter for ring) run on each node's one CPU worker, on the step's critical path: for
#     lenet5 a fixed ~0.24 ms a step whatever the batch (2026-12-07: +0.236 ms at 64 per node,
#     +0.24 ms at 256). At 64 per node that was 4% of a step in 2026-12-04's calibration (95.8%
#     per node) and is 10-12% of the 2-2.5 ms step a quiet Zen 5 calibrates (a clean-clone CI
#     measured 0.886): the 10% bound holds only where the step is long against it, so it is
#     asserted at 256 per node (a 16 ms step); 64 per node keeps "never more". Ring measured 89-92%, depending on
#     its slice tasks' calibration, which only a 2-rank run on this 2-core machine can give (an
#     oversubscribed one): not asserted here, docs/SIMULATION.md.
#  2. more GPUs never lose throughput under dmda on a compute-bound net: resnet20, batch 256 in
#     8 chunks, 1, 2 and 4 K80 dies (roofline models), GPU workers only, chunks free to move
#     (dmda places everything) and pinned (--pin-chunks). GPU workers only: with this VM's CPU
#     cores as workers too, dmda's choices hang on their noisy calibration (4 dies measured
#     5.5k-8.9k images/s across calibrations, once below 2 dies' 6.9k); the GPU models are
#     deterministic. Measured: 4.9k, 6.0k, 7.7k free; 5.0k, 8.6k, 11.6k pinned on the workers'
#     local queues (DNN_PIN_MODE=queue), 4.9k, 9.1k, 11.8k pinned by mask (the default). Since
#     the fixed-order sums became the default (2026-12-07; pinned in blocks): 4.4k, 6.9k, 8.4k
#     pinned, 12.1k at 4 dies with --deterministic off (docs/studies/2026-12-07-deterministic-cost.md).
#  3. GPU-only nodes (--ncpu 0: nothing to calibrate, models_cpu=none) of a net whose big
#     parameters live in SMPI shared memory in the simulation build (resnet18 at 32x32, 11.7 M
#     parameters): 2 nodes on an infinitely fast network give more images/s than 1, with the tree
#     and with the ring. Not per-node parity: the all-reduce stages every gradient and weight
#     through host memory over PCIe, which an infinite network does not make free (measured:
#     4178 img/s on 1 node, 5359 tree / 5091 ring on 2; pinned by mask, the default since
#     2026-12-05: 5244 on 1 node, 6484 tree / 6301 ring on 2).
#  4. the CPU calibration records the kernels it was taken with and is not reused with
#     others: after section 1, the calibration folder's kernels.txt names this machine's blas= and
#     cpu_isa=, the CSV's cpu_kernels column says the same; the folder with other kernels written
#     into it is refused (exit 1, one line), and so is a CSV of other columns (exit 2); an older
#     simulate.sh's CSV (today's first columns) gets today's columns, its rows kept.
#  5. with ANP_SIM_CPU_VEC_GBS (the vector codelets from a stream rate) a multi-rank run needs no
#     multi-rank calibration (the ring's slices are its only shapes): 3 nodes run without one.
#  6. the simulation runs without address-space randomisation (setarch -R on its command line,
#     none with ANP_SIM_ASLR=1): with it a 4-node H200 step varied by 6.8% between identical runs
#     (docs/SIMULATION.md, "Reproducible runs"). No small configuration found here varies (lenet5,
#     resnet8 with CPU workers, resnet8 on H200s with host sums: identical under randomisation), so
#     this checks the mechanism; the 4-node H200 case needs a ResNet-50 CPU calibration.
#  7. simulate.sh's defaults are the app's (2026-12-07): with no --allreduce, --bucket-mb or --ncpu,
#     2 CPU nodes run rhd (auto across nodes, a power of two) with buckets (auto: a quarter of
#     lenet5's gradients), StarPU's own CPU worker count (2 cores, less one for StarPU-MPI's
#     thread: 1), and the CSV row says so; its 2-rank calibration runs the same rhd and buckets (twice:
#     a bucket's zero runs once per run, and StarPU drops a shape's first sample); a node of 4 cores and 2 GPUs with pinned chunks gets
#     StarPU's 4 - 2 - 1 = 1 CPU worker beside its GPUs, calibrated on 1-sample chunks only; without
#     --cores, 2 K80 dies make a node of 8 cores (4 per die), 5 CPU workers.
#     Sections 1, 3 and 5 name the all-reduce and buckets they were measured with.
# Skipped (77) only where SimGrid is absent.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT="${DNN_SOURCE_DIR:?}"
command -v smpicc >/dev/null && [ -f /usr/include/smpi/smpi.h ] || { echo "SKIP: SimGrid (smpicc) is absent"; exit 77; }
export ANP_REAL_BUILD="$(cd "$(dirname "$STARPU_ANP")/.." && pwd)"
export ANP_SIM_CALIB_DIR="$TMP/calib"
sim() { bash "$ROOT/scripts/simulate.sh" --quiet --csv "$TMP/s.csv" "$@" 2>"$TMP/err" | grep '^result:' \
  || { cat "$TMP/err" >&2; fail "scripts/simulate.sh $* failed"; }; }
ips() { result_field "$1" images_per_s; }
# 1.
ONE="$(ips "$(sim --net lenet5 --batch 64 --chunks 2 --nodes 1 --cores 1 --ncpu 1 --network infinite --steps 20)")"
TWO="$(ips "$(sim --net lenet5 --batch 128 --chunks 2 --nodes 2 --cores 1 --ncpu 1 --network infinite --allreduce tree --bucket-mb 0 --steps 20)")"
ONE4="$(ips "$(sim --net lenet5 --batch 256 --chunks 2 --nodes 1 --cores 1 --ncpu 1 --network infinite --steps 20)")"
TWO4="$(ips "$(sim --net lenet5 --batch 512 --chunks 2 --nodes 2 --cores 1 --ncpu 1 --network infinite --allreduce tree --bucket-mb 0 --steps 20)")"
for c in "64 $ONE $TWO" "256 $ONE4 $TWO4"; do
  set -- $c
  echo "$1 per node: 1 node $2 img/s, 2 nodes (tree) $(awk -v t="$3" 'BEGIN{print t/2}') img/s per node," \
    "$(awk -v b="$1" -v o="$2" -v t="$3" 'BEGIN{printf "%.3f", 1000 * (2 * b / t - b / o)}') ms added per step"
done
fcmp "$ONE > 0 && $TWO / 2 <= 1.01 * $ONE" \
  || fail "2 nodes (tree, infinitely fast network, 64 per node) give $TWO img/s: more than 1.01 x $ONE per node"
fcmp "$ONE4 > 0 && $TWO4 / 2 >= 0.90 * $ONE4 && $TWO4 / 2 <= 1.01 * $ONE4" \
  || fail "2 nodes (tree, infinitely fast network, 256 per node) give $TWO4 img/s: per node not within [0.90, 1.01] x $ONE4"
# 4.
KLINE="$(STARPU_NCPU=1 "$STARPU_ANP" bench --net lenet5 --batch 2 --chunks 1 --steps 1 --warmup 1 --quiet | tail -1)"
BLAS="$(result_field "$KLINE" blas)"; ISA="$(result_field "$KLINE" cpu_isa)"
grep -q "^$BLAS/$ISA/conv=" "$ANP_SIM_CALIB_DIR/kernels.txt" \
  || fail "kernels.txt does not record blas=$BLAS cpu_isa=$ISA: $(cat "$ANP_SIM_CALIB_DIR/kernels.txt" 2>&1)"
[ "$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "cpu_kernels") c = i } NR == 2 { print $c }' "$TMP/s.csv")" \
  = "$(cut -d' ' -f1 "$ANP_SIM_CALIB_DIR/kernels.txt")" ] || fail "the CSV's cpu_kernels column is not the calibration's kernels"
cp "$ANP_SIM_CALIB_DIR/kernels.txt" "$TMP/kernels.good"
echo "openblas-0.3.21:prescott/avx512/conv=auto cpu=another CPU" >"$ANP_SIM_CALIB_DIR/kernels.txt"
rc=0; bash "$ROOT/scripts/simulate.sh" --quiet --no-build --csv "$TMP/s.csv" --net lenet5 --batch 64 --chunks 2 --cores 1 \
  --ncpu 1 --steps 2 >/dev/null 2>"$TMP/err2" || rc=$?
[ "$rc" = 1 ] && [ "$(grep -c . "$TMP/err2")" = 1 ] && grep -q 'taken with other kernels' "$TMP/err2" \
  || fail "a calibration of other kernels: want exit 1 and one line, got $rc: $(cat "$TMP/err2")"
cp "$TMP/kernels.good" "$ANP_SIM_CALIB_DIR/kernels.txt"
echo "platform,nodes,images_per_s" >"$TMP/old.csv"
rc=0; bash "$ROOT/scripts/simulate.sh" --quiet --no-build --csv "$TMP/old.csv" --net lenet5 --batch 64 --chunks 2 --cores 1 \
  --ncpu 1 --steps 2 >/dev/null 2>"$TMP/err2" || rc=$?
[ "$rc" = 2 ] && grep -q 'has other columns' "$TMP/err2" || fail "a CSV of other columns: want exit 2, got $rc: $(cat "$TMP/err2")"
[ "$(cat "$TMP/old.csv")" = "platform,nodes,images_per_s" ] || fail "the old CSV was changed"
# an older simulate.sh's CSV (today's first columns): upgraded in place, its row kept, padded
printf 'platform,nodes,cores\nold-row,1,2\n' >"$TMP/prefix.csv"
bash "$ROOT/scripts/simulate.sh" --quiet --no-build --csv "$TMP/prefix.csv" --net lenet5 --batch 64 --chunks 2 --cores 1 \
  --ncpu 1 --steps 2 >/dev/null 2>"$TMP/err3" || fail "a CSV of an older simulate.sh's first columns was refused: $(tail -1 "$TMP/err3")"
NCOL="$(head -1 "$TMP/s.csv" | tr , '\n' | wc -l)"
[ "$(head -1 "$TMP/prefix.csv")" = "$(head -1 "$TMP/s.csv")" ] && [ "$(wc -l <"$TMP/prefix.csv")" = 3 ] \
  && [ "$(sed -n 2p "$TMP/prefix.csv")" = "old-row,1,2$(printf ',%.0s' $(seq 4 "$NCOL"))" ] \
  && [ "$(sed -n 3p "$TMP/prefix.csv" | awk -F, '{ print NF }')" = "$NCOL" ] \
  || fail "the older CSV was not brought up to today's columns with its row kept: $(head -c 400 "$TMP/prefix.csv")"
# 2.
for pin in free pinned; do
  PREV=0 EXTRA=(); [ "$pin" = free ] || EXTRA=(-- --pin-chunks)
  for g in 1 2 4; do
    V="$(ips "$(sim --net resnet20 --batch 256 --chunks 8 --cores 8 --ncpu 0 --gpus $g --gpu k80 --steps 10 "${EXTRA[@]}")")"
    echo "resnet20, $g K80 die(s), chunks $pin: $V img/s"
    fcmp "${V:-0} >= $PREV" || fail "$g GPUs give $V img/s ($pin chunks), fewer than $PREV with fewer GPUs"
    PREV="${V:-0}"
  done
done
# 3.
R1="$(sim --net resnet18 --input 32 --batch 128 --chunks 4 --nodes 1 --cores 4 --ncpu 0 --gpus 2 --gpu k80 --network infinite --steps 10 -- --pin-chunks)"
[ "$(result_field "$R1" models_cpu)" = none ] || fail "a GPU-only run does not say models_cpu=none: $R1"
for ar in tree ring; do
  V="$(ips "$(sim --net resnet18 --input 32 --batch 256 --chunks 4 --nodes 2 --cores 4 --ncpu 0 --gpus 2 --gpu k80 --network infinite --allreduce $ar --bucket-mb 0 --steps 10 -- --pin-chunks)")"
  echo "resnet18@32, 2 K80 dies per node, GPU-only: 1 node $(ips "$R1") img/s, 2 nodes ($ar) $V img/s"
  fcmp "${V:-0} > $(ips "$R1")" || fail "2 GPU-only nodes ($ar, infinite network) give $V img/s, not more than 1 node's $(ips "$R1")"
done
# 5.
R5="$(ANP_SIM_CPU_VEC_GBS=10 sim --net lenet5 --batch 192 --chunks 2 --nodes 3 --cores 1 --ncpu 1 --allreduce ring --bucket-mb 0 --steps 5)"
echo "lenet5, 3 nodes, ring, ANP_SIM_CPU_VEC_GBS=10: $(ips "$R5") img/s"
[ "$(result_field "$R5" models_cpu)" = calibrated+vec10GBps ] || fail "ANP_SIM_CPU_VEC_GBS=10: models_cpu is not calibrated+vec10GBps: $R5"
! ls "$ANP_SIM_CALIB_DIR/stamps" | grep -q -- '-r3-' || fail "a 3-rank calibration ran with ANP_SIM_CPU_VEC_GBS set: $(ls "$ANP_SIM_CALIB_DIR/stamps")"
# 6.
plus() { bash "$ROOT/scripts/simulate.sh" --quiet --no-build --csv "$TMP/s.csv" --net lenet5 --batch 64 --chunks 2 --cores 1 \
  --ncpu 1 --steps 2 2>/dev/null | grep '^+ '; }
if setarch "$(uname -m)" -R true 2>/dev/null; then
  plus | grep -q "^+ setarch $(uname -m) -R env " || fail "the simulation does not run under setarch -R: $(plus)"
  ANP_SIM_ASLR=1 plus | grep -q '^+ env ' || fail "ANP_SIM_ASLR=1: the simulation still runs under setarch: $(ANP_SIM_ASLR=1 plus)"
else
  echo "setarch -R is refused here: the simulations keep address-space randomisation"
fi
# 7.
R7="$(sim --net lenet5 --batch 128 --chunks 2 --nodes 2 --cores 2 --steps 3)"
echo "lenet5, 2 nodes, simulate.sh's defaults: $R7"
[ "$(result_field "$R7" allreduce)" = rhd ] || fail "2 nodes with the default --allreduce (auto) do not run rhd: $R7"
fcmp "$(result_field "$R7" bucket_mb) > 0 && $(result_field "$R7" bucket_mb) < 1" \
  || fail "2 nodes with the default --bucket-mb (auto) do not take a quarter of lenet5's gradients: $R7"
[ "$(result_field "$R7" ncpu)" = 1 ] || fail "2 cores, STARPU_NCPU unset: StarPU gives 1 CPU worker (one core for StarPU-MPI), not: $R7"
[ "$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "allreduce") c = i } END { print $c }' "$TMP/s.csv")" = rhd ] \
  || fail "the CSV row does not say the all-reduce that ran (rhd): $(tail -1 "$TMP/s.csv")"
# the 2-rank calibration ran what the simulation runs (rhd, buckets), not the one-node tree
ls "$ANP_SIM_CALIB_DIR/stamps" | grep -q '^lenet5-idef-c1-r2-sync-auto-bauto$' \
  && grep -q 'allreduce=rhd bucket_mb=0\.' "$ANP_SIM_CALIB_DIR"/calibrate-lenet5-idef-c1-r2-sync-auto-bauto.log \
  || fail "the 2-rank calibration did not run rhd with buckets: $(grep -h '^result' "$ANP_SIM_CALIB_DIR"/calibrate-*r2*auto*.log 2>&1 | head -1)"
R7G="$(sim --net lenet5 --batch 64 --chunks 2 --nodes 1 --cores 4 --gpus 2 --gpu k80 --steps 3 -- --pin-chunks)"
[ "$(result_field "$R7G" ncpu)" = 1 ] && [ "$(result_field "$R7G" ncuda)" = 2 ] \
  || fail "4 cores and 2 GPUs, STARPU_NCPU unset: want StarPU's 1 CPU worker and 2 CUDA workers: $R7G"
R7D="$(sim --net lenet5 --batch 64 --chunks 2 --nodes 1 --gpus 2 --gpu k80 --steps 3 -- --pin-chunks)"
[ "$(result_field "$R7D" ncpu)" = 5 ] || fail "2 K80 dies and no --cores: want a node of 8 cores, StarPU's 5 CPU workers: $R7D"
ls "$ANP_SIM_CALIB_DIR/stamps" | grep -q '^lenet5-idef-c1-r1-' \
  || fail "pinned chunks on GPU nodes: the calibration did not take 1-sample chunks: $(ls "$ANP_SIM_CALIB_DIR/stamps")"
finish
