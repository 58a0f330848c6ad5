#!/usr/bin/env bash
# mpi_grad_bf16 — gradients on the wire in bf16 (--grad-precision bf16): with 2 and 4 ranks, every all-reduce
# algorithm's sums equal the exact sums (and the fp32 reduction's) within the bound of its bf16 roundings, the
# ranks hold the same bits, and the same command gives the same bits twice (tests/gradwire.c says how the bound
# is derived and runs the negative controls: the bf16 sums must break the fp32 bound, and a sum moved by 1.5x
# its bound must be caught). Then the combinations that cannot work are refused with one line, exit 2.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
GRADWIRE="$DNN_BUILD_DIR/tests/gradwire"
[ -x "$GRADWIRE" ] || { echo "FAIL: $GRADWIRE not built" >&2; exit 1; }
export STARPU_NCPU=1
ALGOS=tree,ring,rhd,ps
# gw NP TAG: every algorithm over NP ranks in one job; the ranks' lines in $TMP/TAG.
gw() {
  local np="$1" tag="$2" rc=0
  timeout 300 "${ANP_MPIRUN[@]}" -np "$np" "$GRADWIRE" "$ALGOS" >"$TMP/$tag" 2>"$TMP/$tag.err" || rc=$?
  if [ "$rc" != 0 ]; then cat "$TMP/$tag.err" >&2; fail "$np ranks: gradwire exit $rc"; return 1; fi
  grep '^gradwire: rank 0 ' "$TMP/$tag" | sed 's/^gradwire: rank 0 /  /'
  local ar
  for ar in ${ALGOS//,/ }; do
    [ "$(grep -c "^gradwire: rank [0-9]* $ar " "$TMP/$tag")" = "$np" ] || { fail "$np ranks, $ar: not $np ranks reported"; continue; }
    [ "$(grep "^gradwire: rank [0-9]* $ar " "$TMP/$tag" | grep -o 'hash=[0-9a-f]*' | sort -u | wc -l)" = 1 ] \
      || fail "$np ranks, $ar: the ranks' bf16 sums differ"
  done
}
gw 2 2.a || true
# 4 ranks twice: the same command, the same bits (every rank's hash of every algorithm)
if gw 4 4.a && gw 4 4.b; then
  [ "$(grep -o ' [a-z]* ranks=.*hash=[0-9a-f]*' "$TMP/4.a" | sort -u)" = "$(grep -o ' [a-z]* ranks=.*hash=[0-9a-f]*' "$TMP/4.b" | sort -u)" ] \
    || fail "4 ranks: two runs of the same command gave other bits"
fi
# Refusals: async's server takes fp32 pushes; an unknown word.
expect_rc 2 "$STARPU_ANP" train --mode async --grad-precision bf16 --max-steps 1 \
  && { [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] && [[ "$ERR" == *"--grad-precision bf16: not with --mode async"* ]] \
       || fail "async with bf16 gradients: '$ERR'"; }
expect_rc 2 "$STARPU_ANP" train --grad-precision fp16 --max-steps 1 \
  && { [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] && [[ "$ERR" == *--grad-precision* ]] || fail "--grad-precision fp16: '$ERR'"; }
expect_rc 2 "$STARPU_ANP" eval --grad-precision bf16
finish
