#!/usr/bin/env bash
# gpu-check.sh — run on a lent GPU machine, from the repository root, with gpu-pack.tar.xz
# carried (scripts/gpu-pack.sh makes it). Runs every GPU test (CUDA codelets vs CPU), then the
# CPU-vs-GPU benchmarks, writing logs to $OUT (or ./gpu-out). Exit status: number of failed tests.
set -uo pipefail
OUTDIR="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUTDIR"
WORK="$(mktemp -d)"
tar -C "$WORK" -xJf gpu-pack.tar.xz || { echo "gpu-check: cannot unpack gpu-pack.tar.xz"; exit 1; }
export LD_LIBRARY_PATH="$WORK/pack/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export STARPU_HOME="$WORK/starpu_home" STARPU_SILENT=1
B="$WORK/pack/bin"
nvidia-smi -L 2>&1 | tee "$OUTDIR/gpu.txt"
FAILED=0
for t in "$B"/gpu_*; do
  name="$(basename "$t")"
  timeout 300 "$t" >"$OUTDIR/$name.log" 2>&1; rc=$?
  case $rc in 0) s=PASS ;; 77) s=SKIP ;; *) s="FAIL($rc)"; FAILED=$((FAILED + 1)) ;; esac
  echo "$name: $s" | tee -a "$OUTDIR/summary.txt"
done
# Whole-net throughput: CPU only vs one GPU (+ CPUs), same synthetic data.
for cfg in "STARPU_NCUDA=0" "STARPU_NCUDA=1 STARPU_NCPU=0" "STARPU_NCUDA=1"; do
  for net in resnet20 resnet8; do
    line="$(env $cfg STARPU_SCHED=dmda timeout 240 "$B/starpu_anp" bench --net $net --batch 256 --steps 20 --warmup 5 --quiet 2>>"$OUTDIR/bench.err" | tail -1)"
    echo "$cfg $net: $line" | tee -a "$OUTDIR/bench.txt"
  done
done
echo "failed: $FAILED" | tee -a "$OUTDIR/summary.txt"
exit "$FAILED"
