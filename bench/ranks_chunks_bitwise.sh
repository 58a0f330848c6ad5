#!/usr/bin/env bash
# ranks_chunks_bitwise.sh — which (N ranks x M chunks per rank) runs give the bits of K chunks in
# one process: `cmp` of the checkpoints after S steps, the same command otherwise (one CPU worker
# per process, --deterministic on, SGD at the default rate, seed 1, Fashion-MNIST).
#
#   bench/ranks_chunks_bitwise.sh [--steps S] [--repeat R] [CASE...]
#   CASE = NET:BATCH:N:M:K[:ALLREDUCE[:BATCHNORM]]   e.g. lenet5:64:3:1:3  resnet8:64:4:1:4:tree:global
#   default: the cases of docs/determinism.md ("Which K and N give the same bits")
#
# Each case runs the N-rank job R times (mpirun -np N, --chunks M, --allreduce ALLREDUCE [tree])
# and once K chunks in one process, and prints one table row: identical to K chunks in all R
# runs, in some, or in none, and whether the R rank runs agree with each other. The one-process
# reference of each (NET, BATCH, K) is run once. Exit status: 0, 1 if a run failed, 2 on a usage
# error. Checkpoints go to out/ranks_chunks_bitwise/.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
A="${STARPU_ANP:-$ROOT/build/apps/starpu_anp}"
OUT="$ROOT/out/ranks_chunks_bitwise"
STEPS=10 REPEAT=2
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "ranks_chunks_bitwise.sh: --steps '${2:-}': expected a positive integer" >&2; exit 2; }; STEPS="$2"; shift 2 ;;
    --repeat) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "ranks_chunks_bitwise.sh: --repeat '${2:-}': expected a positive integer" >&2; exit 2; }; REPEAT="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "ranks_chunks_bitwise.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
CASES=("$@")
[ ${#CASES[@]} -gt 0 ] || CASES=(
  lenet5:64:2:1:2 lenet5:64:2:1:2:ring lenet5:64:2:1:2:rhd lenet5:64:3:1:3 lenet5:64:4:1:4 lenet5:64:2:2:4 lenet5:96:3:2:6 lenet5:96:2:4:8
  lenet5:96:2:3:6 lenet5:64:2:3:6 lenet5:64:3:1:3:ring lenet5:64:4:1:4:ring lenet5:64:4:1:4:rhd
  resnet8:64:3:1:3:tree:global resnet8:64:4:1:4:tree:global)
for c in "${CASES[@]}"; do
  [[ "$c" =~ ^[a-z0-9_]+:[1-9][0-9]*:[1-9][0-9]*:[1-9][0-9]*:[1-9][0-9]*(:(tree|ring|rhd)(:(local|global))?)?$ ]] \
    || { echo "ranks_chunks_bitwise.sh: case '$c': expected NET:BATCH:N:M:K[:tree|ring|rhd[:local|global]]" >&2; exit 2; }
done
[ -x "$A" ] || { echo "ranks_chunks_bitwise.sh: $A is missing (cmake --build build)" >&2; exit 1; }
mkdir -p "$OUT"
export STARPU_NCPU=1 STARPU_NCUDA=0 STARPU_SILENT=1

run() { # CKPT N M NET BATCH ALLREDUCE BN
  local ck="$1" n="$2" m="$3" net="$4" b="$5" ar="$6" bn="$7" cmd
  cmd=("$A" train --net "$net" --data fashion-mnist --batch "$b" --chunks "$m" --epochs 1 --limit-train 6400 --no-eval
       --seed 1 --quiet --batchnorm "$bn" --allreduce "$ar" --checkpoint "$ck" --stop-after-steps "$STEPS")
  [ "$n" -gt 1 ] && cmd=(mpirun --allow-run-as-root --oversubscribe -np "$n" -x STARPU_NCPU -x STARPU_NCUDA -x STARPU_SILENT "${cmd[@]}")
  rm -f "$ck"
  local rc=0; timeout 600 "${cmd[@]}" >/dev/null 2>"$ck.err" || rc=$?
  [ "$rc" = 3 ] || [ "$rc" = 0 ] || { echo "ranks_chunks_bitwise.sh: exit $rc: ${cmd[*]}: $(tail -1 "$ck.err")" >&2; exit 1; }
}

echo "ranks_chunks_bitwise: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $STEPS steps, $REPEAT runs per rank case" >&2
echo "| net | batch | N ranks x M chunks | against K chunks | all-reduce | batch norm | same bits as K | rank runs agree |"
echo "|---|---:|---:|---:|---|---|---|---|"
for c in "${CASES[@]}"; do
  IFS=: read -r net b n m k ar bn <<<"$c"
  ar="${ar:-tree}" bn="${bn:-local}"
  ref="$OUT/$net-b$b-K$k-$bn.ckpt"
  [ -s "$ref" ] || run "$ref" 1 "$k" "$net" "$b" tree "$bn"
  same=0 agree=yes first=""
  for i in $(seq 1 "$REPEAT"); do
    ck="$OUT/$net-b$b-N${n}xM$m-$ar-$bn-$i.ckpt"
    run "$ck" "$n" "$m" "$net" "$b" "$ar" "$bn"
    cmp -s "$ref" "$ck" && same=$((same + 1))
    if [ -z "$first" ]; then first="$ck"; elif ! cmp -s "$first" "$ck"; then agree=no; fi
  done
  verdict="yes"; [ "$same" = 0 ] && verdict="no"; [ "$same" -gt 0 ] && [ "$same" -lt "$REPEAT" ] && verdict="in $same of $REPEAT runs"
  echo "| $net | $b | $n x $m | $k | $ar | $bn | $verdict | $agree ($REPEAT runs) |"
done
