#!/usr/bin/env bash
# mpi_kill — when one rank dies mid-run, the job ends with a non-zero status within 60 s of the
# kill (no rank waits forever for the dead one's part of a reduction), and no rank is left.
# The victim is a rank itself: a process named starpu_anp (`pgrep -x`, the executable's name)
# whose command line holds this run's mark. `pgrep -f` on the command line alone also matched
# the `timeout` and `mpirun` processes that launched it (their command lines hold the same
# words), so killing "the last match" could kill a launcher instead of a rank.
# Load: the wait for training to start (metrics rows; the file is flushed per epoch, and an
# epoch of synthetic data is short) is bounded generously (300 s), and so is the whole job
# (600 s); only the time from the kill to the job's end is asserted (60 s).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
export STARPU_NCPU=1
MARK="mpikill$$"
timeout 600 "${ANP_MPIRUN[@]}" -np 2 "$STARPU_ANP" train --net lenet5 --data synthetic \
  --epochs 1000 --quiet --seed 4242 --metrics "$TMP/$MARK.csv" >"$TMP/out" 2>&1 &
JOB=$!
# ranks: the pids of this job's rank processes (named starpu_anp, the mark in their arguments).
ranks() {
  local p c
  for p in $(pgrep -x starpu_anp || true); do
    c="$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null || true)"
    [[ "$c" != *"$MARK"* ]] || echo "$p"
  done
  return 0
}
# Wait until training runs (metrics rows appear), then kill one rank.
for _ in $(seq 1 300); do
  [ "$(grep -c '^train_step' "$TMP/$MARK.csv" 2>/dev/null || true)" -gt 5 ] 2>/dev/null && break
  kill -0 "$JOB" 2>/dev/null || break
  sleep 1
done
RANKS="$(ranks)"
echo "rank processes: $(echo $RANKS)"
[ "$(wc -w <<<"$RANKS")" = 2 ] || { kill "$JOB" 2>/dev/null || true; fail "expected 2 rank processes, found '$(echo $RANKS)'"; finish; }
VICTIM="$(tail -1 <<<"$RANKS")"
T0=$(date +%s)
kill -9 "$VICTIM" || fail "could not kill rank $VICTIM"
# The job must end within 60 s of the kill; one that is still running then has hung: it is ended
# here (its timeout would take minutes more) and the test fails.
while kill -0 "$JOB" 2>/dev/null && [ $(($(date +%s) - T0)) -le 60 ]; do sleep 0.5; done
if kill -0 "$JOB" 2>/dev/null; then
  fail "job still running $(($(date +%s) - T0)) s after a rank was killed (hung)"
  kill -TERM "$JOB" 2>/dev/null || true # timeout passes it on to mpirun
fi
RC=0; wait $JOB || RC=$?
T1=$(date +%s)
echo "killed rank pid $VICTIM; mpirun exited $RC after $((T1 - T0)) s"
[ "$RC" != 0 ] || fail "job exited 0 after a rank was killed"
[ $((T1 - T0)) -le 60 ] || fail "job took $((T1 - T0)) s to end"
LEFT="$(ranks)"
[ -z "$LEFT" ] || { kill -9 $LEFT 2>/dev/null || true; fail "rank processes left behind: $LEFT"; }
finish
