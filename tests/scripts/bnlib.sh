# bnlib.sh — shared by the --batchnorm invariance tests (train_bn_global.sh, mpi_bn_global.sh):
# one short training run that leaves its per-step losses and its final checkpoint, and the
# comparison of two such runs. Sourced after lib.sh.
# BN_COMMON: 20 steps of batch 32 at a constant small learning rate, 0.0005 (docs/batchnorm.md):
# at 0.002 and above resnet8's trajectory forks at isolated steps under a perturbation of one float
# rounding, in local mode as in global (another conv algorithm, DNN_CONV_ALGO, moves the loss
# after 20 steps by 2e-4 at lr 0.002, by 2e-6 at 0.0005), and 20 steps would measure the fork,
# not the statistics.
# resnet20 (on synthetic data: CIFAR's 3x32x32) is more sensitive still: the same perturbation
# moves it by 8e-5 at 0.0005, 1.6e-6 at 0.0001, which it takes (bn_lr).
BN_COMMON=(train --batch 32 --max-steps 20 --limit-train 640 --no-eval --lr-schedule constant --quiet)
# BN_LR, when set, overrides it (mpi_bn_global's ghost batch).
bn_lr() { [ -n "${BN_LR:-}" ] && echo "$BN_LR" && return; [ "$1" = resnet20 ] && echo 0.0001 || echo 0.0005; }
bn_data() { [ "$1" = resnet20 ] && echo synthetic || echo fashion-mnist; }
# bn_run OUT NET [ARGS...]: trains, writes OUT.csv (metrics), OUT.ckpt; prints the result line.
# Prefix with BN_LAUNCH=(mpirun ...) for ranks.
bn_run() {
  local out="$1" net="$2"; shift 2
  timeout 600 "${BN_LAUNCH[@]}" "$STARPU_ANP" "${BN_COMMON[@]}" --net "$net" --lr "$(bn_lr "$net")" --data "$(bn_data "$net")" --metrics "$out.csv" --checkpoint "$out.ckpt" "$@" \
    2>"$out.err" | tail -1
}
# bn_compare REF RUN: "loss <max relative difference over the 20 per-step losses> params
# <||p_run - p_ref|| / ||p_ref|| over all weights and running statistics together>" (the
# optimiser's momentum is skipped: it is the gradient's running sum, compared through the
# weights; per tensor, the betas, which start at 0 and move by ~lr per step, make a relative
# norm of a value that is itself near rounding).
bn_compare() {
  local ref="$1" run="$2" dl dp
  dl="$(paste -d, "$ref.csv" "$run.csv" | awk -F, '$1 == "train_step" { d = $4 - $11; if (d < 0) d = -d; r = d / $4; if (r > m) m = r } END { printf "%.3g", m + 0 }')"
  dp="$(python3 -c 'import math, sys; sys.path.insert(0, sys.argv[1]); import ckpt_compare as c
a, b = c.load(sys.argv[2]), c.load(sys.argv[3]); d2 = r2 = 0.0
for (n, va), (_, vb) in zip(a, b):
    if n.endswith(".momentum"): continue
    d2 += sum((x - y) ** 2 for x, y in zip(va, vb)); r2 += sum(x * x for x in va)
print("%.3g" % (math.sqrt(d2 / r2)))' "$DNN_SOURCE_DIR/tests/scripts" "$ref.ckpt" "$run.ckpt")"
  echo "loss $dl params $dp"
}
