#!/usr/bin/env bash
# net_cutoff — a host cut off mid-run across 3 hosts (network namespaces; tests/net/cluster.sh)
# must not hang the job: it ends with a non-zero status within 60 s and the output names the
# unreachable host, and the last checkpoint (written by rank 0 every 20 steps) survives intact
# (the checkpoint reader accepts it and a single process resumes from it).
#   1. host 2's link goes down (ip link set down): Open MPI's launcher loses its TCP peer;
#      cluster.sh's mpirun sets oob_tcp keepalive (5 s idle, 3 probes 2 s apart), so mpirun
#      says "lost communication with a remote daemon ... on node <host>" after ~11 s.
#   2. host 3 is partitioned by nft (everything in and out of its link dropped): the same.
#   3. host 2's rank is stopped (SIGSTOP: host and network alive, no progress): Open MPI sees
#      nothing wrong, and the app's own bound, --step-timeout 10, ends the job, naming the
#      stalled step and the rank and host that stop it. (In 1 and 2 --step-timeout is 20 s, so
#      that Open MPI, which names the lost host, comes first; when the app's bound fires first,
#      the job still ends in time thanks to the short tcp_retries2, but the lines then name the
#      ranks that stopped waiting, not the one that is gone.)
NET_ID=14
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$DNN_SOURCE_DIR/tests/net/testlib.sh"
export STARPU_NCPU=1
CK_READER="$DNN_SOURCE_DIR/tests/scripts/ckpt_compare.py"
ARGS=(train --net lenet5 --limit-train 6400 --epochs 1000 --no-eval --lr-schedule constant)
scenario() { # NAME ACTION... : run, cut when 50 steps are done, check the end
  local name="$1"; shift
  net_up 3
  rm -f "$TMP/ck" "$TMP/m.csv"
  net_mpirun 120 "$STARPU_ANP" "${ARGS[@]}" --step-timeout "$STEP_TIMEOUT" --checkpoint "$TMP/ck" --checkpoint-every 20 \
    --metrics "$TMP/m.csv" >"$TMP/out" 2>&1 &
  local job=$! rc t0 t1
  for _ in $(seq 1 90); do
    [ "$(grep -c '^train_step' "$TMP/m.csv" 2>/dev/null)" -gt 50 ] 2>/dev/null && break
    sleep 1
  done
  [ -s "$TMP/ck" ] || { fail "$name: no checkpoint after 50 steps"; kill $job; wait $job; return; }
  t0=$(date +%s)
  "$@"
  rc=0; wait $job || rc=$?
  t1=$(date +%s)
  tr '\r' '\n' <"$TMP/out" | grep -E "lost communication|Remote daemon|--step-timeout|MPI_ABORT was" | sed "s/^/  [$name] /" || true
  echo "$name: mpirun exited $rc after $((t1 - t0)) s"
  [ "$rc" != 0 ] || fail "$name: the job exited 0"
  [ "$rc" != 124 ] || fail "$name: the job hung (timeout)"
  [ $((t1 - t0)) -le 60 ] || fail "$name: the job took $((t1 - t0)) s to end"
  grep -q -- "$WANT" "$TMP/out" || fail "$name: the output does not name '$WANT'"
  # The last checkpoint: readable, and a single process resumes from it.
  python3 "$CK_READER" "$TMP/ck" "$TMP/ck" >"$TMP/ckr" 2>&1 || { cat "$TMP/ckr" >&2; fail "$name: checkpoint unreadable"; }
  local step; step="$(python3 -c 'import struct,sys; b=open(sys.argv[1],"rb").read(); print(struct.unpack_from("<Q", b, 24)[0])' "$TMP/ck")"
  [ "$step" -ge 20 ] || fail "$name: checkpoint at step '$step', want one of step 20 or later"
  "$STARPU_ANP" "${ARGS[@]}" --resume "$TMP/ck" --max-steps $((step + 2)) --quiet >"$TMP/res" 2>&1 \
    || { tail -3 "$TMP/res" >&2; fail "$name: resuming from the step-$step checkpoint failed"; }
  echo "$name: checkpoint of step $step intact (read, resumed to step $(result_field "$(tail -1 "$TMP/res")" steps))"
  bash "$NETC" down
}
NET_BASE="10.213.$NET_ID"
# 1 and 2: Open MPI's keepalive (~11 s) names the host before the app's bound (20 s) fires.
STEP_TIMEOUT=20
WANT="on node $NET_BASE.2"; scenario "link down" bash "$NETC" linkdown 2
WANT="on node $NET_BASE.3"; scenario "nft partition" bash "$NETC" cut 3
STEP_TIMEOUT=10
stop_rank() { kill -STOP "$(rank_pid 2)"; }
WANT="has not completed in 10 s (--step-timeout)"; scenario "rank stopped" stop_rank
finish
