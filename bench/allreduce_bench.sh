#!/usr/bin/env bash
# allreduce_bench.sh — the app's own all-reduce, measured over network-namespace hosts and
# simulated on the same network, cell by cell (docs/NETWORK.md "The all-reduce microbenchmark").
#
#   bench/allreduce_bench.sh [--variants "tree ring rhd"] [--hosts "2 3 4"] [--rates "off 1gbit 100mbit"]
#                            [--sizes "4096 16384 ... 67108864"] [--reps N] [--max-wire S]
#                            [--csv FILE] [--plot FILE.png] [--work DIR] [--sim-only] [--plot-only]
#                            [--cores C]
#
# A cell = (variant, hosts, rate, size). For each: tests/net/cluster.sh hosts (one rank each,
# Open MPI over TCP only, one StarPU CPU worker per rank, dmda), every host link shaped by tbf at
# RATE both ways (`cluster.sh rate`), and `starpu_anp bench --allreduce-bytes SIZE --allreduce
# VARIANT` (runtime/allreduce_bench.c: graph/dist.c's all-reduce of one SIZE-byte tensor per rank,
# timed over back-to-back repetitions) run --reps times: measured s/all-reduce = the median. The
# measured runs calibrate StarPU's CPU models (a fresh directory per cell and rank), so the
# simulation times each task as this machine did during the cell; then the same command runs in
# the simulation build (starpu_smpirun) on sim/platform.py --network netns --rate RATE (the links
# as configured: see the calibration in docs/NETWORK.md). rhd runs on power-of-two host counts only.
# A cell whose estimated wire time per all-reduce exceeds --max-wire seconds [3] is left out
# (64 MiB over 4 hosts at 100 Mbit/s: 16 s per all-reduce), and listed as skipped.
# Output: one CSV row per cell (variant,hosts,rate,size_bytes,reps,measured_s,simulated_s,ratio,
# runs_s: the measured runs, load1: the machine's load average then) and, with gnuplot and --plot,
# FILE.png (simulated/measured per size, one panel per rate) and FILE-time.png (the times).
# --work DIR keeps the measured runs (DIR/measured.csv) and their calibrations, and a cell found
# there is not measured again (a cut-short run resumes); --sim-only simulates only those cells,
# measuring nothing (e.g. after a change of sim/platform.py's netns constants); --platform-args
# "..." are added to sim/platform.py's (e.g. "--netns-lat-us 900": another model of the same
# measurements); --plot-only draws --plot from an existing --csv. --cores C: the measured hosts
# shared C cores (this machine's), and the simulation models it (sim/platform.py --netns-cores:
# each message waits for a core when there are more ranks than cores; docs/NETWORK.md "Ranks
# sharing cores"); without it each simulated rank has a core, as on a cluster.
# Needs root (namespaces) and the real and simulation builds (build/, build-sim/:
# scripts/simulate.sh builds both). ANP_NET_ID [53] names the cluster (bench/net_sim_validate.sh's
# default is another). The set-up and the measured and simulated runs: scripts/lib.sh anp_netbench_*.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=../scripts/lib.sh
source "$ROOT/scripts/lib.sh" # the result line, the namespace-bench set-up and runs
usage() { echo "allreduce_bench.sh: $*" >&2; exit 2; }
VARIANTS="tree ring rhd" HOSTS="2 3 4" RATES="off 1gbit 100mbit"
SIZES="4096 16384 65536 262144 1048576 4194304 16777216 67108864"
REPS=3 MAXWIRE=3 CSV="allreduce_bench.csv" PLOT="" WORK="" SIMONLY=0 PARGS="" PLOTONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    --variants) VARIANTS="${2:?}"; shift 2 ;;
    --hosts) HOSTS="${2:?}"; shift 2 ;;
    --rates) RATES="${2:?}"; shift 2 ;;
    --sizes) SIZES="${2:?}"; shift 2 ;;
    --reps) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || usage "--reps '${2:-}'"; REPS="$2"; shift 2 ;;
    --max-wire) [[ "${2:-}" =~ ^[0-9]+([.][0-9]+)?$ ]] || usage "--max-wire '${2:-}'"; MAXWIRE="$2"; shift 2 ;;
    --csv) CSV="${2:?}"; shift 2 ;;
    --plot) PLOT="${2:?}"; shift 2 ;;
    --work) WORK="${2:?}"; shift 2 ;;
    --sim-only) SIMONLY=1; shift ;;
    --plot-only) PLOTONLY=1; shift ;;
    --platform-args) PARGS="${2:?}"; shift 2 ;;
    --cores) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || usage "--cores '${2:-}'"; export ANP_NETBENCH_CORES="$2"; shift 2 ;;
    *) usage "unknown option '$1'" ;;
  esac
