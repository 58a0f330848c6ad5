#!/usr/bin/env bash
# robust_memory_flat — memory stays flat across epochs: the peak RSS of a 3-epoch run is within
# 10% of a 1-epoch run of the same configuration (measured from outside with GNU time's
# "Maximum resident set size"; each epoch trains 100 steps, evaluates, and writes a checkpoint,
# so whatever leaks per step, per evaluation or per checkpoint shows up three times over).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ -x /usr/bin/time ] || { echo "SKIP: GNU time (/usr/bin/time) not installed"; exit 77; }
need_fashion_mnist
export STARPU_NCPU="${STARPU_NCPU:-2}"
# In the sanitizer build ASan keeps freed blocks in a quarantine of up to 256 MB, so the peak RSS
# grows with the number of frees rather than with live memory: turn the quarantine off here (the
# other tests keep it, for use-after-free detection).
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:quarantine_size_mb=0"
ARGS=(train --net lenet5 --limit-train 6400 --limit-test 1000 --checkpoint "$TMP/m.ckpt" --quiet)

peak_kb() { # epochs -> "Maximum resident set size" in kB
  /usr/bin/time -v "$STARPU_ANP" "${ARGS[@]}" --epochs "$1" >"$TMP/out.$1" 2>"$TMP/time.$1" \
    || { cat "$TMP/time.$1" >&2; return 1; }
  sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$TMP/time.$1"
}
R1="$(peak_kb 1)" || { fail "1-epoch run failed"; finish; }
R3="$(peak_kb 3)" || { fail "3-epoch run failed"; finish; }
echo "peak RSS: 1 epoch ${R1} kB, 3 epochs ${R3} kB ($(awk -v a="$R1" -v b="$R3" 'BEGIN { printf "%+.1f%%, %+.1f MB", 100 * (b - a) / a, (b - a) / 1024 }'))"
fcmp "$R3 <= 1.10 * $R1" || fail "peak RSS grew by more than 10% from 1 to 3 epochs"
finish
