#!/usr/bin/env bash
# mpi_clip — --clip-grad-norm across ranks (sync): every rank takes the norm of the all-reduced
# gradients (graph/dist.c: every all-reduce, then the clipping tasks, then the updates), so the
# run equals the single-process one with the same global batch. lenet5, global batch 96, 20
# steps, X = 0.1 (every step clips: each step's grad_norm is above it), over 2 ranks with the
# tree, the ring and rhd, 3 ranks with the tree and the ring, 4 with rhd, and with gradient
# buckets (a ring bucket, a tree bucket):
#   - against one process in one chunk: train_loss and every step's grad_norm (rank 0's metrics)
#     within TOL = 1e-6 relative, the tolerance mpi_sync holds unclipped runs to (the all-reduce
#     adds in another order: float reassociation), and the parameters (rank 0's checkpoint; a
#     rank that clipped with another coefficient would train its replica elsewhere, and its
#     shard's loss with it) within TOL_P = 1e-5 relative in norm per tensor: measured 6.9e-7 at
#     worst (c1.weight, 2 ranks), 1.4e-7 elsewhere;
#   - against one process in N chunks (N ranks of one chunk each): byte-identical checkpoints
#     where the all-reduce adds the ranks as the chunks' fixed tree adds the chunks (2 ranks with
#     every algorithm, 3 with the tree), within TOL_P otherwise (measured up to 6.9e-7 at 4 rhd).
# Negative control: the same runs without clipping (1 process, 2 ranks) are further than TOL
# from the clipped reference, so the comparisons see the coefficient. --mode async refuses
# clipping.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
export STARPU_NCPU=1
TOL=1e-6
TOL_P=1e-5
X=0.1
COMMON=(train --net lenet5 --max-steps 20 --limit-train 3200 --no-eval --lr-schedule constant --quiet --batch 96)
CMP="$DNN_SOURCE_DIR/tests/scripts/ckpt_compare.py"

# go TAG NP ARGS...: the run of COMMON ARGS over NP ranks (1: no mpirun), its checkpoint and
# metrics in $TMP/TAG.*; its train_loss in L. Status 1 (stderr shown, one FAIL) when it failed.
go() {
  local tag="$1" np="$2" rc=0 line; shift 2
  local launch=(); [ "$np" = 1 ] || launch=(timeout 300 "${ANP_MPIRUN[@]}" -np "$np")
  line="$("${launch[@]}" "$STARPU_ANP" "${COMMON[@]}" --checkpoint "$TMP/$tag.ckpt" --metrics "$TMP/$tag.csv" "$@" \
    2>"$TMP/$tag.err" | tail -1)" || rc=$?
  if [ "$rc" != 0 ]; then cat "$TMP/$tag.err" >&2; fail "$tag: $np rank(s) failed (exit $rc)"; return 1; fi
  L="$(result_field "$line" train_loss)" || { fail "$tag: result line: $line"; return 1; }
}
# norms_close REF TAG: every step's grad_norm within TOL relative (and as many steps).
norms_close() {
  local msg
  msg="$(paste -d, <(awk -F, '$1 == "train_step" { print $8 }' "$TMP/$1.csv") \
                   <(awk -F, '$1 == "train_step" { print $8 }' "$TMP/$2.csv") | awk -F, -v tol="$TOL" -v x="$X" '
    { n++; if ($1 == "" || $2 == "") { printf "step %d: no grad_norm (%s, %s)", n, $1, $2; exit 1 }
      if (!($1 > x)) { printf "step %d: norm %s not above X = %s (the test must clip)", n, $1, x; exit 1 }
      d = $1 - $2; if (d < 0) d = -d; if (d > tol * $1) { printf "step %d: %s vs %s", n, $1, $2; exit 1 } }
    END { if (n != 20) { printf "%d steps, want 20", n; exit 1 } }')" || fail "$2: grad_norm vs $1: $msg"
}
# params_close REF TAG: the worst per-tensor relative norm of the difference within TOL_P.
params_close() {
  local out worst
  out="$(python3 "$CMP" "$TMP/$1.ckpt" "$TMP/$2.ckpt" .momentum | tail -1)" || { fail "$2: checkpoint comparison: $out"; return; }
  worst="$(awk '{ print $3 }' <<<"$out")"
  echo "    parameters vs $1: $out"
  fcmp "$worst <= $TOL_P" || fail "$2: parameters differ from $1's by $worst relative (> $TOL_P)"
}
near() { fcmp "($L - $2) <= $TOL * $2 && ($2 - $L) <= $TOL * $2"; }

go ref 1 --clip-grad-norm "$X" || finish
REF="$L"
for k in 2 3 4; do go "ref$k" 1 --clip-grad-norm "$X" --chunks "$k" || finish; done
go ref_noclip 1 || finish
echo "1 process: train_loss=$REF clipped, $L without clipping"
near noclip "$REF" && fail "clipping moves train_loss by less than $TOL relative ($REF vs $L): the comparisons could not see it"

#          ranks same-bits-as-N-chunks args
for spec in "2 1 --allreduce tree" "2 1 --allreduce ring" "2 1 --allreduce rhd" "3 1 --allreduce tree" \
  "3 0 --allreduce ring" "4 0 --allreduce rhd" "2 1 --allreduce ring --bucket-mb 0.004" "3 1 --allreduce tree --bucket-mb 1"; do
  read -r np bits args <<<"$spec"
  tag="r$np${args// /}"; tag="${tag//-/}"
  # shellcheck disable=SC2086 # args: words
  go "$tag" "$np" --clip-grad-norm "$X" $args || continue
  echo "$np ranks $args: train_loss=$L"
  near "$tag" "$REF" || fail "$np ranks $args: train_loss $L vs one process's $REF (tolerance $TOL relative)"
  norms_close ref "$tag"
  params_close ref "$tag"
  if [ "$bits" = 1 ]; then
    if cmp -s "$TMP/ref$np.ckpt" "$TMP/$tag.ckpt"; then echo "    byte-identical to one process in $np chunks"
    else fail "$np ranks $args: checkpoint not byte-identical to one process's in $np chunks"; fi
  else
    params_close "ref$np" "$tag"
  fi
done
# Negative control over ranks: without clipping, 2 ranks end far from the clipped reference.
if go r2_noclip 2 --allreduce tree; then
  near r2_noclip "$REF" && fail "2 ranks without clipping within $TOL of the clipped reference: the comparisons cannot see clipping"
  echo "2 ranks without clipping: train_loss=$L (not the clipped $REF: the comparisons see the coefficient)"
fi
expect_rc 2 timeout 120 "${ANP_MPIRUN[@]}" -np 2 "$STARPU_ANP" "${COMMON[@]}" --mode async --clip-grad-norm "$X"
[[ "$ERR" == *"--clip-grad-norm"*"--mode async"* ]] || fail "async with clipping: the error does not say why: $ERR"
finish
