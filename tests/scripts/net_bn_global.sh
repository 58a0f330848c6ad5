#!/usr/bin/env bash
# net_bn_global — --batchnorm global across 4 "hosts" (network namespaces, tests/net/cluster.sh;
# Open MPI over TCP only), where the statistics' cross-rank sums go through the binary reduction
# tree (graph/dist.c dnn_dist_mpi_redux: ranks on different hosts) and not the flat one that
# mpi_bn_global's ranks on one machine use: resnet8, 20 steps, 2 chunks per rank, the tree and
# the default (rhd) all-reduce; per-step losses and final parameters equal one process with one
# chunk within TOL relative (mpi_bn_global's bound and runs, docs/batchnorm.md).
NET_ID=18
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/bnlib.sh"
source "$DNN_SOURCE_DIR/tests/net/testlib.sh"
export STARPU_NCPU=1 STARPU_SCHED=lws
TOL=1e-5
BN_LAUNCH=()
LINE="$(bn_run "$TMP/ref" resnet8 --chunks 1 --batchnorm global)" || { cat "$TMP/ref.err" >&2; fail "1 process failed"; finish; }
net_up 4
for ar in tree default; do
  ARG=(); [ "$ar" = default ] || ARG=(--allreduce "$ar")
  BN_LAUNCH=(timeout -k 5 300 bash "$NETC" mpirun --bind-to none -x STARPU_NCPU=1 -x STARPU_SCHED)
  LINE="$(bn_run "$TMP/run" resnet8 --chunks 2 --batchnorm global "${ARG[@]}")" || { tail -20 "$TMP/run.err" >&2; fail "4 hosts ($ar) failed"; continue; }
  [ "$(result_field "$LINE" ranks)" = 4 ] && [ "$(result_field "$LINE" batchnorm)" = global ] || fail "4 hosts ($ar): result line: $LINE"
  bn_compare "$TMP/ref" "$TMP/run" || continue
  DL="$BN_DL" DP="$BN_DP"
  echo "global statistics, 4 hosts x 2 chunks, $(result_field "$LINE" allreduce) all-reduce, vs 1 process x 1 chunk: loss $DL params $DP"
  fcmp "$DL <= $TOL && $DP <= $TOL" || fail "4 hosts ($ar): loss $DL, params $DP > $TOL"
done
finish
