#!/usr/bin/env bash
# net_allreduce.sh — tree against ring all-reduce across "hosts" (network namespaces on a bridge,
# tests/net/cluster.sh; Open MPI over TCP only), per net, host count and link rate (tbf on each
# host's link, both directions). Not a test: prints one table row per run:
#   net hosts rate allreduce images_per_s bytes_per_step(all ranks) busiest_rank_bytes_per_step link_bytes_per_step
# bytes_per_step: StarPU-MPI's count (STARPU_MPI_STATS=1) over the run's steps (warm-up included).
# Environment: NETS ("lenet5 resnet8 resnet20"), HOSTS ("2 4"), RATES ("off 10gbit 1gbit"),
# ARS ("tree ring": the all-reduces to compare, tree, ring or rhd, each optionally with gradient
# buckets, e.g. "rhd rhd+b4" for --allreduce rhd and --allreduce rhd --bucket-mb 4; run in turn
# per rep),
# STEPS_lenet5 (60), STEPS_resnet8 (10), STEPS_resnet20 (5), REPS (1), ANP_NET_ID (40).
# Needs root (namespaces). Run from the repository root after building.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=../scripts/lib.sh
source "$ROOT/scripts/lib.sh" # the result line
B="${STARPU_ANP:-$ROOT/build/apps/starpu_anp}"
C="$ROOT/tests/net/cluster.sh"
export ANP_NET_ID="${ANP_NET_ID:-40}"
NETS="${NETS:-lenet5 resnet8 resnet20}"; HOSTS="${HOSTS:-2 4}"; RATES="${RATES:-off 10gbit 1gbit}"; REPS="${REPS:-1}"
ARS="${ARS:-tree ring}"
for v in $ARS; do [[ "$v" =~ ^(tree|ring|rhd)(\+b[0-9]+([.][0-9]+)?)?$ ]] || { echo "net_allreduce.sh: ARS item '$v': expected tree, ring or rhd, each optionally +bM (e.g. rhd+b4)" >&2; exit 2; }; done
# One EXIT trap (a second `trap ... EXIT` replaces the first): the cluster goes down and the
# scratch folder goes, also on Ctrl-C or a failed step.
TMP="$(mktemp -d)"
trap 'bash "$C" down; rm -rf "$TMP"' EXIT
trap 'exit 130' INT
printf '%-9s %5s %6s %8s %10s %14s %14s %14s\n' net hosts rate ar img_per_s mpi_B_per_step busiest_B_step link_B_per_step
for n in $HOSTS; do
  rc=0; bash "$C" up "$n" >/dev/null || rc=$?; [ "$rc" = 0 ] || exit "$rc"
  for rate in $RATES; do
    bash "$C" rate "$rate" || exit 1
    for net in $NETS; do
      v="STEPS_$net"; steps="${!v:-10}"
      [ "$net" = lenet5 ] && steps="${STEPS_lenet5:-60}"
      [ "$net" = resnet8 ] && steps="${STEPS_resnet8:-10}"
      [ "$net" = resnet20 ] && steps="${STEPS_resnet20:-5}"
      for rep in $(seq 1 "$REPS"); do for arv in $ARS; do
        ar="${arv%%+*}" bucket=0; [ "$ar" = "$arv" ] || bucket="${arv#*+b}"
        tx0=0; for h in $(seq 1 "$n"); do tx0=$((tx0 + $(ip netns exec "anpnet${ANP_NET_ID}h$h" cat /sys/class/net/anp0/statistics/tx_bytes))); done
        line="$(timeout -k 5 600 bash "$C" mpirun --bind-to none -x STARPU_NCPU=1 -x STARPU_MPI_STATS=1 \
          "$B" bench --net "$net" --steps "$steps" --allreduce "$ar" --bucket-mb "$bucket" --quiet 2>"$TMP/err" | anp_result_line)" \
          || { echo "run failed: $net $n $rate $arv" >&2; tail -5 "$TMP/err" >&2; continue; }
        tx1=0; for h in $(seq 1 "$n"); do tx1=$((tx1 + $(ip netns exec "anpnet${ANP_NET_ID}h$h" cat /sys/class/net/anp0/statistics/tx_bytes))); done
        total_steps="$(anp_result_field "$line" steps)"
        ips="$(anp_result_field "$line" images_per_s)"
        read -r all max < <(sed -n 's/^\[starpu_comm_stats\]\[[0-9]*\] TOTAL:[[:space:]]*\([0-9]*\)\..*/\1/p' "$TMP/err" \
          | awk '{s += $1; if ($1 > m) m = $1} END {print s + 0, m + 0}')
        printf '%-9s %5s %6s %8s %10s %14.0f %14.0f %14.0f\n' "$net" "$n" "$rate" "$arv" "$ips" \
          "$(awk -v a="$all" -v s="$total_steps" 'BEGIN{print a / s}')" "$(awk -v a="$max" -v s="$total_steps" 'BEGIN{print a / s}')" \
          "$(awk -v a=$((tx1 - tx0)) -v s="$total_steps" 'BEGIN{print a / s}')"
      done; done
    done
  done
  bash "$C" down
done
