#!/usr/bin/env bash
# net_sim_validate.sh — training over network-namespace hosts, measured and simulated side by
# side (docs/SIMULATION.md "Validation across hosts"): images/s of `starpu_anp bench` over
# tests/net/cluster.sh hosts whose links tbf shapes to RATE, against the same run simulated on
# sim/platform.py --network netns --rate RATE.
#
#   bench/net_sim_validate.sh [--cases LIST] [--reps N] [--csv FILE] [--work DIR] [--sim-only]
#                             [--platform-args "ARGS"] [--cores C]
# --work DIR keeps the measured runs (DIR/measured.csv) and their calibrations; --sim-only
# simulates those cases again without measuring, with sim/platform.py given --platform-args.
# --cores C: the measured hosts shared C cores (this machine's); the simulation models that sharing
# (sim/platform.py --netns-cores, scripts/lib.sh anp_netbench_simulate: docs/NETWORK.md "Ranks
# sharing cores"). Without it every simulated rank has a core of its own, as on a cluster.
#
# A case is NET:HOSTS:RATE:MODE (e.g. resnet8:4:100mbit:async); batch 64 (global), 2 chunks per
# rank, one CPU worker per rank (dmda), the tree all-reduce per tensor (explicitly, --allreduce
# tree --bucket-mb 0: the tables were taken with it, before the defaults became auto, which across
# hosts pick rhd or the ring, and buckets), --steps S (lenet5 30,
# resnet8 10, others 5) after 5 warm-up steps. The measured runs calibrate StarPU's CPU models, each
# rank into its own directory: the simulation then times every task as it ran on this machine
# during the measured runs, with the ranks' threads sharing its cores (the oversubscription of
# several hosts on 2 cores is in the task times, not assumed away), and the network is the
# platform's. Measured images/s = the runs pooled (harmonic mean). Prints
#   case measured_img_s simulated_img_s ratio
# and writes the CSV (case,net,hosts,rate,mode,measured_images_per_s,runs,simulated_images_per_s,ratio,load1,
# cpu_share: the CPU tasks' stretch from the shared cores, 1 without --cores).
# Exit 0 whatever the ratios. Needs root, the real build and build-sim/ (scripts/simulate.sh).
# ANP_NET_ID [54] names the cluster (not bench/allreduce_bench.sh's 53, so the two can run at once).
# The set-up and the measured and simulated runs: scripts/lib.sh anp_netbench_*.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=../scripts/lib.sh
source "$ROOT/scripts/lib.sh"
usage() { echo "net_sim_validate.sh: $*" >&2; exit 2; }
CASES="" REPS=2 CSV="net_sim_validate.csv" WORK="" SIMONLY=0 PARGS=""
for net in lenet5 resnet8; do for h in 2 4; do for r in 100mbit 1gbit; do for m in sync async; do
  CASES+="${CASES:+,}$net:$h:$r:$m"; done; done; done; done
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    --cases) CASES="${2:?}"; shift 2 ;;
    --reps) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || usage "--reps '${2:-}'"; REPS="$2"; shift 2 ;;
    --csv) CSV="${2:?}"; shift 2 ;;
    --work) WORK="${2:?}"; shift 2 ;;
    --sim-only) SIMONLY=1; shift ;;
    --platform-args) PARGS="${2:?}"; shift 2 ;;
    --cores) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || usage "--cores '${2:-}'"; export ANP_NETBENCH_CORES="$2"; shift 2 ;;
    *) usage "unknown option '$1'" ;;
  esac
done
anp_netbench_setup net_sim_validate 54 # REAL_APP, SIM_APP, SMPIRUN, ANP_NET_CLUSTER, TMP, ANP_PRIO, ANP_RANK_PRIO
C="$ANP_NET_CLUSTER"
[ "$SIMONLY" = 0 ] || [ -s "${WORK:-/nonexistent}/measured.csv" ] || usage "--sim-only needs --work DIR with measured.csv"
echo "case,net,hosts,rate,mode,measured_images_per_s,runs,simulated_images_per_s,ratio,load1,cpu_share" >"$CSV"
printf '%-24s %14s %14s %8s\n' case measured_img_s simulated_img_s sim/real
up=""
IFS=, read -ra L <<<"$CASES"
for c in "${L[@]}"; do
  IFS=: read -r net n rate mode <<<"$c"
  [[ "$n" =~ ^[2-9]$ && "$mode" =~ ^(sync|async)$ ]] || usage "case '$c': expected NET:HOSTS:RATE:sync|async"
  row="$( [ -z "$WORK" ] || [ ! -f "$WORK/measured.csv" ] || awk -F, -v k="$c" '$1 == k' "$WORK/measured.csv" | tail -1)"
  [ -n "$row" ] || [ "$SIMONLY" = 0 ] || continue
  if [ -z "$row" ]; then
    if [ "$up" != "$n" ]; then rc=0; bash "$C" up "$n" >/dev/null || rc=$?; [ "$rc" = 0 ] || exit "$rc"; up="$n"; fi
    bash "$C" rate "$rate"
  fi
  steps=5; [ "$net" = lenet5 ] && steps=30; [ "$net" = resnet8 ] && steps=10
  args=(bench --net "$net" --batch 64 --chunks 2 --steps "$steps" --warmup 5 --mode "$mode" --allreduce tree --bucket-mb 0 --quiet)
  cal="${WORK:-$TMP}/cal-${c//:/-}"
  ips=() load=""
  [ -z "$row" ] || { read -ra ips <<<"$(cut -d, -f2 <<<"$row")"; load="$(cut -d, -f3 <<<"$row")"; }
  for _ in $(seq "$REPS"); do
    [ -z "$row" ] || break
    line="$(anp_netbench_measure "$c" "$cal" 600 "${args[@]}")" || continue
    ips+=("$(anp_result_field "$line" images_per_s)")
  done
  [ "${#ips[@]}" -gt 0 ] || continue
  [ -n "$row" ] || { load="$(cut -d' ' -f1 /proc/loadavg)"; [ -z "$WORK" ] || echo "$c,${ips[*]},$load" >>"$WORK/measured.csv"; }
  meas="$(printf '%s\n' "${ips[@]}" | awk '$1 > 0 {s += 1 / $1; k++} END {printf "%.1f", (k && s > 0 ? k / s : 0)}')"
  pdir="$TMP/plat-$n-$rate"
  # shellcheck disable=SC2086
  pname="$(anp_netbench_platform "$pdir" "$n" "$rate" $PARGS)"
  simline="$(anp_netbench_simulate "$c" "$cal" "$pdir" "$pname" "$n" "$rate" 900 "${args[@]}")" || continue
  sim="$(anp_result_field "$simline" images_per_s)" share="$(anp_result_field "$simline" sim_cpu_share)"
  ratio="$(awk -v a="$sim" -v b="$meas" 'BEGIN{printf "%.3f", (b > 0 ? a / b : 0)}')"
  printf '%-24s %14s %14s %8s\n' "$c" "$meas" "$sim" "$ratio"
  echo "$c,$net,$n,$rate,$mode,$meas,${ips[*]},$sim,$ratio,$load,${share:-1}" >>"$CSV"
done
