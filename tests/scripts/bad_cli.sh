#!/usr/bin/env bash
# bad_cli — usage errors exit 2 with one line naming the option; runtime/input errors exit 1
# with a line naming the file and line. No crash on any of them.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
A="$STARPU_ANP"

expect_rc 0 "$A" --help
expect_rc 0 "$A" train --help
expect_rc 0 "$A" eval --help
expect_rc 0 "$A" bench --help
expect_rc 2 "$A"
expect_rc 2 "$A" frobnicate && [[ "$ERR" == *"unknown command 'frobnicate'"* ]] || fail "unknown command message: $ERR"
expect_rc 2 "$A" train --bogus && [[ "$ERR" == *"--bogus"* ]] || fail "unknown option message: $ERR"
for bad in "--batch 0" "--batch -5" "--batch abc" "--batch 99999999999999999999" "--chunks 0" "--lr nan" \
           "--lr -1" "--momentum 1.5" "--epochs 0" "--max-steps x" "--window 0" "--seed -1" "--weight-decay 2"; do
  # shellcheck disable=SC2086
  expect_rc 2 "$A" train $bad && { opt="${bad%% *}"; [[ "$ERR" == *"$opt"* ]] || fail "'$bad': message lacks $opt: $ERR"; }
  [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] || fail "'$bad': error is not one line: $ERR"
done
expect_rc 2 "$A" train --batch && [[ "$ERR" == *"needs a value"* ]] || fail "missing value: $ERR"
expect_rc 2 "$A" train extra-arg
expect_rc 2 "$A" train --data /nonexistent/dir && [[ "$ERR" == *"/nonexistent/dir"* ]] || fail "data msg: $ERR"
expect_rc 2 "$A" train --data /etc/passwd
expect_rc 2 "$A" train --resume /nonexistent.ckpt
expect_rc 2 "$A" train --resume /tmp
expect_rc 2 "$A" train --metrics /nonexistent/dir/m.csv
expect_rc 2 "$A" train --checkpoint /tmp
expect_rc 2 "$A" eval --net lenet5
expect_rc 2 "$A" eval --checkpoint /nonexistent.ckpt
expect_rc 2 "$A" eval --checkpoint x --lr 0.1
expect_rc 2 "$A" bench --data fashion-mnist
expect_rc 2 "$A" train --warmup 3
expect_rc 2 "$A" train --warmup-steps 3 --warmup-epochs 1 && [[ "$ERR" == *"--warmup-steps and --warmup-epochs"* ]] || fail "warm-up twice: $ERR"
expect_rc 2 "$A" train --warmup-steps -1

# Net-file errors: exit 1, "file:line: message".
printf 'input x 1 28 28\nconv c1 x out=6 k=5 pad=2\nrelu r1 c1\nsoftmax_xent loss r1\n' > "$TMP/bad.net"
expect_rc 1 "$A" train --net "$TMP/bad.net" --summary && [[ "$ERR" == *"bad.net:4:"* ]] || fail "net error location: $ERR"
printf 'input x 1 28 28\nfrob y x\n' > "$TMP/bad2.net"
expect_rc 1 "$A" train --net "$TMP/bad2.net" && [[ "$ERR" == *"bad2.net:2: unknown op 'frob'"* ]] || fail "unknown op: $ERR"
expect_rc 1 "$A" train --net nosuchnet && [[ "$ERR" == *"nosuchnet"* && "$ERR" == *"lenet5"* ]] || fail "unknown net: $ERR"
expect_rc 1 "$A" train --net "$TMP" || true
head -c 3000 /dev/urandom > "$TMP/random.net"
expect_rc 1 "$A" train --net "$TMP/random.net"
# A net whose input shape does not fit the data: clean runtime error.
printf 'input x 3 32 32\nconv c1 x out=4 k=3\nrelu r1 c1\navgpool p p1\ndense f p out=10\nsoftmax_xent loss f\n' | sed 's/avgpool p p1/avgpool p r1/' > "$TMP/cifar.net"
expect_rc 1 "$A" train --net "$TMP/cifar.net" --quiet && [[ "$ERR" == *"expects 3x32x32"* ]] || fail "shape mismatch: $ERR"
# The CUDA environment (codelets/dnn_codelet.h): a bad value is a usage error at start-up, one
# line naming the variable, with or without a GPU; the good values run.
for bad in DNN_CUDA_MATH=bogus DNN_CUDA_MATH=FP32 DNN_CUDA_WORKSPACE_MB=-1 DNN_CUDA_WORKSPACE_MB=12x \
           DNN_CUDA_WORKSPACE_MB=99999999; do
  expect_rc 2 env "$bad" "$A" bench --net lenet5 --batch 8 --steps 1 --warmup 0 --quiet &&
    { [[ "$ERR" == *"error: ${bad}:"* ]] || fail "$bad: message lacks the variable: $ERR"; }
  [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] || fail "$bad: error is not one line: $ERR"
done
for good in DNN_CUDA_MATH=tf32 DNN_CUDA_MATH=fp32 DNN_CUDA_WORKSPACE_MB=0; do
  expect_rc 0 env "$good" "$A" bench --net lenet5 --batch 8 --steps 1 --warmup 0 --quiet
done
# A chunk whose conv output has more than INT_MAX elements (cuDNN's int sizes): refused when the
# plan is made, before anything is allocated, with one line naming the file, line and layer.
printf 'input x 1 64 64\nconv c x out=4096 k=3 pad=1\navgpool p c\ndense f p out=10\nsoftmax_xent l f\n' > "$TMP/big.net"
expect_rc 1 "$A" bench --net "$TMP/big.net" --batch 128 --chunks 1 --steps 1 --warmup 0 --quiet &&
  { [[ "$ERR" == *"big.net:2: c: its output for a chunk of 128 samples"* ]] || fail "conv over INT_MAX: $ERR"; }
[ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] || fail "conv over INT_MAX: error is not one line: $ERR"
# Data directory without data.
mkdir -p "$TMP/empty"
expect_rc 1 "$A" train --data "$TMP/empty" --quiet && [[ "$ERR" == *"$TMP/empty"* ]] || fail "empty data dir: $ERR"
finish
