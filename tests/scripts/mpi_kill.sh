#!/usr/bin/env bash
# mpi_kill — when one rank dies mid-run, the job ends with a non-zero status within 60 s
# (no rank waits forever for the dead one's part of a reduction).
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
export STARPU_NCPU=1
MARK="mpikill$$"
timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$STARPU_ANP" train --net lenet5 --data synthetic \
  --epochs 1000 --quiet --seed 4242 --metrics "$TMP/$MARK.csv" >"$TMP/out" 2>&1 &
JOB=$!
# Wait until training runs (metrics rows appear), then kill one rank.
for _ in $(seq 1 60); do
  [ "$(grep -c '^train_step' "$TMP/$MARK.csv" 2>/dev/null || echo 0)" -gt 5 ] && break
  sleep 1
done
VICTIM="$(pgrep -f "starpu_anp train .*$MARK" | tail -1)"
[ -n "$VICTIM" ] || { kill $JOB 2>/dev/null; fail "no rank process found"; finish; }
T0=$(date +%s)
kill -9 "$VICTIM"
wait $JOB; RC=$?
T1=$(date +%s)
echo "killed rank pid $VICTIM; mpirun exited $RC after $((T1 - T0)) s"
[ "$RC" != 0 ] || fail "job exited 0 after a rank was killed"
[ "$RC" != 124 ] || fail "job hung (timeout)"
[ $((T1 - T0)) -le 60 ] || fail "job took $((T1 - T0)) s to end"
pgrep -f "starpu_anp train .*$MARK" >/dev/null && { pkill -9 -f "starpu_anp train .*$MARK"; fail "rank processes left behind"; }
finish
