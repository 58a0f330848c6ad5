#!/usr/bin/env bash
# conv_old_new.sh OLD_OP_BENCH NEW_OP_BENCH ROUNDS OUTDIR — the conv kernels of two builds, interleaved (old new old
# new ...), each `dnn_op_bench --op conv2d --batch 16 --clock cpu --reps 15` at the measured priority; one markdown
# table per run in OUTDIR (op_bench_conv_n16_{old,new}_rN.md, first line: round, build, 1-minute load).
# e.g. bash docs/studies/2026-12-07-s2bwd/conv_old_new.sh /tmp/main/dnn_op_bench build/bench/dnn_op_bench 2 out/s2
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 OLD_OP_BENCH NEW_OP_BENCH ROUNDS OUTDIR" >&2; exit 2; }
old=$1 new=$2 rounds=$3 out=$4
here=$(cd "$(dirname "$0")/../../.." && pwd)
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
	for b in old new; do
		bin=$old; [ $b = new ] && bin=$new
		f="$out/op_bench_conv_n16_${b}_r$r.md"
		echo "round $r $b load $(cut -d' ' -f1 /proc/loadavg)" >"$f"
		timeout 600 setsid -w bash "$here/scripts/measure_prio.sh" env -u OPENBLAS_CORETYPE \
			"$bin" --op conv2d --batch 16 --clock cpu --reps 15 >>"$f"
	done
done
