#!/usr/bin/env bash
# mpi_async — mixed-asynchronous training over 2 ranks learns: one Fashion-MNIST epoch with the
# default staleness bound (S = 4, lookahead on) reaches a test accuracy within 0.02 of
# synchronous training with the same settings, and the staleness observed never exceeds the
# bound (checked for S = 4 and, in a short run, S = 1). Without lookahead the S = 4 gap is about
# 0.05 (README, "Across nodes"); that run is printed for comparison, not asserted.
# Load: synchronous training is deterministic (the same reduction whatever the timing), but an
# async run's accuracy depends on the interleaving of pushes and pulls, i.e. on which (stale)
# parameters each step sees, which the machine's load changes: a statistical quantity. So an
# async run below the bound is run again, up to ASYNC_TRIES (3) runs in all, and the test passes
# when one of them is within 0.02 of sync; everything that is not statistical (the mode, the
# default S = 4 and lookahead, staleness_max <= S) is asserted on every run. A real loss of
# accuracy (a lost push, a wrong re-add of the rank's own changes) is below the bound every time.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
export STARPU_NCPU=1
ASYNC_TRIES=3
run() { timeout 600 "${ANP_MPIRUN[@]}" -np 2 "$STARPU_ANP" train --net lenet5 --quiet "$@" 2>"$TMP/err" | tail -1; }
SYNC="$(run --mode sync)" || { cat "$TMP/err" >&2; fail "sync run failed"; finish; }
SA="$(result_field "$SYNC" test_accuracy)"
echo "sync:          test_accuracy=$SA images_per_s=$(result_field "$SYNC" images_per_s)"
ok=0 seen=""
for try in $(seq 1 "$ASYNC_TRIES"); do
  ASYNC="$(run --mode async)" || { cat "$TMP/err" >&2; fail "async run $try failed"; finish; }
  AA="$(result_field "$ASYNC" test_accuracy)"
  echo "async S=4 run $try: test_accuracy=$AA images_per_s=$(result_field "$ASYNC" images_per_s) staleness_mean=$(result_field "$ASYNC" staleness_mean) staleness_max=$(result_field "$ASYNC" staleness_max)"
  [ "$(result_field "$ASYNC" mode)" = async ] || fail "result line mode=$(result_field "$ASYNC" mode)"
  [ "$(result_field "$ASYNC" staleness)" = 4 ] || fail "default staleness is $(result_field "$ASYNC" staleness), not 4"
  [ "$(result_field "$ASYNC" lookahead)" = 1 ] || fail "lookahead is not on by default"
  fcmp "$(result_field "$ASYNC" staleness_max) <= 4" || fail "staleness $(result_field "$ASYNC" staleness_max) > 4"
  seen="$seen${seen:+, }$AA"
  if fcmp "$AA >= $SA - 0.02"; then ok=1; break; fi
  echo "async run $try: $AA is more than 0.02 below sync's $SA$([ "$try" -lt "$ASYNC_TRIES" ] && echo '; running again')"
done
[ "$ok" = 1 ] || fail "async accuracy more than 0.02 below sync's $SA in all $ASYNC_TRIES runs ($seen)"
# The bound holds for a tighter S too, and --no-lookahead is honoured.
A1="$(run --mode async --staleness 1 --no-lookahead --max-steps 100 --limit-train 6400 --limit-test 500)" || fail "async S=1 failed"
echo "async S=1 (100 steps, no lookahead): staleness_mean=$(result_field "$A1" staleness_mean) staleness_max=$(result_field "$A1" staleness_max)"
fcmp "$(result_field "$A1" staleness_max) <= 1" || fail "staleness $(result_field "$A1" staleness_max) > 1"
[ "$(result_field "$A1" lookahead)" = 0 ] || fail "--no-lookahead ignored (lookahead=$(result_field "$A1" lookahead))"
finish
