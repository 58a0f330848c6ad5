#!/usr/bin/env bash
# act_bf16_compare.sh — what storing activations in bf16 gives (graph/model.h y_bf16): the same
# --precision bf16 training steps with DNN_BF16_ACTIVATIONS=0 (every activation fp32) and 1 (the
# default), side by side, in interleaved rounds (A B, then B A, ...):
#   starpu_anp bench --net NET --batch B --steps S --warmup 2 --precision bf16   (STARPU_NCPU=N)
# for each NET:B given. Prints the median images/s of each, the ratio on/off per net, and the peak
# RSS of each (/usr/bin/time's maximum resident set, the whole process: the activations' share is
# what moves); raw rows in OUT/runs.csv with the load average of each run.
#
# Usage: bench/act_bf16_compare.sh [--rounds N] [--ncpu N] [--steps S] [--build DIR] [--out DIR] NET:B...
#   defaults: 5 rounds, STARPU_NCPU=2, 20 steps, build/, out/act-bf16-<date>; e.g. resnet20:64 resnet20:256
#   (bench: synthetic data of the net's input shape)
# Its measured runs take a high priority where allowed (scripts/lib.sh anp_measure_prio); give the
# load with the figures.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../scripts/lib.sh
source "$ROOT/scripts/lib.sh"
anp_measure_prio "$ROOT"
ROUNDS=5; NCPU=2; STEPS=20; BUILD="$ROOT/build"; OUT="$ROOT/out/act-bf16-$(date +%Y%m%d-%H%M%S)"; CASES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift ;;
    --ncpu) NCPU="$2"; shift ;;
    --steps) STEPS="$2"; shift ;;
    --build) BUILD="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "act_bf16_compare.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
    *) CASES+=("$1") ;;
  esac
  shift
done
[ "${#CASES[@]}" -gt 0 ] || CASES=(resnet20:64 resnet20:256)
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ && "$NCPU" =~ ^[1-9][0-9]*$ && "$STEPS" =~ ^[1-9][0-9]*$ ]] \
  || { echo "act_bf16_compare.sh: --rounds, --ncpu and --steps need positive integers" >&2; exit 2; }
APP="$BUILD/apps/starpu_anp"
[ -x "$APP" ] || { echo "act_bf16_compare.sh: no $APP (build first, or --build DIR)" >&2; exit 1; }
mkdir -p "$OUT"
CSV="$OUT/runs.csv"; LOG="$OUT/log.txt"
echo "round,net,batch,ncpu,act_bf16,bf16_activations,images_per_s,load1,max_rss_kb" >"$CSV"
echo "measured runs: $ANP_PRIO_SAID" >>"$LOG"
run() { # round net batch act
  local line ips
  line="$(DNN_BF16_ACTIVATIONS="$4" STARPU_NCPU="$NCPU" STARPU_NCUDA=0 "${ANP_PRIO[@]}" timeout 600 \
    /usr/bin/time -f "max_rss_kb %M" -o "$OUT/time" "$APP" bench --net "$2" --batch "$3" \
    --steps "$STEPS" --warmup 2 --precision bf16 --quiet 2>>"$LOG" | tail -1 || true)"
  echo "act=$4: $line" >>"$LOG"
  ips="$(anp_result_field "$line" images_per_s)"
  echo "$1,$2,$3,$NCPU,$4,$(anp_result_field "$line" bf16_activations),${ips:-},$(cut -d' ' -f1 /proc/loadavg),$(awk '$1 == "max_rss_kb" { print $2 }' "$OUT/time")" >>"$CSV"
  printf '  round %s %s:%s act_bf16=%s %10s images/s (load %s)\n' "$1" "$2" "$3" "$4" "${ips:-?}" "$(cut -d' ' -f1 /proc/loadavg)" >&2
}
for r in $(seq 1 "$ROUNDS"); do
  for c in "${CASES[@]}"; do
    IFS=: read -r NET B <<<"$c"
    if [ $((r % 2)) = 1 ]; then run "$r" "$NET" "$B" 0; run "$r" "$NET" "$B" 1
    else run "$r" "$NET" "$B" 1; run "$r" "$NET" "$B" 0; fi
  done
done
awk -F, 'NR > 1 && $7 != "" { k = $2 ":" $3 " act=" $5; v[k, ++n[k]] = $7; rss[k] = rss[k] > $9 ? rss[k] : $9; l[k] = l[k] " " $8; act[k] = $6 }
  function med(k,   i, j, t, m, a) { m = n[k]; for (i = 1; i <= m; i++) a[i] = v[k, i];
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
  END { for (k in n) { m[k] = med(k); printf "%-24s median %8.1f images/s over %d runs, bf16_activations=%s, max RSS %d MB; loads:%s\n", k, m[k], n[k], act[k], rss[k] / 1024, l[k] }
    for (k in n) if (k ~ / act=1$/) { o = k; sub(/ act=1$/, " act=0", o); if (m[o] > 0) printf "%-24s on / off: %.3fx\n", substr(k, 1, length(k) - 6), m[k] / m[o] } }' "$CSV" \
  | tee "$OUT/summary.txt"
