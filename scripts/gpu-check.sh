#!/usr/bin/env bash
# gpu-check.sh [PACK] — run on a lent GPU machine, from the repository root, with the pack that
# scripts/gpu-pack.sh makes (PACK, default gpu-pack.tar.gz) carried. docs/gpu-run.md has the how
# and the why. In order, each step guarded by its own timeout, the whole by GPU_CHECK_BUDGET
# seconds (default 345: under 6 minutes):
#   1. unpack; ldd on every packed binary, saved to $OUT/ldd.txt; when a library is "not found",
#      the lib folders of the pip wheels of python's `nvidia` packages (python3 on PATH, or
#      /opt/torch/.venv/bin/python3) join LD_LIBRARY_PATH; a library still missing stops the
#      script at once with one line naming it;
#   2. the CUDA worker count (the packed gpu_workers helper: starpu_cuda_worker_get_count(); its
#      first StarPU start also calibrates the bus, STARPU_BUS_CALIBRATE=1) and nvidia-smi -L; no
#      CUDA worker: one line saying so, exit status non-zero (a machine without a GPU: CI);
#   3. every packed gpu_* / unit_cuda_* test (90 s each), the op harness's gpu mode (op_harness
#      gpu) and the GPU script tests tests/scripts/gpu_*.sh (not gpu_check_*, the CI-side test of
#      this script), those of --precision bf16 first (*bf16*: gpu_conv2d_bf16, op_harness gpu,
#      gpu_bf16_train.sh); exit status 77 (skipped) counts as a FAILURE here;
#   4. calibration (STARPU_CALIBRATE=1, dmda, 1 CUDA worker + the CPUs) of resnet18 and resnet50,
#      so no figure below is measured while StarPU calibrates;
#   5. benchmarks (60 s each), most valuable first, while time is left: resnet18/resnet50 at
#      224x224, batch 128, synthetic data, 1 CUDA worker + the host's CPUs under dmda and PyTorch
#      (cuDNN) on the same GPU, TF32 then FP32; then 1 CUDA worker with 0, 1 and 4 CPU workers.
#      Each run's exit status, a finite loss and the worker count it reports are checked.
# One STARPU_HOME across the script (its perf models come back). What comes back in $OUT (or
# ./gpu-out): summary.txt, logs.txt (every log, concatenated), ldd.txt, bench.txt (the table),
# perfmodels-<device>-<date>.tar.gz ($STARPU_HOME/.starpu/sampling with device.txt). Exit status:
# the number of failures (tests, benchmark runs, timeouts), 0 when all passed.
set -euo pipefail # a step expected to fail says so (|| RC=$?, || true); failures are counted
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=lib.sh
source "$ROOT/scripts/lib.sh"
PACK="${1:-gpu-pack.tar.gz}"
OUTDIR="${OUT:-$PWD/gpu-out}"
BUDGET="${GPU_CHECK_BUDGET:-345}"
T_TEST="${GPU_CHECK_TEST_TIMEOUT:-90}"
T_BENCH="${GPU_CHECK_BENCH_TIMEOUT:-60}"
BATCH="${GPU_CHECK_BATCH:-128}"
INPUT="${GPU_CHECK_INPUT:-224}"
CHUNKS="${GPU_CHECK_CHUNKS:-8}"
STEPS="${GPU_CHECK_STEPS:-10}"
WARMUP="${GPU_CHECK_WARMUP:-3}"

# ------------------------------------------------------------------ shared helpers
note() { printf '%s\n' "$*" >>"$OUTDIR/summary.txt"; }          # summary only
say() { printf '%s\n' "$*" | tee -a "$OUTDIR/summary.txt"; }     # summary and console
failed() { printf '%s\n' "$*" >>"$WORK/failures"; }
is_finite() { [[ "$1" =~ ^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$ ]]; }
field() { anp_result_field "$1" "$2" || true; } # a broken result line reads as missing fields
now() { date +%s; }
smi_L() { if command -v nvidia-smi >/dev/null; then nvidia-smi -L 2>&1 | paste -sd ';'; else echo "no nvidia-smi on PATH"; fi; }
stop() { printf '%s\n' "$2" | tee -a "$OUTDIR/summary.txt"; exit "$1"; } # the one line, then out

