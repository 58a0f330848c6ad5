#!/usr/bin/env bash
# unit_blas_isa — the BLAS in use runs kernels at the CPU's ISA: the result line's
# blas= (library:kernel set) and cpu_isa= fields, blas_isa= (the kernels' ISA) not below cpu_isa=.
# Fails on a machine whose BLAS falls back below the CPU (SSE kernels on an AVX-512 CPU, say) and
# the start-up fix (runtime/cpu_kernels.c) did not catch it. Then, on a CPU with AVX or more, forces
# OpenBLAS's oldest x86-64 kernels (OPENBLAS_CORETYPE=Prescott) to see the two other paths for real:
#   - with the user's OPENBLAS_CORETYPE honoured: a one-line warning naming the fix;
#   - with DNN_BLAS_CORETYPE=auto: the program re-executes itself on the CPU's kernels.
source "$(dirname "$0")/lib.sh"
set -euo pipefail
A="$STARPU_ANP"
export STARPU_NCPU=1
rank() { case "$1" in sse) echo 1 ;; avx) echo 2 ;; avx2) echo 3 ;; avx512) echo 4 ;; *) echo 0 ;; esac; }
run() { "$A" bench --net lenet5 --batch 16 --steps 2 --warmup 1 --quiet 2>"$TMP/err" | tail -1; }

line="$(env -u OPENBLAS_CORETYPE -u DNN_BLAS_CORETYPE "$A" bench --net lenet5 --batch 16 --steps 2 --warmup 1 \
  --quiet 2>"$TMP/err" | tail -1)" || fail "bench failed: $(cat "$TMP/err")"
blas="$(result_field "$line" blas)"; isa="$(result_field "$line" cpu_isa)"; bisa="$(result_field "$line" blas_isa)"
echo "as installed: blas=$blas blas_isa=$bisa cpu_isa=$isa"
case "$blas" in openblas-*:*) ;; *) fail "blas='$blas': want openblas-<version>:<kernels>" ;; esac
[ "$(rank "$isa")" -gt 0 ] || fail "cpu_isa='$isa' is not one of sse avx avx2 avx512"
[ "$(rank "$bisa")" -gt 0 ] || fail "blas_isa='$bisa' (kernel set '$blas' not in runtime/cpu_kernels.c's table)"
if [ "$(rank "$bisa")" -lt "$(rank "$isa")" ]; then
  fail "the BLAS runs $bisa kernels ($blas) on this $isa CPU"
fi
grep -q . "$TMP/err" && fail "unexpected stderr: $(cat "$TMP/err")"

if [ "$(rank "$isa")" -ge 2 ]; then
  # The user's own OPENBLAS_CORETYPE is honoured, with one warning line that names the fix.
  line="$(OPENBLAS_CORETYPE=Prescott run)" || fail "bench with Prescott failed: $(cat "$TMP/err")"
  [ "$(result_field "$line" blas_isa)" = sse ] || fail "OPENBLAS_CORETYPE=Prescott not honoured: $line"
  [ "$(grep -c '^warning: OpenBLAS runs Prescott (sse) kernels.*set OPENBLAS_CORETYPE=' "$TMP/err")" = 1 ] ||
    fail "want one warning naming OPENBLAS_CORETYPE; stderr: $(cat "$TMP/err")"
  # DNN_BLAS_CORETYPE=auto: fixed by re-executing; the result is the CPU's kernels, no warning.
  line="$(OPENBLAS_CORETYPE=Prescott DNN_BLAS_CORETYPE=auto run)" || fail "bench auto failed: $(cat "$TMP/err")"
  [ "$(result_field "$line" blas_isa)" = "$isa" ] || fail "DNN_BLAS_CORETYPE=auto did not fix: $line"
  grep -q warning "$TMP/err" && fail "auto: unexpected warning: $(cat "$TMP/err")"
  # The start-up line says so (not --quiet).
  OPENBLAS_CORETYPE=Prescott DNN_BLAS_CORETYPE=auto "$A" bench --net lenet5 --batch 16 --steps 1 --warmup 1 \
    >/dev/null 2>"$TMP/err" || fail "bench auto (verbose) failed"
  grep -q "^cpu: .*isa=$isa; blas: openblas-.*($isa kernels; OPENBLAS_CORETYPE=.* set automatically: OpenBLAS had chosen Prescott)" \
    "$TMP/err" || fail "start-up line missing or wrong: $(grep '^cpu:' "$TMP/err")"
  # The re-executed process keeps its name (/proc/PID/comm), which ps, top and
  # bench/thread_cpu.sh (mpi_idle_cpu) go by: exec'ing /proc/self/exe had named it "exe".
  OPENBLAS_CORETYPE=Prescott DNN_BLAS_CORETYPE=auto "$A" bench --net lenet5 --batch 64 --steps 100000 --warmup 1 \
    >/dev/null 2>"$TMP/err.comm" &
  pid=$!
  for _ in $(seq 100); do grep -q '^cpu:' "$TMP/err.comm" && break; sleep 0.1; done
  comm="$(cat /proc/$pid/comm 2>/dev/null || true)"
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
  grep -q 'set automatically' "$TMP/err.comm" || fail "no re-execution seen: $(cat "$TMP/err.comm")"
  [ "$comm" = "$(basename "$A" | cut -c1-15)" ] || fail "re-executed process named '$comm', want '$(basename "$A")'"
  # keep: never re-executes.
  line="$(OPENBLAS_CORETYPE=Prescott DNN_BLAS_CORETYPE=keep run)" || fail "bench keep failed"
  [ "$(result_field "$line" blas_isa)" = sse ] || fail "DNN_BLAS_CORETYPE=keep re-executed: $line"
fi
# A bad value is a usage error: exit 2, one line naming the variable.
expect_rc 2 env DNN_BLAS_CORETYPE=fast "$A" bench --net lenet5 --batch 16 --steps 1 --warmup 1 --quiet
[ "$(printf '%s\n' "$ERR" | grep -c .)" = 1 ] && printf '%s' "$ERR" | grep -q DNN_BLAS_CORETYPE ||
  fail "bad DNN_BLAS_CORETYPE: want one line naming it, got: $ERR"
finish
