#!/usr/bin/env bash
# net_sync — synchronous training across 2 and 4 "hosts" (network namespaces on a bridge,
# tests/net/cluster.sh; Open MPI over TCP only: btl tcp,self, no shared memory between ranks)
# equals the single-process run: train_loss within TOL relative after 20 LeNet-5 steps, tree
# and ring all-reduce, and the default (--allreduce auto), which on ranks of different hosts is
# rhd at 2 and 4 hosts (same runs and tolerance as mpi_sync); the tree per tensor (--bucket-mb 0),
# the default and the ring with the default buckets (auto: a quarter of the gradients across
# hosts, checked on the result line). The traffic really crosses the
# links: the bytes each host's link sent during a run match what StarPU-MPI says its rank sent
# (STARPU_MPI_STATS=1), within the TCP/IP and Open MPI framing and the launch (OVERHEAD).
NET_ID=11
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$DNN_SOURCE_DIR/tests/net/testlib.sh"
export STARPU_NCPU=1
TOL=5e-6
# Measured: link bytes / StarPU-MPI bytes = 1.013 (2 hosts, tree), ~1.02 at 4 hosts (headers of
# TCP segments coalesced by GSO, ob1 fragment headers, ACKs, the job's launch and output).
OVERHEAD=1.10
COMMON=(train --net lenet5 --max-steps 20 --limit-train 3200 --limit-test 500 --lr-schedule constant --quiet)
REF_LINE="$("$STARPU_ANP" "${COMMON[@]}" | tail -1)" || fail "single-process run failed"
REF="$(result_field "$REF_LINE" train_loss)"
echo "1 process: train_loss=$REF"
for np in 2 4; do
  net_up "$np"
  for ar in default tree ring; do
    before=(); for h in $(seq 1 "$np"); do before[$h]="$(tx_bytes "$h")"; done
    # The tree per tensor (--bucket-mb 0); the default and the ring with the default buckets.
    ARG=(); [ "$ar" = default ] || ARG=(--allreduce "$ar"); [ "$ar" != tree ] || ARG+=(--bucket-mb 0)
    LINE="$(set -o pipefail; net_mpirun 120 -x STARPU_MPI_STATS=1 "$STARPU_ANP" "${COMMON[@]}" "${ARG[@]}" 2>"$TMP/err" | tail -1)" \
      || { tail -20 "$TMP/err" >&2; fail "$np hosts ($ar) failed"; continue; }
    L="$(result_field "$LINE" train_loss)"
    echo "$np hosts, $ar all-reduce: train_loss=$L ($(result_field "$LINE" allreduce), buckets of $(result_field "$LINE" bucket_mb) MiB, $(result_field "$LINE" allreduces) all-reduces per step, $(result_field "$LINE" images_per_s) img/s)"
    [ "$(result_field "$LINE" ranks)" = "$np" ] || fail "result line says ranks=$(result_field "$LINE" ranks)"
    # auto on ranks of different hosts: rhd for a power-of-two count (graph/dist.h)
    [ "$(result_field "$LINE" allreduce)" = "$([ "$ar" = default ] && echo rhd || echo "$ar")" ] \
      || fail "$np hosts ($ar): result line says allreduce=$(result_field "$LINE" allreduce)"
    fcmp "($L - $REF) <= $TOL * $REF && ($REF - $L) <= $TOL * $REF" || fail "$np hosts ($ar): train_loss $L vs $REF (tolerance $TOL relative)"
    # --bucket-mb auto across hosts: a quarter of lenet5's 61706 gradient floats (under 1 MiB),
    # 61706 * 4 / 4 B = 0.0588474 MiB, i.e. 15426 floats: every tensor but fc1's weight (48000
    # floats, alone) in one bucket, 2 all-reduces per step (graph/dist.h dnn_dist_choose_bucket_mb).
    bmb="$(result_field "$LINE" bucket_mb)" nar="$(result_field "$LINE" allreduces)"
    if [ "$ar" = tree ]; then
      [ "$bmb" = 0 ] && [ "$nar" = 10 ] || fail "$np hosts (tree, --bucket-mb 0): bucket_mb=$bmb allreduces=$nar, expected 0 and 10"
    else
      fcmp "$bmb > 0.05884 && $bmb < 0.05885" && [ "$nar" = 2 ] \
        || fail "$np hosts ($ar, default buckets): bucket_mb=$bmb allreduces=$nar, expected 0.0588474 and 2"
    fi
    # Rank r runs on host r+1 (hostfile order, one slot each): each link's bytes vs its rank's.
    for h in $(seq 1 "$np"); do
      link=$(( $(tx_bytes "$h") - before[h] ))
      mpi="$(sed -n "s/^\[starpu_comm_stats\]\[$((h - 1))\] TOTAL:[[:space:]]*\([0-9]*\)\..*/\1/p" "$TMP/err")"
      [ -n "$mpi" ] && [ "$mpi" -gt 0 ] || { fail "$np hosts ($ar): no STARPU_MPI_STATS total for rank $((h - 1))"; continue; }
      ratio="$(awk -v a="$link" -v b="$mpi" 'BEGIN { printf "%.4f", a / b }')"
      echo "  rank $((h - 1)) (host $(host_ip "$h")): StarPU-MPI sent $mpi B, its link sent $link B (x$ratio)"
      fcmp "$ratio >= 1 && $ratio <= $OVERHEAD" || fail "$np hosts ($ar): rank $((h - 1)) link/MPI bytes $ratio outside [1, $OVERHEAD]"
    done
  done
  bash "$NETC" down
done
finish
