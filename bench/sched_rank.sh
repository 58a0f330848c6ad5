#!/usr/bin/env bash
# sched_rank.sh — does the simulator rank StarPU's scheduling policies as this machine does?
#
#   bench/sched_rank.sh [--cases LIST] [--scheds LIST] [--rounds N] [--steps S] [--out DIR]
#
# For each case (NET:WORKERS:RANKS:MODE:BATCH, bench/sim_validate.sh's), real runs of every
# policy, interleaved round by round at nice -15 (bench/sim_validate.sh --scheds: one calibrating
# dmda warm-up run, then N rounds, each running every policy once from a rotating start), the
# models calibrated by those very runs, then every policy simulated on them (scripts/simulate.sh
# --sched LIST); bench/sched_rank.py ranks both and prints Kendall's tau-b per case (its tie
# rule: docs/studies/2026-12-07-scheduler-ranking.md) and each policy's simulated / real.
# Writes DIR/runs.csv (every run), DIR/summary.csv (one row per case), DIR/ranking.png.
#   --cases   [resnet8 and resnet20 at batch 64 and 128, 2 CPU workers, one process]
#   --scheds  [eager,lws,ws,dmda,dmdas,dmdar,random,prio,heteroprio]
#   --rounds  real runs per policy [3]     --steps  timed steps per run [30]
#   --out     [sched-rank]        --keep    also keep each case's calibration in DIR/calib/CASE
# Exit 0 whatever the ranking (the tolerance is the caller's: tests/scripts/sim_sched_rank.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
usage() { echo "sched_rank.sh: $*" >&2; exit 2; }
CASES="resnet8:2:1:sync:64,resnet8:2:1:sync:128,resnet20:2:1:sync:64,resnet20:2:1:sync:128"
SCHEDS="eager,lws,ws,dmda,dmdas,dmdar,random,prio,heteroprio"
ROUNDS=3 STEPS=30 OUT=sched-rank KEEP=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    --cases) CASES="${2:?}"; shift 2 ;;
    --scheds) SCHEDS="${2:?}"; shift 2 ;;
    --rounds) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || usage "--rounds '${2:-}'"; ROUNDS="$2"; shift 2 ;;
    --steps) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || usage "--steps '${2:-}'"; STEPS="$2"; shift 2 ;;
    --out) [ -n "${2:-}" ] || usage "--out needs a folder"; OUT="$2"; shift 2 ;;
    --keep) KEEP=(--keep-calib "$OUT/calib"); shift ;;
    *) usage "unknown option '$1'" ;;
  esac
done
[[ "$SCHEDS" == *,* ]] || usage "--scheds '$SCHEDS': at least two policies to rank"
mkdir -p "$OUT"
echo "sched_rank.sh: start $(date -u +%FT%TZ), $(uptime)" >&2
bash "$ROOT/bench/sim_validate.sh" --cases "$CASES" --scheds "$SCHEDS" --reps "$ROUNDS" --steps "$STEPS" --warm 1 \
  --csv "$OUT/runs.csv" "${KEEP[@]}"
echo "sched_rank.sh: end $(date -u +%FT%TZ), $(uptime)" >&2
python3 "$ROOT/bench/sched_rank.py" --summary "$OUT/summary.csv" --plot "$OUT/ranking.png" "$OUT/runs.csv" || [ $? = 1 ]
