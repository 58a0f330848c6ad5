#!/usr/bin/env bash
# mpi_bn_global — --batchnorm global over ranks: resnet8 (and resnet20, fewer runs), 20 steps,
# N = 2 and 4 ranks x tree and ring all-reduce x K = 1, 2, 4, 8 chunks per rank x lws and dmda
# (each rank count and all-reduce with two of the (K, scheduler) pairs, so that every K and both
# schedulers meet both): per-step losses and final parameters equal one process with K = 1
# within TOL relative. Then the "ghost batch" equivalence: with --batchnorm local, K chunks of b
# samples in one process follow the trajectory of K ranks x 1 chunk of b samples (sync), which
# is what lets one machine reproduce a cluster's per-GPU statistics.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/bnlib.sh"
need_fashion_mnist
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
export STARPU_NCPU=1
# TOL: the measured figures are in docs/batchnorm.md (the invariance table); 1e-5 is the issue's bound.
TOL="${BN_TOL:-1e-5}"
BN_LAUNCH=()
check() { # check WHAT REF RUN
  bn_compare "$2" "$3" || return 0 # (failed, with its line)
  echo "$1: loss $BN_DL params $BN_DP"
  fcmp "$BN_DL <= $TOL && $BN_DP <= $TOL" || fail "$1: loss $BN_DL, params $BN_DP > $TOL"
}
for net in resnet8 resnet20; do
  LINE="$(STARPU_SCHED=lws bn_run "$TMP/ref_$net" $net --chunks 1 --batchnorm global)" || { cat "$TMP/ref_$net.err" >&2; fail "$net 1 process failed"; continue; }
  SPECS="2:tree:1:lws 2:tree:4:dmda 2:ring:2:dmda 2:ring:8:lws 4:tree:2:lws 4:tree:8:dmda 4:ring:1:dmda 4:ring:4:lws"
  [ "$net" = resnet20 ] && SPECS="2:tree:2:dmda 4:ring:8:lws" # fewer runs (CI time)
  for spec in $SPECS; do
    IFS=: read -r np ar K sched <<<"$spec"
    BN_LAUNCH=("${ANP_MPIRUN[@]}" -np "$np" -x STARPU_SCHED=$sched -x STARPU_NCPU)
    LINE="$(bn_run "$TMP/run" $net --chunks $K --batchnorm global --allreduce $ar)" || { cat "$TMP/run.err" >&2; fail "$net $spec failed"; continue; }
    [ "$(result_field "$LINE" ranks)" = "$np" ] && [ "$(result_field "$LINE" batchnorm)" = global ] || fail "$net $spec: result line: $LINE"
    check "$net global N=$np $ar K=$K $sched (vs 1 process K=1)" "$TMP/ref_$net" "$TMP/run"
  done
  BN_LAUNCH=()
done
# Ghost batch: local statistics, 4 chunks of 8 in one process = 4 ranks x 1 chunk of 8; and
# 2 ranks x 2 chunks of 8. At lr 0.0002 (measured there: parameters 5.5e-7 and 4.3e-6, loss
# 4.4e-7 and 1.3e-6): at 0.0005, 2 ranks x 2 chunks measured 7.0e-6 on the parameters, the same
# every run but close to the bound; the difference is the trajectory's sensitivity to the
# gradients' summation order (docs/batchnorm.md), which the smaller rate damps.
BN_LAUNCH=("${ANP_MPIRUN[@]}" -np 2 -x STARPU_NCPU)
LINE="$(bn_run "$TMP/local2" resnet8 --chunks 2 --batchnorm local)" || { cat "$TMP/local2.err" >&2; fail "local over 2 ranks failed"; }
# ... local statistics over ranks are not global ones (so the checks below can fail)
if bn_compare "$TMP/ref_resnet8" "$TMP/local2"; then
  echo "local, 2 ranks x 2 chunks vs global 1 process: loss $BN_DL params $BN_DP"
  fcmp "$BN_DL > 100 * $TOL" || fail "local statistics over 2 ranks stay within $BN_DL of global: the test cannot tell them apart"
fi
export BN_LR=0.0002
BN_LAUNCH=()
LINE="$(bn_run "$TMP/ghost1" resnet8 --chunks 4 --batchnorm local)" || { cat "$TMP/ghost1.err" >&2; fail "ghost: 1 process failed"; }
for spec in 4:1 2:2; do
  IFS=: read -r np K <<<"$spec"
  BN_LAUNCH=("${ANP_MPIRUN[@]}" -np "$np" -x STARPU_NCPU)
  LINE="$(bn_run "$TMP/ghostN" resnet8 --chunks $K --batchnorm local)" || { cat "$TMP/ghostN.err" >&2; fail "ghost: $np ranks failed"; continue; }
  check "ghost batch: local, $np ranks x $K chunk(s) of 8 vs 1 process x 4 chunks of 8" "$TMP/ghost1" "$TMP/ghostN"
done
unset BN_LR
# async ranks train their own replicas: global statistics then cover a rank's shard; it runs.
BN_LAUNCH=("${ANP_MPIRUN[@]}" -np 2 -x STARPU_NCPU)
LINE="$(bn_run "$TMP/async" resnet8 --chunks 2 --batchnorm global --mode async --staleness 1)" || { cat "$TMP/async.err" >&2; fail "async with global statistics failed"; }
[ "$(result_field "$LINE" mode)" = async ] || fail "async: result line: $LINE"
finish
