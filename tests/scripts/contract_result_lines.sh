#!/usr/bin/env bash
# contract_result_lines — the `result:` line contract (README): the last stdout line is
# `result: key=value key=value ...`, one space between pairs, every key once, no space inside a
# value. lib.sh's result_field (scripts/lib.sh) stops a test on a duplicated key it reads, but a
# duplicate of a key no test reads, or a value with spaces, goes unnoticed there; this test
# catches both, in every line.
# It checks
#   1. every result line the other script tests read (lib.sh records them under
#      $DNN_BUILD_DIR/result_lines/<test>.txt; CTest runs this test after them, DEPENDS in
#      script_tests.cmake), and
#   2. its own runs, so it stands alone: train (sync), bench, eval, train --mode async in one
#      process, and 2-rank sync and async runs under mpirun.
# Each offending line is reported once with where it came from and what is wrong.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
A="$STARPU_ANP"
export STARPU_NCPU="${STARPU_NCPU:-1}"
OWN="$TMP/own.txt"
: >"$OWN"
# own NAME CMD...: run CMD, keep its last stdout line (must be a result line) tagged NAME.
own() {
  local name="$1"; shift
  local out rc
  rc=0; out="$("$@" 2>"$TMP/err")" || rc=$?
  if [ "$rc" != 0 ]; then fail "$name: exited $rc: $(tail -3 "$TMP/err")"; return; fi
  local last; last="$(printf '%s\n' "$out" | tail -1)"
  case "$last" in result:*) printf '%s\t%s\n' "$name" "$last" >>"$OWN" ;;
    *) fail "$name: last stdout line is not a result line: $last" ;; esac
}
SYN=(--data synthetic --quiet)
own "train sync" "$A" train --net lenet5 "${SYN[@]}" --max-steps 3 --checkpoint "$TMP/c.ckpt"
own "bench" "$A" bench --net lenet5 --batch 16 --steps 2 --warmup 1 --quiet
own "eval" "$A" eval --net lenet5 --data synthetic --checkpoint "$TMP/c.ckpt" --limit 64 --quiet
own "train async, 1 process" "$A" train --net lenet5 "${SYN[@]}" --max-steps 3 --mode async --staleness 1
if command -v mpirun >/dev/null; then
  MPI=(timeout 300 "${ANP_MPIRUN[@]}" -np 2)
  own "mpirun -np 2 train sync" "${MPI[@]}" "$A" train --net lenet5 "${SYN[@]}" --max-steps 3
  own "mpirun -np 2 train async" "${MPI[@]}" "$A" train --net lenet5 "${SYN[@]}" --max-steps 3 --mode async \
    --staleness 1
else
  echo "note: no mpirun, the 2-rank runs are not part of this run"
fi

# check SOURCE LINE: prints one problem per line (nothing when LINE keeps the contract).
check() {
  printf '%s\n' "$2" | awk -v src="$1" '
    {
      if (substr($0, 1, 8) != "result: ") { print src ": does not start with \"result: \": " $0; exit }
      rest = substr($0, 9)
      if (rest ~ /  / || rest ~ /^ / || rest ~ / $/) print src ": not single-space separated: " $0
      n = split(rest, tok, " ")
      spaced = ""
      for (i = 1; i <= n; i++) {
        t = tok[i]
        if (t !~ /^[a-z][a-z0-9_]*=/) {
          # A token that is not key=...: the previous value went on after a space.
          spaced = spaced (spaced == "" ? "" : ", ") "\"" (i > 1 ? tok[i - 1] " " : "") t "\""
          continue
        }
        k = t; sub(/=.*/, "", k); v = t; sub(/^[^=]*=/, "", v)
        if (v == "") print src ": empty value for " k ": " $0
        if (k in seen) print src ": duplicate key " k " (" seen[k] " and " t "): " $0
        else seen[k] = t
      }
      if (spaced != "") print src ": value with a space (" spaced "): " $0
    }'
}
PROBLEMS="$TMP/problems"
: >"$PROBLEMS"
NLINES=0
while IFS=$'\t' read -r name line; do
  NLINES=$((NLINES + 1)); check "$name" "$line" >>"$PROBLEMS"
done <"$OWN"
NSUITE=0
if [ -n "${DNN_BUILD_DIR:-}" ] && [ -d "$DNN_BUILD_DIR/result_lines" ]; then
  for f in "$DNN_BUILD_DIR"/result_lines/*.txt; do
    [ -e "$f" ] || continue
    t="$(basename "$f" .txt)"
    [ "$t" = contract_result_lines ] && continue
    while IFS= read -r line; do
      NSUITE=$((NSUITE + 1)); check "$t" "$line" >>"$PROBLEMS"
    done < <(sort -u "$f")
  done
fi
echo "checked $NLINES result lines of its own runs and $NSUITE distinct ones recorded by the other script tests"
[ "$NSUITE" -gt 0 ] || echo "note: no result lines recorded by other tests yet (run the whole suite for them)"
while IFS= read -r p; do fail "$p"; done < <(sort -u "$PROBLEMS")
finish
