#!/usr/bin/env bash
# train_schedulers — the same short run under several STARPU_SCHED policies gives the same
# training loss (only float reassociation in the gradient reductions may differ).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_fashion_mnist
REF=""
for s in eager lws ws dmda dmdas prio random heteroprio; do
  LINE="$(STARPU_SCHED=$s "$STARPU_ANP" train --net lenet5 --max-steps 40 --limit-train 4096 --limit-test 512 \
          --chunks 4 --quiet 2>"$TMP/err" | tail -1)" || { cat "$TMP/err" >&2; fail "$s: run failed"; continue; }
  L="$(result_field "$LINE" train_loss)"; A="$(result_field "$LINE" test_accuracy)"
  printf '%-10s train_loss=%s test_accuracy=%s images_per_s=%s\n' "$s" "$L" "$A" "$(result_field "$LINE" images_per_s)"
  [ "$(result_field "$LINE" sched)" = "$s" ] || fail "$s: result line reports sched=$(result_field "$LINE" sched)"
  if [ -z "$REF" ]; then REF="$L"; continue; fi
  fcmp "($L - $REF) <= 1e-3 * $REF && ($REF - $L) <= 1e-3 * $REF" || fail "$s: train_loss $L differs from eager's $REF"
done
finish
