#!/usr/bin/env bash
# gpu_check_nogpu — scripts/gpu-check.sh on a machine without a GPU (CI): it must exit non-zero
# within a minute, printing exactly one line, which says that no CUDA worker exists; and, given
# a pack with a binary whose library is nowhere, it must stop with one line naming the library.
# The packs are made here from the built binaries (their RUNPATH finds StarPU and the rest, as
# pack/lib does on the GPU machine); scripts/gpu-pack.sh itself is not run (a whole CUDA build).
# Where the gpu_workers helper reports a CUDA worker this test does not apply (a GPU machine
# runs gpu-check.sh itself) and is skipped (77).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
GC="$DNN_SOURCE_DIR/scripts/gpu-check.sh"
W="$DNN_BUILD_DIR/tests/gpu_workers"
[ -x "$W" ] || { echo "FAIL: no gpu_workers helper at $W" >&2; exit 1; }
n="$(STARPU_NCPU=1 timeout 120 "$W" 2>/dev/null | sed -n 's/^workers: cuda=\([0-9][0-9]*\) .*/\1/p' || true)" # gpu_workers exits 77 without a GPU
[ -n "$n" ] || { echo "FAIL: gpu_workers printed no worker count" >&2; exit 1; }
if [ "$n" != 0 ]; then
  echo "SKIP: a CUDA worker exists here (cuda=$n): run scripts/gpu-check.sh itself"
  exit 77
fi
# check_one_line NAME WANT_REGEX PACK: runs gpu-check.sh on PACK; non-zero, < 60 s, one line
# matching WANT_REGEX, and what comes back in $OUT: at most 8 plain files, ldd.txt among them.
check_one_line() {
  local name="$1" want="$2" pack="$3" out="$TMP/out-$1" t0 t1 rc lines
  t0="$(date +%s)"
  rc=0; OUT="$out" timeout 120 bash "$GC" "$pack" >"$TMP/$name.txt" 2>&1 || rc=$?
  t1="$(date +%s)"
  lines="$(wc -l <"$TMP/$name.txt")"
  echo "$name: exit $rc in $((t1 - t0)) s, $lines line(s): $(cat "$TMP/$name.txt")"
  [ "$rc" != 0 ] || fail "$name: gpu-check.sh exited 0"
  [ "$rc" != 124 ] || fail "$name: gpu-check.sh did not finish within 120 s"
  [ $((t1 - t0)) -lt 60 ] || fail "$name: gpu-check.sh took $((t1 - t0)) s (want under a minute)"
  [ "$lines" = 1 ] || fail "$name: gpu-check.sh printed $lines lines, want exactly 1"
  grep -Eq "$want" "$TMP/$name.txt" || fail "$name: the line does not match '$want'"
  [ -s "$out/ldd.txt" ] || fail "$name: no ldd.txt in \$OUT"
  local nfiles
  nfiles="$(find "$out" -type f | wc -l)"
  [ "$nfiles" -le 8 ] || fail "$name: $nfiles files in \$OUT, at most 8 come back"
  if find "$out" -mindepth 1 | sed "s#^$out/##" | grep -q '[^A-Za-z0-9._/-]'; then fail "$name: a name in \$OUT that does not come back"; fi
}
# 1. no CUDA worker: a pack of the built app and helper
mkdir -p "$TMP/p1/pack/bin" "$TMP/p1/pack/lib"
cp "$STARPU_ANP" "$W" "$TMP/p1/pack/bin/"
echo "commit: test pack" >"$TMP/p1/pack/MANIFEST"
tar -C "$TMP/p1" -czf "$TMP/p1.tar.gz" pack
check_one_line nogpu '^gpu-check: no CUDA worker exists' "$TMP/p1.tar.gz"
# 2. a library that is nowhere: a tiny program linked to a library left out of the pack
if command -v cc >/dev/null; then
  mkdir -p "$TMP/p2/pack/bin" "$TMP/p2/pack/lib" "$TMP/l"
  echo 'int gpucheck_missing(void) { return 0; }' >"$TMP/l/m.c"
  echo 'int gpucheck_missing(void); int main(void) { return gpucheck_missing(); }' >"$TMP/l/main.c"
  if cc -shared -fPIC -o "$TMP/l/libgpucheckmissing.so" "$TMP/l/m.c" &&
     cc -o "$TMP/p2/pack/bin/needs_missing" "$TMP/l/main.c" -L"$TMP/l" -lgpucheckmissing; then
    cp "$STARPU_ANP" "$W" "$TMP/p2/pack/bin/"
    tar -C "$TMP/p2" -czf "$TMP/p2.tar.gz" pack
    check_one_line missing '^gpu-check: library not found: libgpucheckmissing\.so' "$TMP/p2.tar.gz"
  else
    fail "could not build the missing-library program"
  fi
else
  echo "no C compiler: the missing-library case is not checked"
fi
finish
