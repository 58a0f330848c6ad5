# lib.sh — what the project's shell scripts share (sourced: scripts/, bench/, traces/, tests/).
#
# The result line (README, "Usage"): the LAST stdout line of every command is
#   result: key=value key=value ...
# one space between fields, each key once, no blank inside a value. Fields are read generically
# (any key=value, so a field added to the line needs no change here). Where a log holds several
# result lines (a rank's or a retried run's), the last one is the run's.
#   anp_result_line [FILE...]   the last `result: ` line of FILE(s) or stdin (nothing, exit 1,
#                               when there is none)
#   anp_result_field LINE KEY   the value of KEY in LINE; nothing when KEY is absent; a KEY that
#                               appears more than once breaks the contract: one line on stderr,
#                               exit 2 (reading either copy would hide the bug)
# mpirun: ANP_MPIRUN holds the flags every run on this machine needs (root in containers, more
# ranks than cores on a small machine):  timeout 300 "${ANP_MPIRUN[@]}" -np 2 "$STARPU_ANP" train ...
[ -n "${_ANP_LIB_SH:-}" ] && return 0
_ANP_LIB_SH=1

anp_result_line() {
  awk '/^result: / { last = $0; found = 1 } END { if (found) print last; else exit 1 }' "$@"
}

anp_result_field() {
  printf '%s\n' "$1" | awk -v k="$2" '
    { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) { v = substr($i, length(k) + 2); n++ } }
    END {
      if (n > 1) { printf "result line: key %s appears %d times (the contract is one): %s\n", k, n, $0 > "/dev/stderr"; exit 2 }
      if (n == 1) print v
    }'
}

ANP_MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
