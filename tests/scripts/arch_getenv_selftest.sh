#!/usr/bin/env bash
# arch_getenv_selftest — scripts/check_getenv.sh (CTest arch_getenv) can both pass and fail: on a
# small made-up tree it accepts runtime/knobs.c's reads and a foreign variable listed in the
# table, ignores comments, and flags, one line each with file:line, a getenv below runtime/, a
# project variable outside knobs.c, a foreign variable missing from the table and a name that is
# not a literal; and on a copy of the real sources, one injected getenv makes it fail.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
SRC="${DNN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
CHECK="$SRC/scripts/check_getenv.sh"
R="$TMP/tree"
mkdir -p "$R"/{util,codelets,graph,runtime,traces,include,apps,docs}
cat >"$R/docs/ARCHITECTURE.md" <<'DOC'
| variable | file | why |
|---|---|---|
| `STARPU_SCHED` | `runtime/r.c` | the scheduler's name |
DOC
printf 'const char *a = getenv("DNN_X"), *b = getenv(name), *c = getenv("ANP_Y");\n' >"$R/runtime/knobs.c"
printf '/* getenv("DNN_C") in a comment\n * getenv("ANP_D") */\nconst char *s = getenv("STARPU_SCHED"); // getenv("DNN_E")\n' >"$R/runtime/r.c"
printf 'int f(void);\n' >"$R/codelets/c.c"
rc=0; OUT="$(bash "$CHECK" "$R" 2>&1)" || rc=$?
[ "$rc" = 0 ] || fail "a clean tree fails (rc $rc): $OUT"
printf 'int f(void) { return getenv("HOME") != 0; }\n' >>"$R/codelets/c.c"    # below runtime/: line 2
printf 'const char *h = getenv("ANP_HOST");\n' >>"$R/runtime/r.c"            # project variable: line 4
printf '\nconst char *n = getenv("STARPU_NCPU");\n' >"$R/traces/t.c"         # not in the table: line 2
printf 'const char *v = getenv(var);\n' >"$R/apps/a.c"                        # not a literal: line 1
printf 'const char *p = getenv("STARPU_ANP");\n' >"$R/graph/g.h"              # below runtime/ too
rc=0; OUT="$(bash "$CHECK" "$R" 2>/dev/null)" || rc=$?
echo "$OUT"
[ "$rc" = 1 ] || fail "a tree with misplaced getenv calls exits $rc, want 1"
[ "$(printf '%s\n' "$OUT" | wc -l)" = 5 ] || fail "want exactly 5 lines, got: $OUT"
grep -q '^codelets/c.c:2: getenv("HOME"): the layers below runtime/' <<<"$OUT" || fail "getenv in codelets/ not flagged"
grep -q '^graph/g.h:1: getenv("STARPU_ANP"): the layers below runtime/' <<<"$OUT" || fail "getenv in graph/ not flagged"
grep -q '^runtime/r.c:4: ANP_HOST is a project variable' <<<"$OUT" || fail "a project variable outside knobs.c not flagged"
grep -q '^traces/t.c:2: STARPU_NCPU is not in' <<<"$OUT" || fail "a foreign variable missing from the table not flagged"
grep -q '^apps/a.c:1: getenv(var): a variable name that is not a string literal' <<<"$OUT" || fail "a non-literal name not flagged"
# The real sources pass, and fail once a getenv is injected into graph/ or a project variable into runtime/.
C="$TMP/copy"
mkdir -p "$C"
for d in util codelets graph runtime traces include apps docs; do [ -d "$SRC/$d" ] && cp -r "$SRC/$d" "$C/"; done
rc=0; OUT="$(bash "$CHECK" "$C" 2>&1)" || rc=$?
[ "$rc" = 0 ] || fail "a copy of the sources fails (rc $rc): $OUT"
printf 'static const char *injected(void) { return getenv("DNN_FUSE"); }\n' >>"$C/graph/fuse.c"
printf 'static const char *injected2(void) { return getenv("ANP_SIM_GPU"); }\n' >>"$C/runtime/train.c"
rc=0; OUT="$(bash "$CHECK" "$C" 2>/dev/null)" || rc=$?
[ "$rc" = 1 ] || fail "the sources with injected getenv calls exit $rc, want 1"
grep -q '^graph/fuse.c:[0-9]*: getenv("DNN_FUSE")' <<<"$OUT" || fail "the getenv injected into graph/fuse.c not flagged: $OUT"
grep -q '^runtime/train.c:[0-9]*: ANP_SIM_GPU is a project variable' <<<"$OUT" || fail "the getenv injected into runtime/train.c not flagged: $OUT"
finish
