#!/usr/bin/env bash
# arch_includes_selftest — scripts/check_includes.sh (CTest arch_includes) can both pass and fail:
# on a small made-up tree it accepts downward and sideways includes and flags, one line each with
# file:line, an upward include, a relative include, an app including a module header and a public
# header that is not self-contained.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
CHECK="${DNN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}/scripts/check_includes.sh"
R="$TMP/tree"
mkdir -p "$R"/{util,codelets,graph,runtime,traces,include,apps}
echo '#include <stdio.h>'                              >"$R/util/u.h"
printf '#include "u.h"\n'                              >"$R/codelets/c.h"
printf '#include "c.h"\n#include "u.h"\n'              >"$R/graph/g.h"
printf '#include "g.h"\n#include "t.h"\n#include "gen.h"\n' >"$R/runtime/r.h" # gen.h: generated
printf '#include "r.h"\n'                              >"$R/traces/t.h"
printf '#include <stddef.h>\n'                         >"$R/include/starpu_anp.h" # self-contained
printf '#include "u.h"\n#include "starpu_anp.h"\n'       >"$R/graph/g3.h"  # the public header: from any layer
printf '#include "starpu_anp.h"\n'                     >"$R/apps/app.c"
rc=0; OUT="$(bash "$CHECK" "$R" 2>/dev/null)" || rc=$?
[ "$rc" = 0 ] || fail "a clean tree fails (rc $rc): $OUT"
printf '#include "u.h"\n#include "r.h"\n'              >"$R/graph/g2.c"   # upward at line 2
printf '\n\n#include "../codelets/c.h"\n'              >"$R/runtime/r2.c" # relative at line 3
printf '#include "starpu_anp.h"\n# include "g.h"\n'    >"$R/apps/app2.c"  # app: line 2
printf '#include "g.h"\n'                              >"$R/util/u2.c"    # upward, two layers
printf '#include <stdint.h>\n#include "u.h"\n'         >"$R/include/x.h"  # public header not self-contained
rc=0; OUT="$(bash "$CHECK" "$R" 2>/dev/null)" || rc=$?
echo "$OUT"
[ "$rc" = 1 ] || fail "a tree with bad includes exits $rc, want 1"
[ "$(printf '%s\n' "$OUT" | wc -l)" = 5 ] || fail "want exactly 5 lines, got: $OUT"
grep -q '^graph/g2.c:2: upward' <<<"$OUT" || fail "upward graph -> runtime not flagged"
grep -q '^runtime/r2.c:3: relative' <<<"$OUT" || fail "relative include not flagged"
grep -q '^apps/app2.c:2: an app includes "g.h"' <<<"$OUT" || fail "app including a module header not flagged"
grep -q '^util/u2.c:1: upward' <<<"$OUT" || fail "upward util -> graph not flagged"
grep -q '^include/x.h:2: the public header includes "u.h"' <<<"$OUT" || fail "a public header including a module header not flagged"
# Missing folders (util/, include/ before the merges) are fine.
rm -rf "$R/util" "$R/include" "$R/graph/g2.c" "$R/graph/g3.h" "$R/runtime/r2.c" "$R/apps/app2.c"
rc=0; OUT="$(bash "$CHECK" "$R" 2>/dev/null)" || rc=$?
[ "$rc" = 0 ] || fail "a tree without util/ and include/ fails (rc $rc): $OUT"
finish