done
for v in $VARIANTS; do [[ "$v" =~ ^(tree|ring|rhd)$ ]] || usage "variant '$v': expected tree, ring or rhd"; done
for h in $HOSTS; do [[ "$h" =~ ^[2-9]$ ]] || usage "hosts '$h': expected 2..9"; done
for s in $SIZES; do [[ "$s" =~ ^[0-9]+$ ]] && [ $((s % 8)) = 0 ] && [ "$s" -ge 64 ] || usage "size '$s': a multiple of 8 bytes, >= 64"; done
[ -n "$WORK" ] || [ "$SIMONLY" = 0 ] || usage "--sim-only needs --work DIR"
anp_netbench_setup allreduce_bench 53 # REAL_APP, SIM_APP, SMPIRUN, ANP_NET_CLUSTER, TMP, ANP_PRIO, ANP_RANK_PRIO
C="$ANP_NET_CLUSTER"
[ -n "$WORK" ] || WORK="$TMP/work"
mkdir -p "$WORK"; WORK="$(cd "$WORK" && pwd)"
[ "$SIMONLY" = 0 ] || [ -s "$WORK/measured.csv" ] || usage "--sim-only: no $WORK/measured.csv"
rate_bps() { case "$1" in off) echo 0 ;; *gbit) awk -v r="${1%gbit}" 'BEGIN{print r * 1e9}' ;; *mbit) awk -v r="${1%mbit}" 'BEGIN{print r * 1e6}' ;; *) echo 0 ;; esac; }
# wire V N S BPS: the busiest link's bytes per all-reduce / rate (s): tree: rank 0 receives and
# sends N-1 copies; ring and rhd: 2 (N-1)/N of the tensor each way per link.
wire() { awk -v v="$1" -v n="$2" -v s="$3" -v b="$4" 'BEGIN { if (b == 0) { print 0; exit }
  f = (v == "tree") ? n - 1 : 2 * (n - 1) / n; printf "%.6f", f * s * 8 / b }'; }
