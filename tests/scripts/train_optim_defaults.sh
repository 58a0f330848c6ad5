#!/usr/bin/env bash
# train_optim_defaults — without --lr, each optimiser takes its own recipe's peak rate
# (docs/large-batch.md), not SGD's 0.05: lars 4 x sqrt(B/4096), lamb 0.04 x sqrt(B/4096), sgd
# 0.05, for B = --batch, or --lr-ref-batch when given (then scaled by batch/B as any --lr).
# (LARS at SGD's 0.05 trained lenet5 at batch 1,024 for 5 epochs to 0.53 test accuracy.) AdamW,
# which has no recipe, refuses to run without --lr: one line naming the option and the recipe
# document, exit 2. An explicit --lr is kept. --help states each default. One step per run, read
# from the result line's lr_peak and the start-up line.
source "$(dirname "$0")/lib.sh"
set -euo pipefail
export STARPU_NCPU=1 STARPU_NCUDA=0
run() { # run BATCH ARGS...: one step of lenet5 on synthetic data; prints the result line
  local b="$1"; shift
  "$STARPU_ANP" train --net lenet5 --data synthetic --limit-train "$b" --batch "$b" --chunks 1 --max-steps 1 \
    --no-eval "$@" 2>"$TMP/run.err" | tail -1
}
# optimizer:batch:[extra args]:expected lr_peak
for spec in sgd:64::0.05 sgd:1024::0.05 lars:64::0.5 lars:1024::2 lamb:64::0.005 lamb:1024::0.02 \
            lamb:1024:--lr-ref-batch=256:0.04 lars:1024:--lr=0.3:0.3 lamb:256:--lr=0.1:0.1; do
  IFS=: read -r opt b extra want <<<"$spec"
  args=(--optimizer "$opt"); [ -z "$extra" ] || args+=("${extra%%=*}" "${extra#*=}")
  LINE="$(run "$b" "${args[@]}")" || { cat "$TMP/run.err" >&2; fail "$spec: the run failed"; continue; }
  got="$(result_field "$LINE" lr_peak)"
  echo "$opt at batch $b ${extra:+($extra) }: lr_peak $got"
  [ "$(result_field "$LINE" optimizer)" = "$opt" ] || fail "$spec: result line says optimizer=$(result_field "$LINE" optimizer)"
  [ "$got" = "$want" ] || fail "$spec: lr_peak=$got, want $want"
  # the start-up line says when the rate is the optimiser's default
  if [[ "$extra" == --lr=* ]]; then
    ! grep -q "the optimizer's default" "$TMP/run.err" || fail "$spec: an explicit --lr is called the default"
  else
    grep -q "^train: optimizer $opt, peak lr $want (--lr [0-9.e-]*\( x batch/--lr-ref-batch\)\?, the optimizer's default)" "$TMP/run.err" \
      || { cat "$TMP/run.err" >&2; fail "$spec: the start-up line does not name the default"; }
  fi
done
# AdamW without --lr: exit 2, one line naming --lr and the recipes' document; with --lr it runs.
if expect_rc 2 "$STARPU_ANP" train --net lenet5 --data synthetic --limit-train 64 --max-steps 1 --optimizer adamw; then
  [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] && [[ "$ERR" == *"--optimizer adamw needs --lr"*"docs/large-batch.md"* ]] \
    || fail "adamw without --lr: '$ERR'"
fi
LINE="$(run 64 --optimizer adamw --lr 0.001)" || { cat "$TMP/run.err" >&2; fail "adamw --lr 0.001 failed"; }
[ "$(result_field "$LINE" lr_peak)" = 0.001 ] || fail "adamw --lr 0.001: lr_peak=$(result_field "$LINE" lr_peak)"
# --help states each default
HELP="$("$STARPU_ANP" train --help)"
for want in "sgd 0.05" "lars 4 x sqrt(B/4096)" "0.04 x sqrt(B/4096)" "adamw none: --lr required"; do
  [[ "$HELP" == *"$want"* ]] || fail "train --help does not state '$want'"
done
finish
