#!/usr/bin/env bash
# check_includes.sh [ROOT] — the include direction of docs/ARCHITECTURE.md ("Layers"):
#
#   apps  ->  runtime, traces  ->  graph  ->  codelets  ->  util, include
#
# include/starpu_anp.h is the public contract: apps include it alone, and it is self-contained
# (system headers only), so every module may include it for the public types and prototypes.
#
# A file may include headers of its own layer or of a lower one, never of a higher one. Checked
# over every `#include "..."` of the .c/.h/.cu/.cuh files in util/ codelets/ graph/ runtime/
# traces/ include/ apps/ (folders that do not exist yet are skipped). Fails (exit 1) with one
# line per offending include, `file:line: what`, on
#   - an include that resolves to a header of a higher layer ("upward");
#   - a relative path (`../` or `./`): a module names another module's header by its name, and the
#     build's include directories decide where it comes from;
#   - an app (apps/) including anything but "starpu_anp.h";
#   - a file of include/ including any quoted header (the public header is self-contained).
# A header is resolved in the including file's own folder first, then in the layer folders; one
# that is in none of them (generated into the build tree, or a system header written with quotes)
# is not a layering question and is listed on stderr only. runtime/ and traces/ are one layer.
# Exit 0 when all includes go downward (or sideways).
set -euo pipefail
ROOT="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$ROOT" || { echo "check_includes: cannot enter $ROOT" >&2; exit 2; }

layer_of() {
  case "$1" in
    util | include) echo 0 ;; codelets) echo 1 ;; graph) echo 2 ;; runtime | traces) echo 3 ;;
    apps) echo 5 ;; *) echo -1 ;;
  esac
}
DIRS=(util codelets graph runtime traces include apps)
BAD=0
SCANNED=0
for dir in "${DIRS[@]}"; do
  [ -d "$dir" ] || continue
  mine="$(layer_of "$dir")"
  while IFS= read -r -d '' file; do
    SCANNED=$((SCANNED + 1))
    # "lineno<TAB>header" for every quoted include of the file
    while IFS=$'\t' read -r ln hdr; do
      where="$file:$ln"
      case "$hdr" in
        ../* | */../* | ./* | */./*)
          echo "$where: relative include \"$hdr\" (name the header; the include directories find it)"
          BAD=$((BAD + 1)); continue ;;
        /*)
          echo "$where: absolute include \"$hdr\""
          BAD=$((BAD + 1)); continue ;;
      esac
      if [ "$dir" = include ]; then
        echo "$where: the public header includes \"$hdr\"; include/ is self-contained (system headers only)"
        BAD=$((BAD + 1)); continue
      fi
      if [ "$dir" = apps ] && [ "$hdr" != starpu_anp.h ]; then
        echo "$where: an app includes \"$hdr\"; apps include only \"starpu_anp.h\""
        BAD=$((BAD + 1)); continue
      fi
      # Resolve: own folder (or the path relative to the file), else a layer folder.
      target=""
      if [ -f "$(dirname "$file")/$hdr" ]; then
        target="$dir"
      else
        for d in "${DIRS[@]}"; do
          if [ -f "$d/$hdr" ]; then target="$d"; break; fi
        done
      fi
      if [ -z "$target" ]; then
        echo "note: $where: \"$hdr\" is in no layer folder (generated or external); not checked" >&2
        continue
      fi
      theirs="$(layer_of "$target")"
      if [ "$theirs" -gt "$mine" ]; then
        echo "$where: upward include \"$hdr\" ($dir/ includes $target/$hdr; the direction is apps -> runtime/traces -> graph -> codelets -> util)"
        BAD=$((BAD + 1))
      fi
    done < <(awk '/^[ \t]*#[ \t]*include[ \t]*"/ {
                    s = $0; sub(/^[^"]*"/, "", s); sub(/".*$/, "", s); printf "%d\t%s\n", FNR, s }' "$file")
  done < <(find "$dir" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0 | sort -z)
done
if [ "$SCANNED" = 0 ]; then
  echo "check_includes: no source files under $ROOT (wrong root?)" >&2
  exit 2
fi
if [ "$BAD" -gt 0 ]; then
  echo "check_includes: $BAD include(s) break the layering ($SCANNED files scanned)" >&2
  exit 1
fi
echo "check_includes: $SCANNED files, every include goes downward"
exit 0