# ------------------------------------------------------------------ outer: guard + finalize
if [ "${GPU_CHECK_PHASE:-}" != inner ]; then
  mkdir -p "$OUTDIR"
  : >"$OUTDIR/summary.txt"
  WORK="$(mktemp -d)"
  export WORK OUTDIR
  T0="$(now)"
  rc=0; GPU_CHECK_PHASE=inner GPU_CHECK_T0="$T0" timeout -k 10 "$BUDGET" bash "$0" "$@" || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    # the step that was running has its own process group (its timeout): end it too
    [ -s "$WORK/current.pid" ] && kill -KILL -- "-$(cat "$WORK/current.pid")" 2>/dev/null || true
    failed "overall timeout after ${BUDGET}s"
    say "gpu-check: overall timeout (${BUDGET}s) reached; later steps did not run"
  fi
  # Logs: one file, in step order, each under a header (truncated to 2 MB each).
  if [ -d "$WORK/logs" ]; then
    for f in "$WORK"/logs/*.log; do
      [ -e "$f" ] || continue
      printf '\n===== %s\n' "$(basename "$f" .log)"
      if [ "$(stat -c %s "$f")" -gt 2000000 ]; then echo "[first 1 MB and last 1 MB]"; head -c 1000000 "$f"; echo; echo "[...]"; tail -c 1000000 "$f"; else cat "$f"; fi
    done >"$OUTDIR/logs.txt"
  fi
  # The perf models (CUDA and CPU codelets, bus), with the device and the date.
  if [ -d "$WORK/starpu_home/.starpu/sampling" ]; then
    dev="$(sed -n 's/^device: //p' "$WORK/device.txt" 2>/dev/null | head -1 || true)"
    tag="$(printf '%s' "${dev:-unknown}" | tr -c 'A-Za-z0-9._-' '_')-$(date -u +%Y%m%d)"
    tar -C "$WORK/starpu_home/.starpu" -czf "$OUTDIR/perfmodels-$tag.tar.gz" sampling \
      -C "$WORK" device.txt 2>/dev/null && note "perf models: perfmodels-$tag.tar.gz"
  fi
  nfail=0
  [ -s "$WORK/failures" ] && nfail="$(wc -l <"$WORK/failures")"
  if [ "$rc" = 0 ] || [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    note "wall: $(( $(now) - T0 )) s"
    say "failed: $nfail$( [ "$nfail" -gt 0 ] && printf ' (%s)' "$(paste -sd ';' "$WORK/failures")")"
    rm -rf "$WORK"
    [ "$nfail" -gt 100 ] && nfail=100
    exit "$nfail"
  fi
  rm -rf "$WORK"
  exit "$rc" # stopped early (no pack, a missing library, no CUDA worker): its one line is out
fi

# ------------------------------------------------------------------ inner
T0="${GPU_CHECK_T0:-$(now)}"
DEADLINE=$((T0 + BUDGET - 15)) # leave time for the outer's tarball and logs
left() { echo $((DEADLINE - $(now))); }
mkdir -p "$WORK/logs" "$WORK/starpu_home"
: >"$WORK/failures"
STEP=0
# run_logged NAME TIMEOUT CMD...: runs CMD with its own timeout (own process group), output to
# $WORK/logs/NN-NAME.log; sets RC and SECS.
run_logged() {
  local name="$1" tmo="$2"; shift 2
  STEP=$((STEP + 1))
  LOG="$WORK/logs/$(printf '%02d' "$STEP")-$name.log"
  local t
  t="$(now)"
  timeout -k 5 "$tmo" "$@" >"$LOG" 2>&1 &
  local pid=$!
  echo "$pid" >"$WORK/current.pid"
  RC=0; wait "$pid" || RC=$?
  : >"$WORK/current.pid"
  SECS=$(($(now) - t))
}

# 1. unpack, ldd, libraries
tar -C "$WORK" -xzf "$PACK" 2>"$WORK/untar.err" || stop 2 "gpu-check: cannot unpack $PACK: $(head -1 "$WORK/untar.err")"
B="$WORK/pack/bin"
LIBS="$WORK/pack/lib"
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && LIBS="$LIBS:$d"
done
export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
PYS=()
for p in python3 /opt/torch/.venv/bin/python3; do
  command -v "$p" >/dev/null 2>&1 && PYS+=("$(command -v "$p")")
done
ldd_all() { for b in "$B"/*; do [ -f "$b" ] && [ -x "$b" ] && { echo "== $(basename "$b")"; ldd "$b" 2>&1 || true; }; done; return 0; }
ldd_all >"$OUTDIR/ldd.txt"
if grep -q 'not found' "$OUTDIR/ldd.txt"; then
  wheel_libs=""
  for py in "${PYS[@]}"; do
    wheel_libs="$("$py" - 2>/dev/null <<'PY'
import os
import nvidia  # the pip wheels' namespace package (nvidia-cudnn-cu13, nvidia-cublas, ...)
found = []
for base in list(nvidia.__path__):
    depth0 = base.rstrip(os.sep).count(os.sep)
    for root, dirs, files in os.walk(base):
        if root.count(os.sep) - depth0 >= 3:
            dirs[:] = []
        if os.path.basename(root) in ("lib", "lib64") and any(".so" in f for f in files):
            found.append(root)
print(":".join(sorted(set(found))))
PY
)" && [ -n "$wheel_libs" ] && { note "wheel libraries (from $py): $wheel_libs"; break; }
  done
  [ -n "$wheel_libs" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$wheel_libs"
  { echo; echo "### after adding the pip wheels' lib folders: ${wheel_libs:-none found}"; ldd_all; } >>"$OUTDIR/ldd.txt"
  missing="$(ldd_all | awk '/^== /{b=$2} /not found/{print $1 " (needed by " b ")"}' | sort -u | head -3 | paste -sd ',' | sed 's/,/, /g')"
  if [ -n "$missing" ]; then
    stop 2 "gpu-check: library not found: $missing"
  fi
fi
note "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
note "pack: $(head -4 "$WORK/pack/MANIFEST" 2>/dev/null | paste -sd ';')"

# 2. the CUDA worker count (first StarPU start: bus calibration into the one STARPU_HOME)
GPU_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)"
# The perf-model files are named after STARPU_HOSTNAME: the device's name (NVIDIA_H200), so the
# simulation finds them with STARPU_HOSTNAME=NVIDIA_H200 whatever the lent machine was called.
export STARPU_HOME="$WORK/starpu_home" STARPU_SILENT=1
export STARPU_HOSTNAME="${GPU_CHECK_HOSTNAME:-$(printf '%s' "${GPU_NAME:-nogpu}" | tr -c 'A-Za-z0-9._-' '_')}"
export DNN_TEST_DATA="$ROOT/tests/data"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "device: $GPU_NAME"
  echo "nvidia-smi -L: $(smi_L)"
  echo "driver, memory: $(nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
  echo "host: $(uname -n), $(nproc) cores; STARPU_HOSTNAME=$STARPU_HOSTNAME (the perf-model file suffix)"
} >"$WORK/device.txt"
cat "$WORK/device.txt" >>"$OUTDIR/summary.txt"
if [ ! -x "$B/gpu_workers" ]; then
  stop 3 "gpu-check: no gpu_workers helper in the pack (rebuild it with scripts/gpu-pack.sh)"
fi
run_logged gpu_workers 60 env STARPU_BUS_CALIBRATE=1 "$B/gpu_workers"
ncuda="$(sed -n 's/^workers: cuda=\([0-9][0-9]*\) .*/\1/p' "$LOG" | head -1 || true)"
if [ -z "$ncuda" ] || [ "$ncuda" = 0 ]; then
  stop 3 "gpu-check: no CUDA worker exists (starpu_cuda_worker_get_count() = ${ncuda:-unknown}; gpu_workers exit $RC; nvidia-smi -L: $(smi_L))"
