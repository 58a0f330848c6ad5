#!/usr/bin/env bash
# ab_cpu.sh BASE_APP NEW_APP OUT.csv [ROUNDS] — the process CPU time (user + system, /usr/bin/time) of
# starpu_anp bench with one worker (STARPU_NCPU=1), base and new builds interleaved (A B, then B A), ROUNDS
# rounds (default 5): resnet8 at batch 64 (60 steps) and resnet20 at batch 64 (20 steps), warm-up 1. On a
# machine loaded by others the CPU time a run consumes moves less than its wall time (it still moves with
# the caches and memory bandwidth others take). Writes round,build,net,batch,steps,cpu_s,wall_s,load1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
[ $# -ge 3 ] || { echo "usage: ab_cpu.sh BASE_APP NEW_APP OUT.csv [ROUNDS]" >&2; exit 2; }
BASE="$1"; NEW="$2"; CSV="$3"; ROUNDS="${4:-5}"
for a in "$BASE" "$NEW"; do [ -x "$a" ] || { echo "ab_cpu.sh: $a: not an executable" >&2; exit 2; }; done
tf="$(mktemp)"; trap 'rm -f "$tf"' EXIT
echo "round,build,net,batch,steps,cpu_s,wall_s,load1" >"$CSV"
for r in $(seq 1 "$ROUNDS"); do
  order="base new"; [ $((r % 2)) = 0 ] && order="new base"
  for cfg in resnet8:60 resnet20:20; do
    net="${cfg%%:*}"; steps="${cfg##*:}"
    for which in $order; do
      app="$BASE"; [ "$which" = new ] && app="$NEW"
      STARPU_NCPU=1 timeout 600 env -u OPENBLAS_CORETYPE setsid -w bash "$ROOT/scripts/measure_prio.sh" \
        /usr/bin/time -f "%U %S %e" -o "$tf" "$app" bench --net "$net" --batch 64 --steps "$steps" --warmup 1 \
        --quiet >/dev/null 2>&1 || true
      read -r u s e <"$tf" || { u=NA; s=0; e=NA; }
      cpu="$(awk -v u="$u" -v s="$s" 'BEGIN { if (u == "NA") print "NA"; else printf "%.2f", u + s }')"
      echo "$r,$which,$net,64,$steps,$cpu,$e,$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$CSV"
    done
  done
done
