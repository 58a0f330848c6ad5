#!/usr/bin/env bash
# bad_env — the DNN_* environment variables (runtime/knobs.c, README "Environment variables")
# are parsed once at start-up under one policy: a bad value is a usage error, exit 2, with one
# line naming the variable and the values it accepts, whatever the command; an empty value is the
# default; the good values run.
source "$(dirname "$0")/lib.sh"
set -euo pipefail
A="$STARPU_ANP"
BENCH=(bench --net lenet5 --batch 8 --steps 1 --warmup 0 --quiet)

# VAR=VALUE -> the words the line must name
declare -A WANT=(
  [DNN_FUSE=4]="expected 0, 1, 2 or 3"
  [DNN_FUSE=on]="expected 0, 1, 2 or 3"
  [DNN_CONV_ALGO=bogus]="expected auto, im2col, winograd, winograd4 or onednn"
  [DNN_CONV_ALGO=IM2COL]="expected auto, im2col, winograd, winograd4 or onednn"
  [DNN_CUDA_MATH=fp16]="expected tf32 or fp32"
  [DNN_CUDA_WORKSPACE_MB=12x]="expected an integer from 0 to 65536"
  [DNN_CUDA_WORKSPACE_MB=-1]="expected an integer from 0 to 65536"
  [DNN_TRACES_DIR=/nonexistent/traces]="expected the traces/ folder"
  [DNN_TEST_SUM_ORDER=forward]="expected tree or reverse"
)
for bad in "${!WANT[@]}"; do
  for cmd in "${BENCH[*]}" "train --net lenet5 --data synthetic --summary" nets "trace-summary /nonexistent"; do
    # shellcheck disable=SC2086
    expect_rc 2 env "$bad" "$A" $cmd || continue
    [[ "$ERR" == "error: ${bad}: ${WANT[$bad]}"* ]] || fail "$bad ($cmd): the line does not name the variable and its values: $ERR"
    [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] || fail "$bad ($cmd): error is not one line: $ERR"
  done
done
# Empty means the default; each good value runs.
for good in DNN_FUSE= DNN_FUSE=0 DNN_FUSE=2 DNN_FUSE=3 DNN_CONV_ALGO=im2col DNN_CONV_ALGO=winograd DNN_CONV_ALGO=winograd4 DNN_CONV_ALGO=auto \
            DNN_CUDA_MATH=fp32 DNN_CUDA_WORKSPACE_MB=0 "DNN_TRACES_DIR=$DNN_SOURCE_DIR/traces"; do
  expect_rc 0 env "$good" "$A" "${BENCH[@]}"
done
# The level reaches the plan: the result line says which one ran.
LINE="$(DNN_FUSE=0 "$A" "${BENCH[@]}" 2>/dev/null | tail -1)"
[ "$(result_field "$LINE" fuse)" = 0 ] || fail "DNN_FUSE=0: the result line says fuse=$(result_field "$LINE" fuse)"
LINE="$(DNN_FUSE=2 "$A" "${BENCH[@]}" 2>/dev/null | tail -1)"
[ "$(result_field "$LINE" fuse)" = 2 ] || fail "DNN_FUSE=2: the result line says fuse=$(result_field "$LINE" fuse)"
finish
