# bnlib.sh — shared by the --batchnorm invariance tests (train_bn_global.sh, mpi_bn_global.sh):
# one short training run that leaves its per-step losses and its final checkpoint, and the
# comparison of two such runs. Sourced after lib.sh.
# BN_COMMON: 20 steps of batch 32 at a constant small learning rate (docs/batchnorm.md says why
# 0.002: at 0.01-0.05 the trajectories of resnet8 fork at isolated steps, in local mode as in
# global, under perturbations of one float rounding, and then 20 steps measure the fork, not the
# statistics).
BN_COMMON=(train --batch 32 --max-steps 20 --limit-train 640 --no-eval --lr-schedule constant --lr 0.002 --quiet)
# bn_run OUT NET [ARGS...]: trains, writes OUT.csv (metrics), OUT.ckpt; prints the result line.
# Prefix with BN_LAUNCH=(mpirun ...) for ranks.
bn_run() {
  local out="$1" net="$2"; shift 2
  timeout 600 "${BN_LAUNCH[@]}" "$STARPU_ANP" "${BN_COMMON[@]}" --net "$net" --metrics "$out.csv" --checkpoint "$out.ckpt" "$@" \
    2>"$out.err" | tail -1
}
# bn_compare REF RUN: "loss <max relative difference over the 20 per-step losses> params
# <worst per-tensor relative norm difference of the weights and running statistics>" (the
# optimiser's momentum is skipped: it is the gradient's running sum, compared through the weights).
bn_compare() {
  local ref="$1" run="$2" dl dp
  dl="$(paste -d, "$ref.csv" "$run.csv" | awk -F, '$1 == "train_step" { d = $4 - $11; if (d < 0) d = -d; r = d / $4; if (r > m) m = r } END { printf "%.3g", m + 0 }')"
  dp="$(python3 "$DNN_SOURCE_DIR/tests/scripts/ckpt_compare.py" "$ref.ckpt" "$run.ckpt" .momentum | tail -1 | awk '{print $3}')"
  echo "loss $dl params $dp"
}