fi
say "$(cat "$WORK/device.txt")"
say "starpu_cuda_worker_get_count() = $ncuda ($(grep '^workers:' "$LOG"))"
[ "$RC" = 0 ] && say "test gpu_workers: PASS (${SECS}s)" || { say "test gpu_workers: FAIL($RC)"; failed "gpu_workers"; }

# 3. tests: C tests then the GPU script tests; 77 (skipped) is a failure here
status() { case "$1" in 0) echo PASS ;; 77) echo "FAIL(77: skipped on the GPU machine)" ;; 124|137) echo "FAIL(timeout ${T_TEST}s)" ;; *) echo "FAIL($1)" ;; esac; }
SB="$WORK/scripttests"
mkdir -p "$SB"
PY_TORCH=""
for py in "${PYS[@]}"; do "$py" -c 'import torch' 2>/dev/null && { PY_TORCH="$py"; break; }; done
c_test() { # BINARY [ARGS]: a packed C test
  local t="$1" name
  name="$(basename "$t")${2:+ $2}"
  if [ "$(left)" -lt 30 ]; then say "test $name: NOT RUN (time)"; failed "$name not run"; return; fi
  run_logged "$(basename "$t")${2:+_$2}" "$T_TEST" "$@"
  say "test $name: $(status "$RC") (${SECS}s)"
  [ "$RC" = 0 ] || failed "$name"
}
script_test() { # tests/scripts/gpu_*.sh
  local s="$1" name
  name="$(basename "$s" .sh)"
  if [ "$(left)" -lt 30 ]; then say "test $name: NOT RUN (time)"; failed "$name not run"; return; fi
  run_logged "$name" "$T_TEST" env STARPU_ANP="$B/starpu_anp" GPU_WORKERS="$B/gpu_workers" \
    DNN_BUILD_DIR="$SB" DNN_SOURCE_DIR="$ROOT" PYTHON="${PY_TORCH:-${PYS[0]:-python3}}" bash "$s"
  say "test $name: $(status "$RC") (${SECS}s)"
  [ "$RC" = 0 ] || failed "$name"
}
# --precision bf16 first (its CUDA paths have run on no GPU before): the cuDNN bf16 conv against
# the CPU's fp32 (gpu_conv2d_bf16), the op harness's gpu mode (every op's CUDA codelets against
# the CPU's, dense's bf16 cuBLAS GEMMs among them), the GPU-only bf16 training; then the rest.
for t in "$B"/gpu_*bf16*; do [ -x "$t" ] && c_test "$t"; done
[ -x "$B/op_harness" ] && c_test "$B/op_harness" gpu
for s in "$ROOT"/tests/scripts/gpu_*bf16*.sh; do [ -e "$s" ] && script_test "$s"; done
for t in "$B"/gpu_* "$B"/unit_cuda_*; do
  [ -x "$t" ] || continue
  case "$(basename "$t")" in gpu_workers|*bf16*) continue ;; esac
  c_test "$t"
