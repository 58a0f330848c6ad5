#!/usr/bin/env bash
# net_gpt — mpi_gpt across "hosts": gpt-tiny trained data-parallel over 2 and 4 network
# namespaces on a bridge (tests/net/cluster.sh; Open MPI over TCP only, no shared memory between
# ranks) equals one process in one chunk within TOL = 1e-6 (the loss at each of 8 AdamW steps and
# every tensor of the final checkpoint, max relative difference per tensor: tests/scripts/gptlib.sh),
# with the default all-reduce (auto: rhd across hosts at 2 and 4) and default buckets (auto: a
# quarter of the gradients across hosts), and the tree, the ring and rhd each with one all-reduce
# per tensor (--bucket-mb 0) and with 0.02 MiB buckets; the parameters within TOL_P = 5e-5 per
# tensor (gptlib.sh). The bytes are those of the same run on one node (the algorithm fixes the
# order of the sums, not the transport): the tree's, and at 2 hosts every algorithm's, are one
# process's in N chunks; the others at 4 hosts are compared with the same mpirun on one node.
NET_ID=20
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$DNN_SOURCE_DIR/tests/net/testlib.sh"
export STARPU_NCPU=1
source "$(dirname "$0")/gptlib.sh"

gpt_go ref -- --chunks 1 || finish
for k in 2 4; do gpt_go "k$k" -- --chunks "$k" || finish; done
echo "1 process: train_loss=$(result_field "$LINE" train_loss)"
for np in 2 4; do
  net_up "$np"
  #         algorithm MiB (- : the default)
  for spec in "- -" "tree 0" "tree 0.02" "ring 0" "ring 0.02" "rhd 0" "rhd 0.02"; do
    read -r ar mb <<<"$spec"
    ARG=(); [ "$ar" = - ] || ARG+=(--allreduce "$ar"); [ "$mb" = - ] || ARG+=(--bucket-mb "$mb")
    tag="h$np-$ar-$mb"
    gpt_go "$tag" net_mpirun 120 -- --chunks 1 "${ARG[@]}" || continue
    got="$(result_field "$LINE" allreduce)" bmb="$(result_field "$LINE" bucket_mb)" nar="$(result_field "$LINE" allreduces)"
    [ "$(result_field "$LINE" ranks)" = "$np" ] || fail "$tag: result line says ranks=$(result_field "$LINE" ranks)"
    [ "$got" = "$([ "$ar" = - ] && echo rhd || echo "$ar")" ] || fail "$tag: result line says allreduce=$got"
    [ "$mb" = - ] || [ "$bmb" = "$mb" ] || fail "$tag: result line says bucket_mb=$bmb"
    if [ "$mb" = 0 ]; then [ "$nar" = 28 ] || fail "$tag: $nar all-reduces per step, want one per tensor (28)"
    else [ -n "$nar" ] && [ "$nar" -lt 28 ] || fail "$tag: $nar all-reduces per step, want fewer than 28 tensors"; fi
    gpt_close ref "$tag" || continue
    same=0; cmp -s "$TMP/k$np.ckpt" "$TMP/$tag.ckpt" && same=1
    echo "$np hosts, $got, buckets of $bmb MiB ($nar all-reduces/step): loss $WL, parameters $WP ($WT), key bias $WK; same bytes as $np chunks: $same"
    if [ "$got" = tree ] || [ "$np" = 2 ]; then
      [ "$same" = 1 ] || fail "$tag: not byte-identical to one process in $np chunks"
    elif gpt_go "$tag-local" timeout 300 "${ANP_MPIRUN[@]}" -np "$np" -- --chunks 1 --allreduce "$got" --bucket-mb "$bmb"; then
      cmp -s "$TMP/$tag.ckpt" "$TMP/$tag-local.ckpt" || fail "$tag: not byte-identical to the same run on one node"
      echo "  byte-identical to the same $np ranks on one node"
    fi
  done
  bash "$NETC" down
done
finish