# timed repetitions: about 1.5 s of estimated time, 3..40
nreps() { awk -v w="$1" -v s="$2" 'BEGIN { t = w + 2e-3 + s / 4e8; r = int(1.5 / t); if (r < 3) r = 3; if (r > 40) r = 40; print r }'; }
median() { sort -g | awk '{a[NR] = $1} END { if (NR == 0) print 0; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
[ "$PLOTONLY" = 0 ] || HOSTS="" # --plot-only: the plots of an existing --csv, nothing run
[ "$PLOTONLY" = 1 ] || echo "variant,hosts,rate,size_bytes,reps,measured_s,simulated_s,ratio,runs_s,load1" >"$CSV"
printf '%-5s %5s %8s %10s %12s %12s %7s\n' variant hosts rate bytes measured_s simulated_s sim/real
for n in $HOSTS; do
  if [ "$SIMONLY" = 0 ]; then rc=0; bash "$C" up "$n" >/dev/null || rc=$?; [ "$rc" = 0 ] || exit "$rc"; fi
  for rate in $RATES; do
    [ "$SIMONLY" = 1 ] || bash "$C" rate "$rate"
    pdir="$TMP/plat-$n-$rate"
    # shellcheck disable=SC2086
    pname="$(anp_netbench_platform "$pdir" "$n" "$rate" $PARGS)"
    for v in $VARIANTS; do
      [ "$v" != rhd ] || [ $((n & (n - 1))) = 0 ] || continue
      for s in $SIZES; do
        w="$(wire "$v" "$n" "$s" "$(rate_bps "$rate")")"
        if awk -v w="$w" -v m="$MAXWIRE" 'BEGIN{exit !(w > m)}'; then
          printf '%-5s %5s %8s %10s %12s\n' "$v" "$n" "$rate" "$s" "skipped (wire ${w}s)"; continue
        fi
        r="$(nreps "$w" "$s")"
        cal="$WORK/cal-$v-$n-$rate-$s"
        args=(bench --allreduce-bytes "$s" --allreduce "$v" --steps "$r" --warmup 2 --quiet)
        runs=()
        # A cell already measured in --work is not measured again (a run cut short resumes).
        row="$( [ ! -f "$WORK/measured.csv" ] || awk -F, -v k="$v,$n,$rate,$s" 'index($0, k ",") == 1' "$WORK/measured.csv" | tail -1)"
        [ -n "$row" ] || [ "$SIMONLY" = 0 ] || continue
        if [ -n "$row" ]; then
          r="$(cut -d, -f5 <<<"$row")"; args=(bench --allreduce-bytes "$s" --allreduce "$v" --steps "$r" --warmup 2 --quiet)
          read -ra runs <<<"$(cut -d, -f6 <<<"$row")"; load="$(cut -d, -f7 <<<"$row")"
        fi
        for _ in $(seq "$REPS"); do
          [ -z "$row" ] || break
          line="$(anp_netbench_measure "$v $n $rate $s" "$cal" 300 "${args[@]}")" || continue
          runs+=("$(anp_result_field "$line" allreduce_s)")
        done
        [ "${#runs[@]}" -gt 0 ] || continue
        meas="$(printf '%s\n' "${runs[@]}" | median)"
        [ -n "$row" ] || { load="$(cut -d' ' -f1 /proc/loadavg)"; echo "$v,$n,$rate,$s,$r,${runs[*]},$load" >>"$WORK/measured.csv"; }
        simline="$(anp_netbench_simulate "$v $n $rate $s" "$cal" "$pdir" "$pname" "$n" "$rate" 600 "${args[@]}")" || continue
        sim="$(anp_result_field "$simline" allreduce_s)"
        ratio="$(awk -v a="$sim" -v b="$meas" 'BEGIN{printf "%.3f", (b > 0 ? a / b : 0)}')"
        printf '%-5s %5s %8s %10s %12s %12s %7s\n' "$v" "$n" "$rate" "$s" "$meas" "$sim" "$ratio"
        echo "$v,$n,$rate,$s,$r,$meas,$sim,$ratio,${runs[*]},$load" >>"$CSV"
      done
    done
  done
  [ "$SIMONLY" = 1 ] || bash "$C" down
done
[ -n "$PLOT" ] || exit 0
command -v gnuplot >/dev/null || { echo "allreduce_bench.sh: no gnuplot, no plot" >&2; exit 0; }
# One panel per rate: simulated/measured against the size, one line per variant and host count
# (FILE.png), and the measured (points) and simulated (lines) times (FILE-time.png).
pd="$TMP/plot"; mkdir -p "$pd"
rates_in="$(tail -n +2 "$CSV" | cut -d, -f3 | awk '!seen[$0]++' | tr '\n' ' ')"
np="$(echo "$rates_in" | wc -w)"
for kind in ratio time; do
  out="$PLOT"; [ "$kind" = ratio ] || out="${PLOT%.png}-time.png"
  g="set terminal pngcairo size $((420 * np)),460 font 'DejaVu Sans,9'; set output '$out'; set multiplot layout 1,$np; set logscale x 2; set format x '%.0b%BB'; set grid; set xlabel 'bytes per rank'; set key top left font ',8';"
  for rate in $rates_in; do
    plot="" li=0
    for f in $(tail -n +2 "$CSV" | awk -F, -v r="$rate" '$3 == r {print $1 "-" $2}' | sort -u); do
      li=$((li + 1))
      awk -F, -v r="$rate" -v k="$f" '$3 == r && ($1 "-" $2) == k {print $4, $6, $7, $8}' "$CSV" | sort -n >"$pd/$rate-$f.dat"
      if [ "$kind" = ratio ]; then
        plot+="${plot:+, }'$pd/$rate-$f.dat' using 1:4 with linespoints lc $li title '$f hosts'"
      else
        plot+="${plot:+, }'$pd/$rate-$f.dat' using 1:2 with points pt 7 ps 0.7 lc $li title '$f measured', '$pd/$rate-$f.dat' using 1:3 with lines lc $li title '$f simulated'"
      fi
    done
    if [ "$kind" = ratio ]; then
      g+=" set title 'rate $rate: simulated / measured'; set yrange [0.15:1.6]; set ylabel 'simulated / measured';"
      g+=" plot $plot, 1.15 with lines dt 2 lc 'grey' notitle, 0.85 with lines dt 2 lc 'grey' notitle;"
    else
      g+=" set title 'rate $rate: s per all-reduce'; set logscale y; set ylabel 's per all-reduce'; plot $plot;"
    fi
  done
  gnuplot -e "$g unset multiplot" 2>"$pd/gp.err" || echo "allreduce_bench.sh: gnuplot failed: $(head -2 "$pd/gp.err")" >&2
done
echo "plots: $PLOT ${PLOT%.png}-time.png" >&2
