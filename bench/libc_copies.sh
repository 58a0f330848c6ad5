#!/usr/bin/env bash
# libc_copies.sh — who calls libc's memcpy / memmove / memset, how often and for how many bytes:
# runs COMMAND with bench/libc_copies_shim.c preloaded and prints its callers, most calls first,
# named by addr2line (function, in the binary or library that made the call).
#
#   bench/libc_copies.sh [--top N] [--min-calls C] -- COMMAND...
#   e.g. bench/libc_copies.sh -- env STARPU_NCPU=2 build/apps/starpu_anp bench --net resnet8 --batch 256 --steps 6 --warmup 1 --quiet
#
# Output: one line per caller: function calls bytes bytes_per_call (memcpy|memmove|memset) object.
# Many calls of a few dozen bytes are the cost to look for: each is a call into libc (codelets/
# short_copy.h says why). The shim's own copies are slow, so ignore COMMAND's timings under it.
# Needs cc and addr2line (binutils). Exit status: COMMAND's.
set -euo pipefail
TOP=15 MIN=1000
while [ $# -gt 0 ]; do
  case "$1" in
    --top) TOP="${2:?}"; shift 2 ;;
    --min-calls) MIN="${2:?}"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    --) shift; break ;;
    *) echo "libc_copies.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "libc_copies.sh: give a COMMAND after --" >&2; exit 2; }
[[ "$TOP" =~ ^[0-9]+$ && "$MIN" =~ ^[0-9]+$ ]] || { echo "libc_copies.sh: --top and --min-calls take integers" >&2; exit 2; }
command -v addr2line >/dev/null || { echo "libc_copies.sh: addr2line (binutils) is missing" >&2; exit 1; }
TMP="$(mktemp -d /tmp/libc-copies-XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
cc -O2 -fPIC -shared -fno-builtin -o "$TMP/shim.so" "$(dirname "$0")/libc_copies_shim.c" -ldl \
  || { echo "libc_copies.sh: building the shim failed" >&2; exit 1; }
rc=0
LIBC_COPIES_OUT="$TMP/out" LIBC_COPIES_MIN_CALLS="$MIN" LD_PRELOAD="$TMP/shim.so${LD_PRELOAD:+:$LD_PRELOAD}" "$@" || rc=$?
[ -s "$TMP/out" ] || { echo "libc_copies.sh: no caller reached $MIN calls or 16 MiB" >&2; exit "$rc"; }
printf '%-40s %12s %14s %10s %-8s %s\n' function calls bytes per_call call object
sort -k3,3nr "$TMP/out" | head -n "$TOP" | while read -r kind bytes calls obj off; do
  fn="$(addr2line -f -e "$obj" "$off" 2>/dev/null | head -1)"
  case "$kind" in 0) k=memcpy ;; 1) k=memmove ;; *) k=memset ;; esac
  printf '%-40s %12s %14s %10s %-8s %s\n' "${fn:-?}" "$calls" "$bytes" "$((bytes / (calls > 0 ? calls : 1)))" "$k" "$(basename "$obj")"
done
exit "$rc"
