# gpulib.sh — helpers for the GPU script tests (tests/scripts/gpu_*.sh; sourced after lib.sh).
# Not a test itself (the script-test glob takes names with an underscore).
#
# gpu_require_cuda: skip (exit 77) only when the gpu_workers helper reports cuda=0 (it prints
# "workers: cuda=N cpu=M total=T", tests/gpu_workers.c); a missing or broken helper is a failure.
# GPU_WORKERS names the helper (default: $DNN_BUILD_DIR/tests/gpu_workers; scripts/gpu-check.sh
# points it into the pack). DNN_GPU_TEST_CPU_AS_CUDA=1 (never set by CTest or gpu-check.sh) lets
# a machine without a GPU run a test's logic with a CPU configuration in place of the CUDA one:
# GPU_FAKE=1 then, and the test says it is not a GPU run.
GPU_WORKERS="${GPU_WORKERS:-${DNN_BUILD_DIR:-}/tests/gpu_workers}"
GPU_FAKE=0
CKPT_COMPARE="$(dirname "${BASH_SOURCE[0]}")/ckpt_compare.py"
PYTHON="${PYTHON:-$(command -v python3 || echo /opt/torch/.venv/bin/python3)}"
gpu_require_cuda() {
  [ -x "$GPU_WORKERS" ] || { echo "FAIL: no gpu_workers helper at '$GPU_WORKERS'" >&2; exit 1; }
  local out n
  out="$(STARPU_NCPU=1 timeout 120 "$GPU_WORKERS" 2>&1 || true)" # its status: the count below says
  n="$(printf '%s\n' "$out" | sed -n 's/^workers: cuda=\([0-9][0-9]*\) .*/\1/p' | head -1)"
  [ -n "$n" ] || { echo "FAIL: gpu_workers printed no worker count: $out" >&2; exit 1; }
  echo "gpu_workers: cuda=$n"
  if [ "$n" = 0 ]; then
    if [ "${DNN_GPU_TEST_CPU_AS_CUDA:-0}" -gt 0 ] 2>/dev/null; then
      GPU_FAKE=1
      echo "DNN_GPU_TEST_CPU_AS_CUDA: a CPU configuration stands in for the CUDA one (NOT a GPU run)"
      return 0
    fi
    echo "SKIP: starpu_cuda_worker_get_count() = 0 (no CUDA worker)"
    exit 77
  fi
}
# train_run TAG NET ENV...: 5 training steps of NET on synthetic data (seed 1, batch 64 in 4
# chunks, FP32 CUDA math), metrics in $TMP/TAG.csv, checkpoint $TMP/TAG.ckpt, stderr $TMP/TAG.err;
# prints the result line. Extra arguments are environment assignments for this run.
GPU_STEPS="${GPU_STEPS:-5}"
train_run() {
  local tag="$1" net="$2"; shift 2
  env DNN_CUDA_MATH=fp32 "$@" timeout "${GPU_RUN_TIMEOUT:-120}" "$STARPU_ANP" train --net "$net" --data synthetic \
    --batch 64 --chunks 4 --seed 1 --max-steps "$GPU_STEPS" --no-eval --metrics "$TMP/$tag.csv" \
    --checkpoint "$TMP/$tag.ckpt" --quiet 2>"$TMP/$tag.err" | tail -1
}
# losses_match A B TOL: the train_step losses of $TMP/A.csv and $TMP/B.csv: GPU_STEPS of each,
# finite, |a - b| <= TOL * |a| at every step. Prints them.
losses_match() {
  local a="$TMP/$1.csv" b="$TMP/$2.csv" tol="$3" msg
  msg="$(awk -F, -v tol="$tol" -v want="$GPU_STEPS" -v A="$1" -v B="$2" '
    FNR == 1 { f++ } f == 1 && $1 == "train_step" { la[$3] = $4; na++ }
    f == 2 && $1 == "train_step" { lb[$3] = $4; nb++ }
    function finite(x) { return x ~ /^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/ }
    END {
      if (na != want || nb != want) { printf "steps: %s has %d, %s has %d, want %d", A, na, B, nb, want; exit 1 }
      bad = ""
      for (s = 1; s <= want; s++) {
        if (!finite(la[s]) || !finite(lb[s])) { bad = bad sprintf(" step %d not finite (%s, %s)", s, la[s], lb[s]); continue }
        d = la[s] - lb[s]; if (d < 0) d = -d; r = la[s] < 0 ? -la[s] : la[s]
        if (d > tol * r) bad = bad sprintf(" step %d: %s vs %s (rel %.2g)", s, la[s], lb[s], d / r)
        line = line sprintf(" %s/%s", la[s], lb[s])
      }
      if (bad != "") { printf "%s", bad; exit 1 }
      printf "losses %s/%s:%s", A, B, line
    }' "$a" "$b")" || { fail "$1 vs $2: $msg"; return 1; }
  echo "$msg"
}
# params_match A B TOL: every tensor of the two checkpoints (weights, momentum buffers, batch-norm
# running statistics) within TOL in relative norm, ||a - b|| / ||a|| (tests/scripts/ckpt_compare.py).
params_match() {
  local out worst
  out="$("$PYTHON" "$CKPT_COMPARE" "$TMP/$1.ckpt" "$TMP/$2.ckpt")" || { fail "$1 vs $2: ckpt_compare failed: $out"; return 1; }
  worst="$(printf '%s\n' "$out" | tail -1)"
  echo "params $1/$2: $worst"
  local r
  r="$(printf '%s\n' "$worst" | awk '{print $3}')"
  case "$r" in ''|*[!0-9.eE+-]*) fail "$1 vs $2: worst rel_norm '$r' is not a finite number"; return 1 ;; esac
  fcmp "$r <= $3" || { printf '%s\n' "$out" | sort -g -k3 | tail -5 >&2; fail "$1 vs $2: worst tensor rel_norm $r > $3"; return 1; }
}
