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
# bn_compare REF RUN: sets BN_DL, the max relative difference over the per-step losses, and
# BN_DP, ||p_run - p_ref|| / ||p_ref|| over all weights and running statistics together (the
# optimiser's momentum is skipped: it is the gradient's running sum, compared through the
# weights; per tensor, the betas, which start at 0 and move by ~lr per step, make a relative
# norm of a value that is itself near rounding). The two runs must have logged the same steps,
# at least one (an empty or truncated CSV would otherwise compare as equal), and checkpoints with
# the same tensors, at least one; if not, it fails (one line) and returns 1, BN_DL and BN_DP empty.
bn_steps() { [ -f "$1" ] && awk -F, '$1 == "train_step"' "$1" || true; }
bn_compare() {
  local ref="$1" run="$2" nref nrun out
  BN_DL="" BN_DP=""
  nref="$(bn_steps "$ref.csv" | wc -l)" nrun="$(bn_steps "$run.csv" | wc -l)"
  if [ "$nref" -eq 0 ] || [ "$nref" != "$nrun" ]; then
    fail "bn_compare: $ref.csv has $nref train_step rows, $run.csv $nrun: want the same number, more than 0"
    return 1
  fi
  # Row by row: the same step number (column 3), the loss (column 4) relative to the reference's
  # (the second file's columns start at NF/2 + 1, whatever columns the CSV has).
  out="$(paste -d, <(bn_steps "$ref.csv") <(bn_steps "$run.csv") | awk -F, '
    { h = NF / 2 }
    $3 != $(h + 3) || !($4 > 0) { printf "row %d: step %s loss %s vs step %s", NR, $3, $4, $(h + 3); bad = 1; exit }
    { d = $4 - $(h + 4); if (d < 0) d = -d; r = d / $4; if (r > m) m = r }
    END { if (!bad) printf "%.3g", m + 0; exit bad }')" || { fail "bn_compare: $ref.csv and $run.csv: $out"; return 1; }
  BN_DL="$out"
  out="$(python3 -c 'import math, sys; sys.path.insert(0, sys.argv[1]); import ckpt_compare as c
a, b = c.load(sys.argv[2]), c.load(sys.argv[3]); d2 = r2 = 0.0
if not a or [(n, len(v)) for n, v in a] != [(n, len(v)) for n, v in b]:
    sys.exit("%d tensors vs %d, or not the same names and sizes" % (len(a), len(b)))
for (n, va), (_, vb) in zip(a, b):
    if n.endswith(".momentum"): continue
    d2 += sum((x - y) ** 2 for x, y in zip(va, vb)); r2 += sum(x * x for x in va)
if not r2 > 0: sys.exit("the reference parameters are all zero")
print("%.3g" % (math.sqrt(d2 / r2)))' "$DNN_SOURCE_DIR/tests/scripts" "$ref.ckpt" "$run.ckpt" 2>&1)" \
    || { fail "bn_compare: $ref.ckpt vs $run.ckpt: ${out##*$'\n'}"; BN_DL=""; return 1; }
  BN_DP="$out"
}
