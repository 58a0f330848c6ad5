#!/usr/bin/env bash
# chunks_ab.sh BIN [ROUNDS]: STARPU_NCPU=2 bench, the default chunking against --chunks 2, interleaved (default
# first in odd rounds, second in even ones), resnet8 and resnet20 at batch 64 and 256, each run at the measured
# priority; one line per run: round net batch chunks images_per_s load1. Run from the repository root, with
# scripts/env.sh's environment (this study's chunks_ab.csv: the binary before the change, where the default was 4).
B=${1:?usage: chunks_ab.sh BIN [ROUNDS]}; R=${2:-3}
run() { # net batch label args...
	local net=$1 b=$2 lab=$3; shift 3
	local l out
	l=$(cut -d' ' -f1 /proc/loadavg)
	out=$(STARPU_NCPU=2 timeout 120 setsid -w bash scripts/measure_prio.sh env -u OPENBLAS_CORETYPE \
		"$B" bench --net "$net" --batch "$b" --steps 30 --warmup 3 "$@" 2>/dev/null | grep '^result')
	echo "$r $net $b $lab $(echo "$out" | grep -o 'images_per_s=[0-9.]*' | cut -d= -f2) $l"
}
echo "round net batch chunks images_per_s load1"
for r in $(seq 1 "$R"); do
	for nb in "resnet8 64" "resnet8 256" "resnet20 64" "resnet20 256"; do
		set -- $nb
		if [ $((r % 2)) = 1 ]; then run $1 $2 default; run $1 $2 2 --chunks 2
		else run $1 $2 2 --chunks 2; run $1 $2 default; fi
	done
done
