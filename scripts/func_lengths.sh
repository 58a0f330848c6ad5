#!/usr/bin/env bash
# func_lengths.sh [-n N] [-l LIMIT] [DIR_OR_FILE...] — the longest C functions, longest first.
#
# Prints `lines  file:line  name` for the N longest functions (default 20) of the .c/.cu files in
# the given folders or files (default: apps runtime graph, the folders where the project's rule
# "no function longer than 120 lines" applies). A function's length counts from the line that
# names it to its closing brace, both included (what universal-ctags' line:/end: fields give).
# With -l LIMIT it prints only the functions longer than LIMIT and exits 1 if there is any (a
# check); otherwise it exits 0. Plain awk, no ctags needed: a function is a top-level `{` whose
# text since the last column-0 line containing `(` has a `)` and no `=` (so initialisers of
# arrays and structs are not functions); strings, character literals and comments are skipped
# when counting braces. Run from anywhere: paths are relative to the repository root.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
N=20
LIMIT=""
while getopts "n:l:" opt; do
  case "$opt" in
    n) N="$OPTARG" ;;
    l) LIMIT="$OPTARG" ;;
    *) echo "usage: func_lengths.sh [-n N] [-l LIMIT] [DIR_OR_FILE...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
cd "$ROOT"
[ $# -gt 0 ] || set -- apps runtime graph
FILES=()
for p in "$@"; do
  if [ -d "$p" ]; then
    while IFS= read -r -d '' f; do FILES+=("$f"); done < <(find "$p" -type f \( -name '*.c' -o -name '*.cu' \) -print0 | sort -z)
  elif [ -f "$p" ]; then
    FILES+=("$p")
  else
    echo "func_lengths: no such file or folder: $p" >&2; exit 2
  fi
done
[ ${#FILES[@]} -gt 0 ] || exit 0

TABLE="$(awk '
  FNR == 1 { depth = 0; incomment = 0; sig = 0; sigtext = ""; infunc = 0 }
  {
    raw = $0
    # strip comments, strings and character literals, keeping braces of code only
    line = ""
    i = 1; n = length(raw)
    while (i <= n) {
      c = substr(raw, i, 1); c2 = substr(raw, i, 2)
      if (incomment) { if (c2 == "*/") { incomment = 0; i += 2 } else i++; continue }
      if (c2 == "/*") { incomment = 1; i += 2; continue }
      if (c2 == "//") break
      if (c == "\"" || c == "\x27") {
        q = c; i++
        while (i <= n) { d = substr(raw, i, 1); if (d == "\\") { i += 2; continue } i++; if (d == q) break }
        line = line " "; continue
      }
      line = line c; i++
    }
    if (depth == 0 && !infunc) {
      if (raw ~ /^[A-Za-z_]/ && line ~ /\(/ && raw !~ /^#/) {
        sig = FNR; sigtext = ""
        pre = line; sub(/\(.*/, "", pre); k = split(pre, w, /[^A-Za-z0-9_]+/)
        name = ""; for (j = k; j >= 1; j--) if (w[j] != "") { name = w[j]; break }
      }
    }
    for (i = 1; i <= length(line); i++) {
      c = substr(line, i, 1)
      if (c == "{") {
        if (depth == 0 && sig > 0) {
          t = sigtext substr(line, 1, i - 1)
          if (t ~ /\)/ && t !~ /=/) { infunc = 1; start = sig; fname = name }
        }
        depth++
      } else if (c == "}") {
        depth--
        if (depth == 0 && infunc) {
          printf "%d\t%s:%d\t%s\n", FNR - start + 1, FILENAME, start, fname
          infunc = 0; sig = 0
        }
        if (depth < 0) depth = 0
      } else if (c == ";" && depth == 0) { sig = 0; sigtext = "" }
    }
    if (sig > 0 && depth == 0) sigtext = sigtext line " "
  }
' "${FILES[@]}" | sort -t$'\t' -k1,1nr -k2,2)"

if [ -n "$LIMIT" ]; then
  OVER="$(printf '%s\n' "$TABLE" | awk -F'\t' -v lim="$LIMIT" '$1 > lim')"
  if [ -n "$OVER" ]; then
    printf '%s\n' "$OVER" | awk -F'\t' '{ printf "%5d  %s  %s\n", $1, $2, $3 }'
    exit 1
  fi
  exit 0
fi
printf '%s\n' "$TABLE" | head -n "$N" | awk -F'\t' '{ printf "%5d  %s  %s\n", $1, $2, $3 }'
