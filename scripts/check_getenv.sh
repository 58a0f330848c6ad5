#!/usr/bin/env bash
# check_getenv.sh [ROOT] — who reads the environment (docs/ARCHITECTURE.md, "One error policy"):
#
#   - the project's own variables (DNN_*, ANP_*, and STARPU_ANP, ours despite its prefix) are read
#     in one place, runtime/knobs.c, into the execution config (graph/exec_config.h);
#   - the layers below runtime/ (util/, codelets/, graph/) read no environment at all;
#   - anything else (variables that StarPU, MPI, OpenBLAS or the system define) may be read in
#     runtime/, traces/ or apps/, each (variable, file) listed in docs/ARCHITECTURE.md's table of
#     foreign variables, a row `| `NAME` | `path/file.c` | why |`.
#
# Checked over every getenv / secure_getenv call of the .c/.h/.cu/.cuh/.cpp files in util/
# codelets/ graph/ runtime/ traces/ include/ apps/ (comments aside). tests/ and bench/ are not
# scanned: they are test and benchmark tools, which may read their own settings (DNN_BUILD_DIR,
# DNN_TEST_DATA, FUZZ_VERBOSE, ...) and set the project's variables for the code under test.
# Fails (exit 1) with one line per offending call, `file:line: what`, on a getenv below runtime/,
# on a project variable read outside runtime/knobs.c, on a name that is not a string literal
# (outside runtime/knobs.c), and on a foreign variable missing from the table for that file.
# Exit 0 when every call is where it belongs; 2 when ROOT cannot be read.
set -euo pipefail
ROOT="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$ROOT" || { echo "check_getenv: cannot enter $ROOT" >&2; exit 2; }
DOC=docs/ARCHITECTURE.md
[ -r "$DOC" ] || { echo "check_getenv: $ROOT/$DOC not found" >&2; exit 2; }

# "NAME file" for each row of the foreign-variables table: | `NAME` | `file` | why |
TABLE="$(sed -nE 's/^\| *`([A-Za-z_][A-Za-z0-9_]*)` *\| *`([^`]+)` *\|.*/\1 \2/p' "$DOC")"

BAD=0
SCANNED=0
report() { echo "$1"; BAD=1; }
for dir in util codelets graph runtime traces include apps; do
  [ -d "$dir" ] || continue
  while IFS= read -r -d '' file; do
    SCANNED=$((SCANNED + 1))
    # "lineno<TAB>call" for every getenv call outside comments (// to the end of the line, and
    # /* ... */ over one or several lines)
    calls="$(awk '
      { line = $0; out = ""
        while (length(line) > 0) {
          if (incomment) { e = index(line, "*/"); if (!e) { line = ""; break } line = substr(line, e + 2); incomment = 0; continue }
          s = index(line, "/*"); d = index(line, "//")
          if (d && (!s || d < s)) { out = out substr(line, 1, d - 1); line = ""; break }
          if (s) { out = out substr(line, 1, s - 1); line = substr(line, s + 2); incomment = 1; continue }
          out = out line; line = ""
        }
        rest = out
        while (match(rest, /(secure_)?getenv[ \t]*\([^)]*\)/)) {
          print NR "\t" substr(rest, RSTART, RLENGTH); rest = substr(rest, RSTART + RLENGTH)
        }
      }' "$file")"
    [ -n "$calls" ] || continue
    while IFS=$'\t' read -r lineno call; do
      at="$file:$lineno"
      case "$dir" in
        util | codelets | graph)
          report "$at: $call: the layers below runtime/ read no environment (take it from the execution config)"
          continue ;;
      esac
      [ "$file" = runtime/knobs.c ] && continue
      name="$(sed -nE 's/^(secure_)?getenv[ \t]*\([ \t]*"([A-Za-z_][A-Za-z0-9_]*)"[ \t]*\)$/\2/p' <<<"$call")"
      if [ -z "$name" ]; then
        report "$at: $call: a variable name that is not a string literal (only runtime/knobs.c may)"
      elif [[ "$name" =~ ^(DNN_|ANP_) || "$name" = STARPU_ANP ]]; then
        report "$at: $name is a project variable: read it in runtime/knobs.c (graph/exec_config.h)"
      elif ! grep -qxF "$name $file" <<<"$TABLE"; then
        report "$at: $name is not in $DOC's table of foreign variables for $file"
      fi
    done <<<"$calls"
  done < <(find "$dir" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \) -print0 | sort -z)
done
[ "$SCANNED" -gt 0 ] || { echo "check_getenv: no source file under $ROOT" >&2; exit 2; }
exit "$BAD"
