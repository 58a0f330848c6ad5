#!/usr/bin/env bash
# ab_steps.sh BASE_APP NEW_APP OUT.csv [ROUNDS] — training steps of two starpu_anp builds side by side:
# resnet8 and resnet20 at batch 64 and 256, STARPU_NCPU=2, in ROUNDS (default 3) interleaved rounds
# (A B in odd rounds, B A in even ones), each run at the measured priority (scripts/measure_prio.sh),
# OpenBLAS at its default core type. Writes round,build,net,batch,images_per_s,load1 to OUT.csv.
# The steps per run are bench/compare_frameworks.sh's (resnet8 15/6, resnet20 8/4, warm-up 1) times SCALE
# (environment, default 3: runs of a few seconds each, which the machine's load disturbs less).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
source "$ROOT/scripts/lib.sh"
[ $# -ge 3 ] || { echo "usage: ab_steps.sh BASE_APP NEW_APP OUT.csv [ROUNDS]" >&2; exit 2; }
BASE="$1"; NEW="$2"; CSV="$3"; ROUNDS="${4:-3}"
for a in "$BASE" "$NEW"; do [ -x "$a" ] || { echo "ab_steps.sh: $a: not an executable" >&2; exit 2; }; done
SCALE="${SCALE:-3}"
steps() { case "$1:$2" in resnet8:64) s=15 ;; resnet8:256) s=6 ;; resnet20:64) s=8 ;; *) s=4 ;; esac; echo $((s * SCALE)); }
echo "round,build,net,batch,images_per_s,load1" >"$CSV"
for r in $(seq 1 "$ROUNDS"); do
  order="base new"; [ $((r % 2)) = 0 ] && order="new base"
  for net in resnet8 resnet20; do
    for b in 64 256; do
      for which in $order; do
        app="$BASE"; [ "$which" = new ] && app="$NEW"
        line="$(STARPU_NCPU=2 timeout 600 env -u OPENBLAS_CORETYPE setsid -w bash "$ROOT/scripts/measure_prio.sh" \
                "$app" bench --net "$net" --batch "$b" --steps "$(steps "$net" "$b")" --warmup 1 --quiet 2>/dev/null |
                anp_result_line || true)"
        ips="$(anp_result_field "$line" images_per_s)"
        echo "$r,$which,$net,$b,${ips:-NA},$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$CSV"
      done
    done
  done
done
