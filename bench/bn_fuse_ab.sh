#!/usr/bin/env bash
# bn_fuse_ab.sh — batch norm fused into the convs (DNN_FUSE=3, graph/fuse.c) against the default fusion level
# (DNN_FUSE=1): images/s of `starpu_anp bench`, the two levels alternated run by run (A B B A A B ...) in one
# invocation, each run at measuring priority (scripts/lib.sh anp_measure_prio). Prints one CSV line per run and,
# per net and batch, the median of the per-round ratios fused / unfused (each ratio from two runs side by side).
#
#   bench/bn_fuse_ab.sh [BUILD_DIR]        environment: ROUNDS [5], IMAGES [6144]: timed steps = IMAGES / batch
#                                          (a run of a few seconds), NETS ["resnet8:64 resnet8:256 resnet20:64
#                                          resnet20:256"], STARPU_NCPU [2]
# Output: CSV header `round,net,batch,fuse,images_per_s,load1`, rows, then `ratio,net,batch,median,min,max`.
# The study docs/studies/2026-12-07-bn-fusion.md has its figures.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
source "$ROOT/scripts/lib.sh"
APP="${1:-$ROOT/build}/apps/starpu_anp"
[ -x "$APP" ] || { echo "error: $APP: not an executable (build first, or give BUILD_DIR)" >&2; exit 2; }
ROUNDS="${ROUNDS:-5}" IMAGES="${IMAGES:-6144}" NETS="${NETS:-resnet8:64 resnet8:256 resnet20:64 resnet20:256}"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "error: ROUNDS=$ROUNDS: expected a positive integer" >&2; exit 2; }
[[ "$IMAGES" =~ ^[1-9][0-9]*$ ]] || { echo "error: IMAGES=$IMAGES: expected a positive integer" >&2; exit 2; }
export STARPU_SILENT=1 STARPU_NCPU="${STARPU_NCPU:-2}"
anp_measure_prio "$ROOT"
echo "# $ANP_PRIO_SAID; STARPU_NCPU=$STARPU_NCPU; bench --steps IMAGES/batch ($IMAGES images) --warmup 2; $(nproc) cores" >&2
declare -A ips
echo "round,net,batch,fuse,images_per_s,load1"
for r in $(seq "$ROUNDS"); do
  for nb in $NETS; do
    net="${nb%%:*}" batch="${nb##*:}" order="1 3"
    steps=$(( (IMAGES + batch - 1) / batch ))
    [ $((r % 2)) = 0 ] && order="3 1" # alternate which level runs first
    for f in $order; do
      load1="$(cut -d' ' -f1 /proc/loadavg)"
      line="$(DNN_FUSE=$f timeout 900 env -u OPENBLAS_CORETYPE "${ANP_PRIO[@]}" "$APP" bench --net "$net" --batch "$batch" \
        --steps "$steps" --warmup 2 --quiet 2>/dev/null | anp_result_line)" || {
        echo "error: DNN_FUSE=$f $APP bench --net $net --batch $batch failed" >&2
        exit 1
      }
      ips[$r,$nb,$f]="$(anp_result_field "$line" images_per_s)"
      echo "$r,$net,$batch,$f,${ips[$r,$nb,$f]},$load1"
    done
  done
done
for nb in $NETS; do
  for r in $(seq "$ROUNDS"); do awk -v a="${ips[$r,$nb,3]}" -v b="${ips[$r,$nb,1]}" 'BEGIN { printf "%.4f\n", a / b }'; done |
    sort -g | awk -v nb="$nb" '{ v[NR] = $1 } END { split(nb, p, ":");
      printf "ratio,%s,%s,%.3f,%.3f,%.3f\n", p[1], p[2], (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[1], v[NR] }'
done
