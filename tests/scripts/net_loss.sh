#!/usr/bin/env bash
# net_loss — 1% of the packets dropped on every link (nft in each host namespace, in and out;
# tests/net/cluster.sh loss 1): TCP retransmits, and synchronous training over 4 hosts still
# gives exactly the loss of the run without loss (tree and ring), after 20 LeNet-5 steps. The
# drop counters show that packets were indeed dropped.
NET_ID=12
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$DNN_SOURCE_DIR/tests/net/testlib.sh"
command -v nft >/dev/null || { echo "SKIP: nft not installed (Debian package nftables; scripts/bootstrap.sh installs it)"; exit 77; }
export STARPU_NCPU=1
COMMON=(train --net lenet5 --max-steps 20 --limit-train 3200 --limit-test 500 --lr-schedule constant --quiet)
REF_LINE="$("$STARPU_ANP" "${COMMON[@]}" | tail -1)" || fail "single-process run failed"
REF="$(result_field "$REF_LINE" train_loss)"
echo "1 process: train_loss=$REF"
net_up 4
bash "$NETC" loss 1 || { fail "cluster.sh loss 1 failed"; finish; }
for ar in tree ring; do
  LINE="$(set -o pipefail; net_mpirun 120 "$STARPU_ANP" "${COMMON[@]}" --allreduce "$ar" 2>"$TMP/err" | tail -1)" \
    || { tail -20 "$TMP/err" >&2; fail "4 hosts, 1% loss ($ar) failed"; continue; }
  L="$(result_field "$LINE" train_loss)"
  echo "4 hosts, 1% loss, $ar: train_loss=$L ($(result_field "$LINE" images_per_s) img/s)"
  [ "$L" = "$REF" ] || fail "1% packet loss ($ar): train_loss $L, want $REF"
done
dropped=0
for h in 1 2 3 4; do
  d="$(ip netns exec "$(host_ns "$h")" nft list table inet anploss | awk '/counter/ {for (i = 1; i < NF; i++) if ($i == "packets") s += $(i + 1)} END {print s + 0}')"
  dropped=$((dropped + d))
done
echo "packets dropped by nft over the 4 hosts: $dropped"
[ "$dropped" -gt 0 ] || fail "no packet was dropped: the loss rule did not apply"
finish