done
for s in "$ROOT"/tests/scripts/gpu_*.sh; do
  [ -e "$s" ] || continue
  case "$(basename "$s" .sh)" in gpu_check_*|*bf16*) continue ;; esac # gpu_check_*: the CI-side test of this script
  script_test "$s"
done

# 4. calibration, then 5. benchmarks
TABLE="$OUTDIR/bench.txt"
{
  echo "# $(sed -n 's/^device: //p' "$WORK/device.txt"), $(date -u +%Y-%m-%d); batch $BATCH, ${INPUT}x${INPUT}, synthetic data, $WARMUP warm-up + $STEPS timed steps; starpu-anp: --chunks $CHUNKS, STARPU_SCHED=dmda, perf models calibrated first"
  echo "| run | framework | net | math | cpu workers | cuda workers | images/s | loss | status | wall s |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
} >"$TABLE"
NB_OK=0 NB_FAIL=0
# anp LABEL NET MATH NCPU(or "all") [CALIBRATE]: one starpu_anp bench run
anp() {
  local label="$1" net="$2" math="$3" ncpu="$4" cal="${5:-0}" envs=(STARPU_SCHED=dmda STARPU_NCUDA=1 DNN_CUDA_MATH="$3")
  [ "$ncpu" != all ] && envs+=(STARPU_NCPU="$ncpu")
  local steps="$STEPS" warm="$WARMUP"
  [ "$cal" = 1 ] && { envs+=(STARPU_CALIBRATE=1); steps=6; warm=0; }
  if [ "$(left)" -lt $((T_BENCH + 5)) ]; then
    echo "| $label | starpu-anp | $net | $math | $ncpu | 1 | - | - | NOT RUN (time) | - |" >>"$TABLE"
    say "bench $label: NOT RUN (time)"; return
  fi
  run_logged "bench-$label" "$T_BENCH" env "${envs[@]}" "$B/starpu_anp" bench --net "$net" --input "$INPUT" \
    --batch "$BATCH" --chunks "$CHUNKS" --steps "$steps" --warmup "$warm" --quiet
  local line ips loss gcpu gcuda st=ok
  line="$(anp_result_line "$LOG" || true)"
  ips="$(field "$line" images_per_s)"; loss="$(field "$line" train_loss)"
  gcpu="$(field "$line" ncpu)"; gcuda="$(field "$line" ncuda)"
  if [ "$RC" != 0 ]; then st="FAIL(exit $RC)"
  elif ! is_finite "$loss"; then st="FAIL(loss '$loss')"
  elif [ "$gcuda" != 1 ]; then st="FAIL(ncuda=$gcuda)"
  elif [ "$ncpu" != all ] && [ "$gcpu" != "$ncpu" ]; then st="FAIL(ncpu=$gcpu)"
  fi
  [ "$st" = ok ] && NB_OK=$((NB_OK + 1)) || { NB_FAIL=$((NB_FAIL + 1)); failed "bench $label: $st"; }
  echo "| $label | starpu-anp | $net | $math | ${gcpu:-$ncpu} | ${gcuda:-?} | ${ips:--} | ${loss:--} | $st | $SECS |" >>"$TABLE"
  say "bench $label: $st images_per_s=${ips:--} loss=${loss:--} ncpu=${gcpu:-?} ncuda=${gcuda:-?} (${SECS}s)"
}
# torchrun LABEL NET MATH: PyTorch (cuDNN) on the same GPU, bench/pytorch_nets.py
torchrun() {
  local label="$1" net="$2" math="$3"
  if [ -z "$PY_TORCH" ]; then
    echo "| $label | pytorch | $net | $math | - | - | - | - | FAIL(no python with torch) | - |" >>"$TABLE"
    NB_FAIL=$((NB_FAIL + 1)); failed "bench $label: no torch"; say "bench $label: FAIL(no python with torch)"; return
  fi
  if [ "$(left)" -lt $((T_BENCH + 5)) ]; then
    echo "| $label | pytorch | $net | $math | - | - | - | - | NOT RUN (time) | - |" >>"$TABLE"
    say "bench $label: NOT RUN (time)"; return
  fi
  run_logged "bench-$label" "$T_BENCH" env PYTHONUNBUFFERED=1 "$PY_TORCH" "$ROOT/bench/pytorch_nets.py" --net "$net" \
    --input "$INPUT" --batch "$BATCH" --device cuda --math "$math" --steps "$STEPS" --warmup "$WARMUP" \
    --threads "$(nproc)"
  local line ips loss st=ok
  line="$(anp_result_line "$LOG" || true)"
  ips="$(field "$line" images_per_s)"; loss="$(field "$line" train_loss)"
  if [ "$RC" != 0 ]; then st="FAIL(exit $RC)"; elif ! is_finite "$loss"; then st="FAIL(loss '$loss')"; fi
  [ "$st" = ok ] && NB_OK=$((NB_OK + 1)) || { NB_FAIL=$((NB_FAIL + 1)); failed "bench $label: $st"; }
  echo "| $label | pytorch $(field "$line" torch) | $net | $math | - | GPU | ${ips:--} | ${loss:--} | $st | $SECS |" >>"$TABLE"
  say "bench $label: $st images_per_s=${ips:--} loss=${loss:--} (${SECS}s)"
}
anp calibrate-resnet18 resnet18 tf32 all 1
anp calibrate-resnet50 resnet50 tf32 all 1
anp r18-tf32 resnet18 tf32 all
torchrun torch-r18-tf32 resnet18 tf32
anp r50-tf32 resnet50 tf32 all
torchrun torch-r50-tf32 resnet50 tf32
anp r18-fp32 resnet18 fp32 all
torchrun torch-r18-fp32 resnet18 fp32
anp r50-fp32 resnet50 fp32 all
torchrun torch-r50-fp32 resnet50 fp32
for n in 0 1 4; do anp "r18-tf32-cpu$n" resnet18 tf32 "$n"; done
for n in 0 1 4; do anp "r50-tf32-cpu$n" resnet50 tf32 "$n"; done
say "bench runs: $NB_OK ok, $NB_FAIL failed (exit status, finite loss, worker counts)"
cat "$TABLE" >>"$OUTDIR/summary.txt"
exit 0
