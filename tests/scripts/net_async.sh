#!/usr/bin/env bash
# net_async — mixed-asynchronous training across 2 hosts (network namespaces, TCP only;
# tests/net/cluster.sh) learns: one Fashion-MNIST epoch of LeNet-5 with the default staleness
# bound (S = 4, lookahead on) reaches a test accuracy within 0.02 of synchronous training with
# the same settings across the same hosts (mpi_async's settings and bound), and the staleness
# observed never exceeds the bound.
NET_ID=13
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$DNN_SOURCE_DIR/tests/net/testlib.sh"
export STARPU_NCPU=1
net_up 2
run() { set -o pipefail; net_mpirun 300 "$STARPU_ANP" train --net lenet5 --quiet "$@" 2>"$TMP/err" | tail -1; }
SYNC="$(run --mode sync)" || { tail -20 "$TMP/err" >&2; fail "sync run failed"; finish; }
ASYNC="$(run --mode async)" || { tail -20 "$TMP/err" >&2; fail "async run failed"; finish; }
SA="$(result_field "$SYNC" test_accuracy)"; AA="$(result_field "$ASYNC" test_accuracy)"
echo "2 hosts, sync:      test_accuracy=$SA images_per_s=$(result_field "$SYNC" images_per_s) wall_s=$(result_field "$SYNC" wall_s)"
echo "2 hosts, async S=4: test_accuracy=$AA images_per_s=$(result_field "$ASYNC" images_per_s) wall_s=$(result_field "$ASYNC" wall_s) staleness_mean=$(result_field "$ASYNC" staleness_mean) staleness_max=$(result_field "$ASYNC" staleness_max)"
[ "$(result_field "$ASYNC" mode)" = async ] || fail "result line mode=$(result_field "$ASYNC" mode)"
[ "$(result_field "$ASYNC" ranks)" = 2 ] || fail "result line ranks=$(result_field "$ASYNC" ranks)"
fcmp "$AA >= $SA - 0.02" || fail "async accuracy $AA is more than 0.02 below sync's $SA"
fcmp "$(result_field "$ASYNC" staleness_max) <= 4" || fail "staleness $(result_field "$ASYNC" staleness_max) > 4"
finish
