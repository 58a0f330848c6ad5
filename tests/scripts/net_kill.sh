#!/usr/bin/env bash
# net_kill — SIGKILL the rank on a remote host (its own network namespace) mid-run: the job
# ends with a non-zero status within 60 s, and no process is left in any host.
NET_ID=15
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$DNN_SOURCE_DIR/tests/net/testlib.sh"
export STARPU_NCPU=1
net_up 3
net_mpirun 120 "$STARPU_ANP" train --net lenet5 --data synthetic --epochs 1000 --quiet --metrics "$TMP/m.csv" \
  >"$TMP/out" 2>&1 &
JOB=$!
for _ in $(seq 1 60); do
  [ "$(grep -c '^train_step' "$TMP/m.csv" 2>/dev/null)" -gt 5 ] 2>/dev/null && break
  sleep 1
done
VICTIM="$(rank_pid 3)"
[ -n "$VICTIM" ] || { fail "no rank process on host 3"; finish; }
T0=$(date +%s)
kill -9 "$VICTIM"
RC=0; wait $JOB || RC=$?
T1=$(date +%s)
echo "killed rank 2 (pid $VICTIM, host $(host_ip 3)); mpirun exited $RC after $((T1 - T0)) s"
grep -v '^\[starpu\]' "$TMP/out" | grep -m3 -iE "signal|exited|killed" || true
[ "$RC" != 0 ] || fail "job exited 0 after a rank was killed"
[ "$RC" != 124 ] || fail "job hung (timeout)"   # (137 is mpirun reporting the SIGKILL; the time bound catches a hang)
[ $((T1 - T0)) -le 60 ] || fail "job took $((T1 - T0)) s to end"
# The other ranks get mpirun's SIGTERM as it ends and are reaped a moment later: a clean-clone CI
# once saw a pid in host 2 at mpirun's exit that was gone when listed. Each host gets 10 s to empty.
for h in 1 2 3; do
  left=""
  for _ in $(seq 50); do left="$(ip netns pids "$(host_ns "$h")" | tr '\n' ' ')"; [ -n "${left// /}" ] || break; sleep 0.2; done
  [ -z "${left// /}" ] || fail "processes left in host $h 10 s after mpirun ended: $left"
done
finish
