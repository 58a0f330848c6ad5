#!/usr/bin/env bash
# train_fusion — the fused task graph (batchnorm+relu in one task, a relu in its maxpool's tasks,
# residual-add gradients sharing the add's handle, conv+bias in one task, at level 3 batch norm inside the convs;
# graph/fuse.c dnn_fuse_plan) trains exactly as the unfused
# one (DNN_FUSE=0) and submits fewer tasks per step. On one CPU worker the two runs execute the
# same float operations in the same order, so the losses must match to the printed digits; on
# two workers only the gradient reductions' order may differ (1e-3, as train_schedulers).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
# A net with the awkward cases: a fused relu read by three nodes (joins an add's gradient as the
# input with other consumers), a fused relu whose only consumer is an add (keeps its copy), an
# add with three inputs, a chain of single-consumer adds, an add that lists one input twice.
cat >"$TMP/edge.net" <<'NET'
input x 1 28 28
conv c1 x out=8 k=3 pad=1
batchnorm b1 c1
relu r1 b1
conv c2 r1 out=8 k=3 pad=1
batchnorm b2 c2
add add1 b2,r1
conv c3 add1 out=8 k=3 pad=1
batchnorm b3 c3
relu r3 b3
conv c4 add1 out=8 k=1
batchnorm b4 c4
add add2 r3,add1,b4
conv c6 r1 out=8 k=1
batchnorm b6 c6
add add3 add2,b6
add add4 add3,add3
relu out add4
avgpool pool out
dense fc pool out=10
softmax_xent loss fc
NET
# relu+maxpool: a fused pair with overlapping windows (k=3 s=2 pad=1: the general loops), a relu
# read by two nodes (not fused), and a fused pair on an odd-sized image behind a residual add.
cat >"$TMP/pool.net" <<'NET'
input x 1 28 28
conv c1 x out=6 k=3 pad=1
relu r1 c1
maxpool p1 r1 k=3 stride=2 pad=1
conv c2 p1 out=8 k=3 pad=1
relu r2 c2
maxpool p2 r2 k=2
conv c3 r2 out=8 k=1 stride=2
add a1 p2,c3
relu r3 a1
maxpool p3 r3 k=2
dense fc p3 out=10
softmax_xent loss fc
NET
# run FUSE NCPU NET STEPS -> the result line (FUSE: DNN_FUSE level, graph/fuse.h)
run() {
  STARPU_NCPU="$2" DNN_FUSE="$1" "$STARPU_ANP" train --net "$3" --data synthetic --chunks 4 --batch 32 \
    --max-steps "$4" --limit-test 128 --quiet 2>"$TMP/err" | tail -1
}
# check NET NCPU STEPS TOL WANT_FEWER [LEVEL]: compare DNN_FUSE=0 and LEVEL (default 1)
check() {
  local net="$1" ncpu="$2" steps="$3" tol="$4" fewer="$5" lv="${6:-1}" L0 L1
  L0="$(run 0 "$ncpu" "$net" "$steps")" || { cat "$TMP/err" >&2; fail "$net: DNN_FUSE=0 run failed"; return; }
  L1="$(run "$lv" "$ncpu" "$net" "$steps")" || { cat "$TMP/err" >&2; fail "$net: DNN_FUSE=$lv run failed"; return; }
  local t0 t1
  t0="$(result_field "$L0" tasks_per_step)"; t1="$(result_field "$L1" tasks_per_step)"
  printf '%-8s ncpu=%s DNN_FUSE=%s  unfused: train_loss=%s test_loss=%s tasks_per_step=%s  fused: train_loss=%s test_loss=%s tasks_per_step=%s\n' \
    "$(basename "$net")" "$ncpu" "$lv" "$(result_field "$L0" train_loss)" "$(result_field "$L0" test_loss)" "$t0" \
    "$(result_field "$L1" train_loss)" "$(result_field "$L1" test_loss)" "$t1"
  [ "$(result_field "$L0" fuse)" = 0 ] && [ "$(result_field "$L1" fuse)" = "$lv" ] || fail "$net: fuse= field wrong"
  for k in train_loss epoch_train_loss test_loss; do
    local a b
    a="$(result_field "$L0" $k)"; b="$(result_field "$L1" $k)"
    [ -n "$a" ] && [ -n "$b" ] || { fail "$net: no $k"; continue; }
    fcmp "($a - $b) <= $tol * $a && ($b - $a) <= $tol * $a" || fail "$net ncpu=$ncpu: $k fused $b vs unfused $a"
  done
  [ "$(( t0 - t1 ))" = "$fewer" ] || fail "$net: fused step has $t1 tasks, unfused $t0: want $fewer fewer"
}
# Per chunk: resnet8 fuses 4 batchnorm+relu pairs (-8 tasks) and drops 6 of its 6 add_bwd
# copies; edge.net: 2 pairs (-4) and 4 of its 9 copies; lenet5: 2 relu+maxpool pairs at level 1
# (-4: the relus' forward and backward tasks), and at level 2 also its 2 convs with bias=1 do the
# bias in the conv's forward and backward-filter tasks (-4); pool.net: 2 relu+maxpool pairs (-4,
# not r2) and the add's 2 copies (-2).
check resnet8 1 6 1e-6 $(( 4 * 14 ))
check "$TMP/edge.net" 1 6 1e-6 $(( 4 * 8 ))
check lenet5 1 6 1e-6 $(( 4 * 4 ))
check lenet5 1 6 1e-6 $(( 4 * 8 )) 2
check "$TMP/pool.net" 1 6 1e-6 $(( 4 * 6 ))
check "$TMP/pool.net" 2 6 1e-3 $(( 4 * 6 ))
check resnet8 1 3 1e-6 $(( 4 * 14 )) 2
check resnet8 2 6 1e-3 $(( 4 * 14 ))
# Level 3 (batch norm inside the convs, codelets/conv2d_bnfuse.h): resnet8's 3 conv-bn-relu-conv chains lose the
# batchnorm's forward task (-3 per chunk). Its statistics are the row-centred sums of --batchnorm global, whose
# variance differs from the local task's two-pass one by float rounding (unit_bn_fuse: ~1e-7 relative), so this
# is a float reassociation like DNN_CONV_ALGO's, with its bound (docs/usage.md: three steps within 1e-5).
check resnet8 1 3 1e-5 $(( 4 * 17 )) 3
check "$TMP/edge.net" 1 3 1e-5 $(( 4 * 8 )) 3 # no chain there: r1 has 3 readers, r3 an add
# chain.net: a conv that is both B of one batchnorm and A of the next (c2: one task normalises its input and
# computes its output's statistics), a stride-2 B (im2col), a 1x1 B with bias (its bias tasks stay): 3 chains,
# -2 tasks per pair at level 1 and -1 more at level 3, per chunk.
cat >"$TMP/chain.net" <<'NET'
input x 1 28 28
conv c1 x out=8 k=3 pad=1
batchnorm b1 c1
relu r1 b1
conv c2 r1 out=8 k=3 pad=1
batchnorm b2 c2
relu r2 b2
conv c3 r2 out=16 k=3 stride=2 pad=1
batchnorm b3 c3
relu r3 b3
conv c4 r3 out=16 k=1 bias=1
avgpool pool c4
dense fc pool out=10
softmax_xent loss fc
NET
check "$TMP/chain.net" 1 3 1e-5 $(( 4 * 9 )) 3
check "$TMP/chain.net" 2 3 1e-3 $(( 4 * 9 )) 3
# Negative control: per-chunk statistics over other chunks (2 instead of 4) must miss that bound.
L0="$(run 0 1 resnet8 3)"
L3="$(STARPU_NCPU=1 DNN_FUSE=3 "$STARPU_ANP" train --net resnet8 --data synthetic --chunks 2 --batch 32 --max-steps 3 \
  --limit-test 128 --quiet 2>"$TMP/err" | tail -1)" || { cat "$TMP/err" >&2; fail "DNN_FUSE=3 --chunks 2 run failed"; }
a="$(result_field "$L0" test_loss)" b="$(result_field "$L3" test_loss)"
echo "negative control: DNN_FUSE=0 4 chunks test_loss=$a, DNN_FUSE=3 2 chunks test_loss=$b"
fcmp "($a - $b) > 1e-5 * $a || ($b - $a) > 1e-5 * $a" || fail "negative control: 2 chunks within 1e-5 of 4 ($b vs $a)"
finish
