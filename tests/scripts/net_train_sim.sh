#!/usr/bin/env bash
# net_train_sim — the simulated multi-rank training tracks the real one (the validation tolerance): one
# case of the training table (docs/SIMULATION.md "Validation across hosts"): lenet5, batch 64,
# sync, the tree all-reduce per tensor, over 2 namespace hosts whose links tbf shapes to
# 100 Mbit/s, measured twice (pooled images/s) and simulated from those runs' own calibration on
# sim/platform.py --network netns --rate 100mbit (bench/net_sim_validate.sh); simulated /
# measured must be within 1 +- TOL (the validation's +-20%).
# Why this case: at one rank per core it held in every measurement on record (1.04-1.06 over six,
# 2026-12-06), and it is the wire's: 0.5 MB of gradients cross the 100 Mbit/s link per step (~40 ms)
# against ~4 ms of compute per rank, so other load on the machine moves it little. Its measured
# runs are at nice -15, and a comparison outside the bound is made again (up to TRIES in all).
# The check can fail: the same measured runs simulated on a link of half the goodput
# (--netns-eff 0.47) must fall outside the bound.
# Skipped (77) without root/namespaces, mpirun or SimGrid.
NET_ID=19
set -euo pipefail
source "$(dirname "$0")/lib.sh"
net_sim_prepare "$NET_ID"
TOL=0.20 TRIES=3 ok=0 seen=""
CASE=lenet5:2:100mbit:sync
for try in $(seq 1 "$TRIES"); do
  rm -rf "$TMP/work"
  bash "$ROOT/bench/net_sim_validate.sh" --cases "$CASE" --reps 2 --work "$TMP/work" --csv "$TMP/c.csv" >"$TMP/out" 2>"$TMP/err" \
    || { cat "$TMP/err" >&2; fail "bench/net_sim_validate.sh failed"; finish; }
  cat "$TMP/out"
  IFS=, read -r _ _ _ _ _ meas runs sim ratio load < <(tail -n +2 "$TMP/c.csv" | tail -1)
  fcmp "${meas:-0} > 0 && ${sim:-0} > 0" || { grep -v MPI_Init "$TMP/err" | tail -3 >&2; fail "no comparison (measured '${meas:-}', simulated '${sim:-}')"; finish; }
  echo "comparison $try: measured $meas images/s ($runs), simulated $sim, ratio $ratio, load $load"
  seen="$seen${seen:+, }$ratio"
  if fcmp "$ratio >= 1 - $TOL && $ratio <= 1 + $TOL"; then ok=1; break; fi
done
[ "$ok" = 1 ] || fail "simulated/measured outside 1 +- $TOL in all $TRIES comparisons ($seen)"
# The same measured runs, a wrong network model (half the goodput): the check must see it.
bash "$ROOT/bench/net_sim_validate.sh" --cases "$CASE" --sim-only --work "$TMP/work" --platform-args "--netns-eff 0.47" \
  --csv "$TMP/w.csv" >/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; fail "the --sim-only run failed"; finish; }
IFS=, read -r _ _ _ _ _ _ _ wsim wratio _ < <(tail -n +2 "$TMP/w.csv" | tail -1)
echo "a link of half the goodput: simulated ${wsim:-?} images/s, ratio ${wratio:-?}"
fcmp "${wratio:-1} < 1 - $TOL || ${wratio:-1} > 1 + $TOL" || fail "a wrong network model (ratio ${wratio:-?}) passes the tolerance"
finish
