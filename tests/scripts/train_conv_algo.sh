#!/usr/bin/env bash
# train_conv_algo — DNN_CONV_ALGO=im2col|winograd|winograd4|auto (codelets/conv2d.c: the CPU algorithm of
# 3x3 stride-1 convs) gives the same training, as the README says ("results are the same either
# way"). ResNet-8 has 3x3 stride-1 convs at 1, 16, 32 and 64 channels: `auto` takes Winograd for
# the 16-64 channel ones (WINO_RULE; their forward and backward data as F(4x4), WINO4_RULE),
# `winograd` F(2x2) for all of them (the stem's C = 1 too), `winograd4` the same with F(4x4)
# forward and backward data, `im2col` for none. The same 3 steps with each; compared: every step's loss (--metrics) and every
# parameter tensor of the final checkpoint (weights, biases, batch-norm gamma/beta; not the
# momentum or running statistics), per tensor ||a - b|| / ||a|| and max|a - b| / max|a|
# (tests/scripts/ckpt_compare.py). The runs must also differ somewhere, else the variable did not
# reach the kernels and the comparison would prove nothing; and a bad value warns.
#
# Measured (Fashion-MNIST, batch 32, 2 chunks, STARPU_NCPU 1 and 2, 3 steps): step losses
# identical to the printed 6 decimals; worst tensor 4.2e-6 relative (stem_bn.beta, whose values
# are ~1e-3), conv weights <= 2.7e-7; 9-10 of 31 tensors bit-identical (the dense layers at the
# end are not). Bounds: tensors 1e-4 (24x the worst), losses 1e-5 relative (~20 print quanta).
# Why 3 steps: the float differences of two algorithms grow about tenfold per step from the
# 3rd on (rounding differences in tiny batch-norm betas, amplified by momentum): at 10 steps a
# batch-norm beta differed by 7% and the loss by 1.3e-3 between im2col and auto, which says
# nothing about the kernels (their own errors are checked in unit_conv2d_winograd).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
command -v python3 >/dev/null || { echo "SKIP: no python3 for the checkpoint comparison"; exit 77; }
CMP="$(dirname "$0")/ckpt_compare.py"
export STARPU_NCPU="${STARPU_NCPU:-1}"
RUN=(train --net resnet8 --batch 32 --chunks 2 --max-steps 3 --limit-train 1024 --limit-test 256
     --lr-schedule constant --quiet)
TOL_P=1e-4
TOL_L=1e-5
for algo in im2col winograd winograd4 auto; do
  LINE="$(DNN_CONV_ALGO=$algo "$STARPU_ANP" "${RUN[@]}" --metrics "$TMP/$algo.csv" --checkpoint "$TMP/$algo.ckpt" \
          2>"$TMP/$algo.err" | tail -1)" || { cat "$TMP/$algo.err" >&2; fail "DNN_CONV_ALGO=$algo: training failed"; continue; }
  echo "DNN_CONV_ALGO=$algo: train_loss=$(result_field "$LINE" train_loss)"
  [ -s "$TMP/$algo.err" ] && grep -q DNN_CONV_ALGO "$TMP/$algo.err" && fail "DNN_CONV_ALGO=$algo warned: $(cat "$TMP/$algo.err")"
done
for pair in "im2col winograd" "im2col winograd4" "im2col auto" "winograd auto"; do
  set -- $pair
  [ -s "$TMP/$1.ckpt" ] && [ -s "$TMP/$2.ckpt" ] || continue
  OUT="$(python3 "$CMP" "$TMP/$1.ckpt" "$TMP/$2.ckpt" .momentum .running)" || { fail "$1 vs $2: comparison failed: $OUT"; continue; }
  SUM="$(tail -1 <<<"$OUT")"
  echo "$1 vs $2: $SUM"
  # worst rel_norm R (name) rel_max M (name) identical_tensors K of N
  read -r _ _ RN _ _ RM _ _ K _ N <<<"$SUM"
  fcmp "$RN <= $TOL_P && $RM <= $TOL_P" || fail "$1 vs $2: parameters differ by $RN (norm) / $RM (max) relative > $TOL_P: $SUM"
  if [ "$1" = im2col ]; then
    [ "$K" -lt "$N" ] || fail "$1 vs $2: all $N tensors bit-identical: DNN_CONV_ALGO=$2 did not change the algorithm"
  fi
  # every step's loss
  BAD="$(paste -d, "$TMP/$1.csv" "$TMP/$2.csv" | awk -F, -v tol="$TOL_L" '
    $1 == "train_step" { b = $(NF / 2 + 4); d = $4 - b; if (d < 0) d = -d; if (d > tol * $4) printf "step %s: %s vs %s; ", $3, $4, b; n++ }
    END { if (n == 0) print "no train_step rows" }')"
  [ -z "$BAD" ] || fail "$1 vs $2: step losses differ by more than $TOL_L relative: $BAD"
done
# A value that is not an algorithm: a usage error at start-up (exit 2, one line naming the
# variable and the algorithms; runtime/knobs.c), as for every DNN_* knob (bad_env).
rc=0
DNN_CONV_ALGO=bogus "$STARPU_ANP" train --net resnet8 --batch 32 --chunks 2 --max-steps 1 --limit-train 256 \
  --limit-test 64 --quiet >/dev/null 2>"$TMP/bogus.err" || rc=$?
[ "$rc" = 2 ] || fail "DNN_CONV_ALGO=bogus: exit $rc, want 2 (stderr: $(head -3 "$TMP/bogus.err"))"
[ "$(cat "$TMP/bogus.err")" = "error: DNN_CONV_ALGO=bogus: expected auto, im2col, winograd, winograd4 or onednn" ] \
  || fail "DNN_CONV_ALGO=bogus: not the one line (stderr: $(head -3 "$TMP/bogus.err"))"
finish
