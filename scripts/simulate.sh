#!/usr/bin/env bash
# simulate.sh — predict training throughput on machines you do not have: StarPU + SimGrid.
#
#   scripts/simulate.sh [options] [-- extra bench options]
#
# The scheduler, the task DAG and the MPI protocol run for real (the same code as a real run,
# built with smpicc against the SimGrid StarPU); kernels and transfers become delays from perf
# models, on a simulated platform (docs/SIMULATION.md). Builds what is missing first
# (bootstrap --sim, build/ and build-sim/), calibrates this machine's CPU models on exactly the
# shapes to be simulated (once; cached), writes the platform (sim/platform.py), runs
# starpu_smpirun, prints the exact command, the result line, and appends a CSV row per run.
#
# Platform:  --nodes N        simulated nodes, one MPI rank each [1]
#            --cores C        CPU cores per node [GPU nodes: 4 per K80 die, 8 per GPU of the other
#                             kinds (the nodes of docs/SIMULATION.md's studies), at most 64; else
#                             this machine's]
#            --gpus G         GPUs per node [0]        --gpu KIND   k80 | p100 | v100 | a100 | h100 | h200
#                             [k80 when --gpus]; sim/platform.py GPUS: data-sheet peaks, docs/SIMULATION.md
#            --gpu-precision P  the simulated GPU math: fp32 | tf32 (A100 and later) | bf16 | fp16
#                             (tensor-core peak) [fp32]; in the platform name (-tf32) and the CSV row
#            --gpu-models M   fitted: the roofline's efficiencies fitted to published throughput
#                             where sim/platform.py FITTED has the GPU and precision
#                             (models_cuda=fitted-public), else the assumed ones (estimated);
#                             estimated: the assumed ones always (the figures of before the fit) [fitted]
#            --ncpu N         CPU workers per node [StarPU's own: the cores less one per GPU (its
#                             driver thread) and one for StarPU-MPI's progress thread; 0: GPU-only]
#            --pcie GBPS      host<->GPU bandwidth [the kind's]
#            --pcie-gen G     host<->GPU link: PCIe gen 3 | 4 | 5, x16 [the kind's]
#            --nvlink V       GPU<->GPU link: NVLink 1 | 2 | 3 | 4, or none (through PCIe) [the kind's]
#            --cpu KIND       the cores: here (this machine's, as calibrated) | e5-2667v2 (the Caffe
#                             seed's Xeon: each task's time split into compute, scaled by the peak
#                             ratio, and memory, shared on its socket; sim/platform.py CPUS) [here]
#            --cuda-models D  time CUDA workers from calibrated history files D/codelets/45/*.HOST
#            --cuda-host HOST (a real GPU run's STARPU_HOME/.starpu/sampling and its host name)
#                             instead of the roofline estimate [estimated]
#            --network NET    fdr | edr | 50gbe | 10gbe | 1gbe | infinite [fdr], or netns-RATE: the
#                             namespace hosts of tests/net/cluster.sh at `rate RATE` (docs/NETWORK.md);
#                             also hdr, ndr, 25gbe, 40gbe, 100gbe (TCP) and 10/25/40/100/200/400gbe-roce
#                             (`sim/platform.py --list-networks`; sources: docs/SIMULATION.md "Networks")
# Run:       --net NAME --batch B (global) --chunks K (per rank) --input N --steps S --warmup W
#            --batch-per-node B  instead of --batch: B samples per node whatever --nodes (weak scaling)
#            --mode sync|async --staleness S   (as `starpu_anp bench`)
#            --allreduce A    tree | ring | rhd | ps | auto [auto: the app's default; across simulated
#                             nodes rhd for a power-of-two node count, else the ring]
#            --bucket-mb M    gradient buckets of M MiB, 0 = off [auto: the app's default; across
#                             nodes 1 MiB, or a quarter of the model's gradients if less]
#            (the CSV and result line say what auto resolved to: allreduce=, bucket_mb=)
#            --grad-precision fp32|bf16  the all-reduces' messages (as `starpu_anp bench`: bf16 halves
#                             the bytes each message carries; the sums stay fp32) [fp32]; in the CSV row
#            --sched S        STARPU_SCHED [dmda]
# Sweep:     --nodes, --gpus, --sched, --mode and --allreduce take comma lists; every combination
#            runs, and a plot of images/s is written next to the CSV (gnuplot).
# Output:    --csv FILE       append one row per run [sim-results.csv]; GPU nodes: the memory per
#                             device the run needs (runtime/preflight.c) is printed and in the row
#            --platform-dir D keep the generated platform files in D [$CACHE/sim/platforms/...]
#            --calibrate-only calibrate the CPU models and stop
#            --calib-steps N  timed steps per calibration run [12]; a big net needs fewer (ResNet-50: 5)
#            --no-build       use build/ and build-sim/ as they are (they must exist)
#            --quiet          only the command lines and result lines
#            -h, --help       this help
# Environment: ANP_SIM_ASLR=1 runs the simulation with address-space randomisation (by default
#            it runs under `setarch -R`, so that the same command gives the same result).
#            ANP_SIM_SHARED_BLOCK_MB: SMPI's shared-memory block [64] (fewer mappings when larger).
#            ANP_SIM_FOLD_UNIQUE=1: one folded host buffer per size (16 ranks of GPT-2 XL need it).
#            ANP_SIM_GPU_ROOFLINE=EC:EM:LAUNCH overrides the roofline's eff_compute, eff_memory and
#            launch_us (sim/fit_gpu.py's knob; labelled models_cuda=estimated).
#            ANP_SIM_GPU_MEMSIZE_GB=G: the simulated GPU's memory (sim/fit_gpu.py: a published batch
#            whose activations, as this tool keeps them, exceed the card's).
#            ANP_SIM_CPU_VEC_GBS=R: CPU workers time the vector codelets (the all-reduce's sums and
#            copies) at R GB/s instead of calibrating them in an N-rank real run, which nodes with
#            CPU workers (the default) otherwise need: 16 ResNet-50 ranks do not fit in 24 GB.
# Exit status: 0 ok, 1 a run failed (its one-line reason is printed), 2 bad usage.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=lib.sh
source "$ROOT/scripts/lib.sh" # the result line, the mpirun flags
usage() { echo "simulate.sh: $*" >&2; echo "(see scripts/simulate.sh --help)" >&2; exit 2; }
say() { [ "$QUIET" = 1 ] || echo "[simulate] $*" >&2; }

NODES=1 CORES="" GPUS=0 GPU="" GPU_PREC=fp32 GPU_MODELS=fitted PCIE="" PCIE_GEN="" NVLINK="" NETWORK=fdr CPU_KIND=here
NET=lenet5 BATCH=64 BATCH_PER_NODE="" CHUNKS="" INPUT="" STEPS=20 WARMUP=3 MODE=sync ALLREDUCE=auto BUCKET_MB=auto STALENESS=4 GRAD_PREC=fp32
CUDA_MODELS="" CUDA_HOST=""
SCHED=dmda NCPU="" CSV="sim-results.csv" PDIR="" CALIBRATE_ONLY=0 QUIET=0 CALIB_STEPS=12 NO_BUILD=0
EXTRA=()
posint() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || usage "$1 '$2': expected a positive integer"; }
list_of() { local opt="$1" v="$2" re="$3" x; IFS=, read -ra _l <<<"$v"; [ "${#_l[@]}" -gt 0 ] || usage "$opt: empty"
  for x in "${_l[@]}"; do [[ "$x" =~ $re ]] || usage "$opt '$x': not one of the allowed values"; done; }
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,/^# Exit status/p' "$0"; exit 0 ;;
    --nodes) list_of "$1" "${2:-}" '^[1-9][0-9]*$'; NODES="$2"; shift 2 ;;
    --cores) posint "$1" "${2:-}"; CORES="$2"; shift 2 ;;
    --gpus) list_of "$1" "${2:-}" '^[0-9]+$'; GPUS="$2"; shift 2 ;;
    --gpu) [[ "${2:-}" =~ ^(k80|p100|v100|a100|h100|h200)$ ]] ||
      usage "--gpu '${2:-}': expected k80, p100, v100, a100, h100 or h200"; GPU="$2"; shift 2 ;;
    --gpu-precision) [[ "${2:-}" =~ ^(fp32|tf32|bf16|fp16)$ ]] ||
      usage "--gpu-precision '${2:-}': expected fp32, tf32, bf16 or fp16"; GPU_PREC="$2"; shift 2 ;;
    --gpu-models) [[ "${2:-}" =~ ^(fitted|estimated)$ ]] ||
      usage "--gpu-models '${2:-}': expected fitted or estimated"; GPU_MODELS="$2"; shift 2 ;;
    --cpu) [[ "${2:-}" =~ ^(here|e5-2667v2)$ ]] || usage "--cpu '${2:-}': expected here or e5-2667v2"; CPU_KIND="$2"; shift 2 ;;
    --pcie) [[ "${2:-}" =~ ^[0-9]+([.][0-9]+)?$ ]] || usage "--pcie '${2:-}': expected GB/s"; PCIE="$2"; shift 2 ;;
    --network) # the names sim/platform.py knows (its NETWORKS), or netns-RATE
      nets="$(python3 "$ROOT/sim/platform.py" --list-networks | grep -vx netns)"
      [[ "${2:-}" =~ ^netns-(off|[0-9]+(\.[0-9]+)?[mg]bit)$ ]] || grep -qxF -- "${2:-}" <<<"$nets" ||
        usage "--network '${2:-}': expected one of $(paste -sd' ' <<<"$nets") or netns-RATE (netns-100mbit, netns-1gbit, netns-off)"
      NETWORK="$2"; shift 2 ;;
    --pcie-gen) [[ "${2:-}" =~ ^[345]$ ]] || usage "--pcie-gen '${2:-}': expected 3, 4 or 5"; PCIE_GEN="$2"; shift 2 ;;
    --nvlink) [[ "${2:-}" =~ ^(none|[1-4])$ ]] || usage "--nvlink '${2:-}': expected none, 1, 2, 3 or 4"; NVLINK="$2"; shift 2 ;;
    --net) [ -n "${2:-}" ] || usage "--net needs a value"; NET="$2"; shift 2 ;;
    --batch) posint "$1" "${2:-}"; BATCH="$2"; shift 2 ;;
    --batch-per-node) posint "$1" "${2:-}"; BATCH_PER_NODE="$2"; shift 2 ;;
    --chunks) posint "$1" "${2:-}"; CHUNKS="$2"; shift 2 ;;
    --input) posint "$1" "${2:-}"; INPUT="$2"; shift 2 ;;
    --steps) posint "$1" "${2:-}"; STEPS="$2"; shift 2 ;;
    --warmup) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage "--warmup '${2:-}': expected an integer"; WARMUP="$2"; shift 2 ;;
    --mode) list_of "$1" "${2:-}" '^(sync|async)$'; MODE="$2"; shift 2 ;;
    --allreduce) list_of "$1" "${2:-}" '^(tree|ring|rhd|ps|auto)$'; ALLREDUCE="$2"; shift 2 ;;
    --bucket-mb) [[ "${2:-}" =~ ^(auto|[0-9]+([.][0-9]+)?)$ ]] || usage "--bucket-mb '${2:-}': expected MiB or auto"; BUCKET_MB="$2"; shift 2 ;;
    --grad-precision) [[ "${2:-}" =~ ^(fp32|bf16)$ ]] || usage "--grad-precision '${2:-}': expected fp32 or bf16"; GRAD_PREC="$2"; shift 2 ;;
    --staleness) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage "--staleness '${2:-}': expected an integer"; STALENESS="$2"; shift 2 ;;
    --sched) list_of "$1" "${2:-}" '^[a-z_-]+$'; SCHED="$2"; shift 2 ;;
    --ncpu) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage "--ncpu '${2:-}': expected an integer"; NCPU="$2"; shift 2 ;;
    --csv) [ -n "${2:-}" ] || usage "--csv needs a file"; CSV="$2"; shift 2 ;;
    --platform-dir) [ -n "${2:-}" ] || usage "--platform-dir needs a directory"; PDIR="$2"; shift 2 ;;
    --calibrate-only) CALIBRATE_ONLY=1; shift ;;
    --calib-steps) posint "$1" "${2:-}"; CALIB_STEPS="$2"; shift 2 ;;
    --cuda-models) [ -d "${2:-}/codelets" ] || usage "--cuda-models '${2:-}': no codelets/ folder of StarPU history files there"; CUDA_MODELS="$(cd "$2" && pwd)"; shift 2 ;;
    --cuda-host) [[ "${2:-}" =~ ^[A-Za-z0-9._-]+$ ]] || usage "--cuda-host '${2:-}': expected a host name"; CUDA_HOST="$2"; shift 2 ;;
    --quiet) QUIET=1; shift ;;
    --no-build) NO_BUILD=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) usage "unknown option '$1'" ;;
  esac
done
if [ -n "$CUDA_MODELS" ] && [ -z "$CUDA_HOST" ]; then usage "--cuda-models needs --cuda-host"; fi
if [ -z "$CUDA_MODELS" ] && [ -n "$CUDA_HOST" ]; then usage "--cuda-host needs --cuda-models"; fi
[ -z "$CORES" ] || [ "$CORES" -le 64 ] || usage "--cores $CORES: at most 64 (the simulation StarPU's --enable-maxcpus)"
if [ -z "$GPU" ]; then GPU=k80; fi

# ---------------------------------------------------------------- build what is missing
set --
# shellcheck source=env.sh
source "$ROOT/scripts/env.sh" --sim --quiet
[ -n "${STARPU_SIM_PREFIX:-}" ] || { echo "simulate.sh: bootstrap did not report the SimGrid StarPU" >&2; exit 1; }
REAL_BUILD="${ANP_REAL_BUILD:-$ROOT/build}" SIM_BUILD="${ANP_SIM_BUILD:-$ROOT/build-sim}"
CACHE="${STARPU_ANP_CACHE:-$HOME/.cache/starpu-anp}"
build() { # DIR CMAKE-ARGS...: configure once, then an incremental build (quiet unless it fails)
  local dir="$1"; shift
  mkdir -p "$dir"
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$dir" "$@" >"$dir.cmake.log" 2>&1 || { tail -20 "$dir.cmake.log" >&2; exit 1; }
  fi
  cmake --build "$dir" -j"$(nproc)" --target starpu_anp ${BUILD_TARGETS[@]:+"${BUILD_TARGETS[@]}"} >"$dir.build.log" 2>&1 \
    || { grep -E 'error' "$dir.build.log" | head -20 >&2; echo "simulate.sh: building $dir failed (log: $dir.build.log)" >&2; exit 1; }
}
# One build at a time (two sweeps started together must not link the same binary at once), and
# this invocation runs snapshots of the binaries taken under that lock: a later invocation that
# rebuilds after a source edit cannot pull the binary from under a sweep that is still running
# (a sweep older than the 4 newest snapshots can still lose its own: its runs then fail).
mkdir -p "$SIM_BUILD"
exec 9>"$SIM_BUILD/.simulate.lock"
flock 9
BUILD_TARGETS=()
if [ "$NO_BUILD" = 0 ]; then
  say "building $REAL_BUILD (real) and $SIM_BUILD (SimGrid)"
  # --cpu KIND measures this machine's cores with the bench dnn_membw_share (below)
  [ "$CPU_KIND" = here ] || BUILD_TARGETS=(dnn_membw_share)
  build "$REAL_BUILD"
  BUILD_TARGETS=()
  ( export STARPU_PREFIX="$STARPU_SIM_PREFIX" PKG_CONFIG_PATH="$STARPU_SIM_PREFIX/lib/pkgconfig"
    CC=smpicc build "$SIM_BUILD" -DDNN_SIMGRID=ON )
fi
# The same command gives the same result: the simulation runs without address-space
# randomisation. With it, orders that StarPU and SMPI derive from addresses (tables keyed by
# pointers) change from run to run, and so does the simulated schedule: a 4-node H200 step
# varied by up to 6% between identical runs, K80 nodes much less (docs/SIMULATION.md,
# "Reproducible runs"). ANP_SIM_ASLR=1 keeps the randomisation, to measure that spread.
NOASLR=()
if [ "${ANP_SIM_ASLR:-0}" != 1 ] && setarch "$(uname -m)" -R true 2>/dev/null; then
  NOASLR=(setarch "$(uname -m)" -R)
fi
for app in "$REAL_BUILD/apps/starpu_anp" "$SIM_BUILD/apps/starpu_anp"; do
  [ -x "$app" ] || { echo "simulate.sh: $app is missing (run without --no-build to build it)" >&2; exit 1; }
done
# Content-addressed snapshots, kept (the 4 newest) so that the printed command can be rerun.
SNAP="$(cat "$REAL_BUILD/apps/starpu_anp" "$SIM_BUILD/apps/starpu_anp" | sha256sum | cut -c1-12)"
APPS="$CACHE/sim/apps/$SNAP"
if [ ! -x "$APPS/starpu_anp.sim" ]; then
  mkdir -p "$APPS.tmp"
  cp "$REAL_BUILD/apps/starpu_anp" "$APPS.tmp/starpu_anp.real"
  cp "$SIM_BUILD/apps/starpu_anp" "$APPS.tmp/starpu_anp.sim"
  rm -rf "$APPS"; mv "$APPS.tmp" "$APPS"
fi
touch "$APPS"
# shellcheck disable=SC2012
ls -1dt "$(dirname "$APPS")"/*/ 2>/dev/null | tail -n +5 | xargs -r rm -rf
flock -u 9; exec 9>&-
REAL_APP="$APPS/starpu_anp.real" SIM_APP="$APPS/starpu_anp.sim"
# A bad --net or --input is a usage error, found before anything is calibrated or simulated.
if ! "$REAL_APP" train --net "$NET" ${INPUT:+--input "$INPUT"} --summary >/dev/null 2>&1; then
  { "$REAL_APP" train --net "$NET" ${INPUT:+--input "$INPUT"} --summary 2>&1 || true; } | tail -1 >&2
  exit 2
fi

CSV_HEADER="platform,nodes,cores,gpus,gpu,network,sched,ncpu,ncuda,net,input,batch,chunks,mode,allreduce,staleness,steps,images_per_s,images_per_s_per_node,simulated_s,models_cpu,models_cuda,sim_wall_s,pin_chunks,bucket_mb,allreduces,cpu_kernels,bd_compute,bd_allreduce,bd_update,bd_idle,bd_other,bd_rank_idle,bd_cp_span_s,bd_cp_compute,bd_cp_allreduce,bd_cp_update,bd_cp_comm,bd_cp_reduce,bd_cp_wait,bd_cp_sched,bd_cp_transfer,bd_cp_submit,bd_cp_queued,bd_cp_ideal,tokens_per_s,gpu_mem_gib,gpu_act_gib,gpu_precision,grad_precision"
BD_FIELDS="$(tr , '\n' <<<"$CSV_HEADER" | grep '^bd_')" # the breakdown's columns, read from the result line
# Rows are appended only under the same columns. A CSV of an older simulate.sh whose columns
# are the first ones of today's (columns are only ever added at the end) is brought up to them in
# place: its rows get the new columns empty. Any other CSV is left alone and refused.
if [ -s "$CSV" ] && [ "$(head -1 "$CSV")" != "$CSV_HEADER" ]; then
  OLD_HEADER="$(head -1 "$CSV")"
  if [[ "$CSV_HEADER," != "$OLD_HEADER,"* ]]; then
    echo "simulate.sh: --csv $CSV has other columns (an older simulate.sh's); give a new file (this one's columns: $CSV_HEADER)" >&2
    exit 2
  fi
  NEW_COLS=$(($(tr , '\n' <<<"$CSV_HEADER" | wc -l) - $(tr , '\n' <<<"$OLD_HEADER" | wc -l)))
  awk -v h="$CSV_HEADER" -v n="$NEW_COLS" 'NR == 1 { print h; next } { s = $0; for (i = 0; i < n; i++) s = s ","; print s }' \
    "$CSV" >"$CSV.upgrade.$$" && mv "$CSV.upgrade.$$" "$CSV" \
    || { rm -f "$CSV.upgrade.$$"; echo "simulate.sh: could not rewrite --csv $CSV with today's columns" >&2; exit 1; }
  echo "simulate.sh: --csv $CSV: added the $NEW_COLS columns of this simulate.sh after ${OLD_HEADER##*,} (its rows have them empty)" >&2
fi

# ---------------------------------------------------------------- calibration (this machine's CPU)
HOST="$(hostname)"
# The CPU kernels the calibration times: the BLAS's kernel set and the CPU's ISA as the
# real binary reports them (result line blas=, cpu_isa=; the start-up fix of runtime/cpu_kernels.c
# included), DNN_CONV_ALGO, the ISA of our own Winograd GEMMs and batch-norm loops (own_simd=),
# and the CPU model. A calibration is only reused with the same kernels:
# the default folder is keyed by them, and a folder of one's own (ANP_SIM_CALIB_DIR) that records
# other kernels, or none, is refused.
kline="$(STARPU_NCPU=1 STARPU_NCUDA=0 "$REAL_APP" bench --net lenet5 --batch 2 --chunks 1 --steps 1 --warmup 1 \
  --quiet 2>/dev/null | anp_result_line)" || { echo "simulate.sh: the real binary did not run (cannot tell its CPU kernels)" >&2; exit 1; }
CPU_MODEL="$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -1)"
# models=N: the layout of the codelets' argument structs, which the perf models' footprints hash
# (2 since 2026-12-07: the conv's arguments carry its algorithm; 3 since the dense's carry its
# bf16 flag: a calibration of models=2 then missed every dense shape, "no calibrated CPU model for
# dnn_cl_dense_fwd"; 4 since the conv's carry their bf16 flag: models=3 then missed every conv
# shape; 5 since dense, attention and gelu carry their bf16-storage flags and gelu's footprint hashes
# its arguments; 6 since the conv's and batchnorm's carry their bf16 activation flags; 7 since batchnorm's carry
# x_bf16 too; 8 since the conv's carry y_bf16 too), so a calibration taken with other footprints is not reused.
CPU_KERNELS="$(anp_result_field "$kline" blas)/$(anp_result_field "$kline" cpu_isa)/conv=${DNN_CONV_ALGO:-auto}/$(anp_result_field "$kline" own_simd)/models=8"
KERNELS_ID="$CPU_KERNELS cpu=${CPU_MODEL:-unknown}"
KEY="$(printf '%s' "$CPU_KERNELS" | tr -c 'A-Za-z0-9.=-' '_')-$(printf '%s' "$CPU_MODEL" | sha256sum | cut -c1-8)"
CALIB="${ANP_SIM_CALIB_DIR:-$CACHE/sim/calib/$KEY}"  # STARPU_HOME of the one-process calibration runs
if [ -f "$CALIB/kernels.txt" ]; then
  if [ "$(cat "$CALIB/kernels.txt")" != "$KERNELS_ID" ]; then
    echo "simulate.sh: the CPU calibration in $CALIB was taken with other kernels ($(cat "$CALIB/kernels.txt")); this machine runs $KERNELS_ID: remove that folder to recalibrate, or set ANP_SIM_CALIB_DIR to another" >&2
    exit 1
  fi
elif [ -d "$CALIB/stamps" ] && [ -n "$(ls -A "$CALIB/stamps" 2>/dev/null)" ]; then
  echo "simulate.sh: the CPU calibration in $CALIB records no kernels (taken before they were recorded): remove that folder to recalibrate, or set ANP_SIM_CALIB_DIR to another" >&2
  exit 1
fi
mkdir -p "$CALIB"
printf '%s\n' "$KERNELS_ID" >"$CALIB/kernels.txt"
# Multi-rank calibration runs (for the reduction's shapes) write to their own STARPU_HOME: they
# also re-time the compute shapes, on an oversubscribed machine, and must not blur the clean
# one-process means. The simulation searches the one-process models first (ANP_SIM_CPU_MODELS).
CALIB_MPI="$CALIB/mpi"
MODELS="$CALIB/.starpu/sampling:$CALIB_MPI/.starpu/sampling"
mkdir -p "$CALIB/stamps"
# calibrate RANKS CHUNK MODE ALLREDUCE: the real binary, one CPU worker per rank, STARPU_CALIBRATE=1,
# on the shapes to be simulated. A task's shape is its chunk's (CHUNK samples) or a parameter's,
# whatever the batch: so one process calibrates 2 chunks of CHUNK samples (2, so that the
# chunks' gradient accumulation runs too) with --window 1 (the least memory: ResNet-50 at 224
# needs ~3.5 GB per 16-sample chunk); several ranks calibrate the reduction's shapes (parameter
# slices), with 1-sample chunks. $CALIB_STEPS timed steps (--calib-steps) give each shape at least
# 2 x that many measurements (StarPU wants 10). Once per shape set (a stamp file).
# The multi-rank runs take the simulation's --allreduce and --bucket-mb (a bucket size is a shape
# of its own), and run without Open MPI's local-size variable: the app then treats its ranks as on
# separate nodes, as the simulated ranks are (runtime/dnn_runtime.c), so that `auto` resolves to
# the same algorithm and bucket size as in the simulation, not to the one-node tree and no buckets.
# STARPU_HISTORY_MAX_ERROR: StarPU drops a shape's whole history when one sample is 50% off its mean,
# which a busy 2-core machine does all the time; keep every sample (the mean absorbs the noise).
# Not in the multi-rank runs, whose ranks, progress threads and main threads oversubscribe these
# cores: there a descheduled rank turns a few-us vector add into milliseconds, and one such
# sample in 25 multiplies the mean of the tree's adds and zeroes (timed only there). Those means
# x10 and x30 in a passing calibration put 2 lenet5 nodes on a free network at 0.922 and 0.846 of
# one node per node, against 0.961 as calibrated (sim_sanity asserts >= 0.90; CI saw 0.886).
# StarPU leaves out of the mean a sample more than STARPU_HISTORY_MAX_ERROR percent
# off it (counted as an error; the shape's history is flushed only once errors outnumber its
# samples): 5000, i.e. 51x, is far above any kernel's own spread (cache-resident against
# DRAM-resident vectors here: ~20-25x) and far below a time slice lost on a tiny task.
calibrate() {
  local ranks="$1" c="$2" mode="$3" ar="$4"
  [ "$ranks" = 1 ] || c=1
  local key="$NET-i${INPUT:-def}-c$c-r$ranks-$mode-$ar${CLIP[*]:+-clip}${OPTIM_NAME:+-$OPTIM_NAME}"
  # buckets: a key of their own (none for off, which the stamps of before this rule were taken with)
  [ "$ranks" = 1 ] || [ "$BUCKET_MB" = 0 ] || key+="-b$BUCKET_MB"
  key="${key//\//_}"
  [ -f "$CALIB/stamps/$key" ] && return 0
  local args=(bench --net "$NET" --batch $((2 * c * ranks)) --chunks 2 --window 1 --steps "$CALIB_STEPS"
              --warmup 1 --quiet --mode "$mode" --allreduce "$ar" --staleness "$STALENESS" "${CLIP[@]}" "${OPTIM[@]}")
  [ -z "$INPUT" ] || args+=(--input "$INPUT")
  [ "$ranks" = 1 ] || args+=(--bucket-mb "$BUCKET_MB")
  say "calibrating the CPU models: $ranks rank(s), chunks of $c sample(s) ($NET, $mode/$ar; $CALIB_STEPS steps)"
  local log="$CALIB/calibrate-$key.log" rc=0
  if [ "$ranks" = 1 ]; then
    STARPU_HOME="$CALIB" STARPU_CALIBRATE=1 STARPU_HISTORY_MAX_ERROR=100000 STARPU_SCHED=dmda STARPU_NCPU=1 STARPU_NCUDA=0 \
      "$REAL_APP" "${args[@]}" >"$log" 2>&1 || rc=$?
  else
    mkdir -p "$CALIB_MPI"
    # Buckets: each bucket is zeroed once per run (graph/dist_buckets.c), and StarPU never records
    # the first sample of a new shape (perfmodel_history.c: "very often quite bogus"), so one run
    # leaves those shapes without a model; a second run, on the same history, records them.
    local pass passes=1; [ "$BUCKET_MB" = 0 ] || passes=2
    : >"$log"
    for ((pass = 1; pass <= passes && rc == 0; pass++)); do
      STARPU_HOME="$CALIB_MPI" STARPU_CALIBRATE=1 STARPU_HISTORY_MAX_ERROR=5000 STARPU_SCHED=dmda STARPU_NCPU=1 STARPU_NCUDA=0 \
        "${ANP_MPIRUN[@]}" -np "$ranks" \
        -x STARPU_HOME -x STARPU_CALIBRATE -x STARPU_HISTORY_MAX_ERROR -x STARPU_SCHED -x STARPU_NCPU -x STARPU_NCUDA \
        env -u OMPI_COMM_WORLD_LOCAL_SIZE -u MPI_LOCALNRANKS "$REAL_APP" "${args[@]}" >>"$log" 2>&1 || rc=$?
    done
  fi
  if [ "$rc" != 0 ]; then
    local why; why="$(grep -m1 'error' "$log" || tail -1 "$log")"
    if [ "$rc" = 137 ]; then # the log's last lines are then StarPU's warnings, not the cause
      why="killed ($ranks rank(s) of $NET: out of memory?)"
      [ "$ranks" = 1 ] || why+="; with ANP_SIM_CPU_VEC_GBS set, no multi-rank calibration is run"
    fi
    echo "simulate.sh: the calibration run failed (exit $rc): $why (log: $log)" >&2
    exit 1
  fi
  date -u +%FT%TZ >"$CALIB/stamps/$key"
}

# --clip-grad-norm X after `--` adds tasks (graph/gradclip.h) and a buffer to every update (another
# shape): the calibration runs with it too, into its own stamp. So does --optimizer X: AdamW's and
# LAMB's update holds twice SGD's state (another shape of cl_optim_update), with its --lr (AdamW
# has no default rate).
# A --bucket-mb after `--` wins over simulate.sh's (it comes later on the app's command line), and
# the calibration takes it. --pin-chunks keeps every chunk's task on the GPUs of GPU nodes.
CLIP=() OPTIM=() PIN=0
for ((i = 0; i < ${#EXTRA[@]}; i++)); do
  case "${EXTRA[$i]}" in
    --bucket-mb) BUCKET_MB="${EXTRA[$((i + 1))]:-}" ;;
    --bucket-mb=*) BUCKET_MB="${EXTRA[$i]#--bucket-mb=}" ;;
    --pin-chunks) PIN=1 ;;
    --clip-grad-norm) CLIP=(--clip-grad-norm "${EXTRA[$((i + 1))]:-}") ;;
    --clip-grad-norm=*) CLIP=("${EXTRA[$i]}") ;;
    --optimizer|--lr) OPTIM+=("${EXTRA[$i]}" "${EXTRA[$((i + 1))]:-}") ;;
    --optimizer=*|--lr=*) OPTIM+=("${EXTRA[$i]}") ;;
  esac
done
OPTIM_NAME=""
for ((i = 0; i < ${#OPTIM[@]}; i++)); do
  case "${OPTIM[$i]}" in
    --optimizer) OPTIM_NAME="${OPTIM[$((i + 1))]:-}" ;;
    --optimizer=*) OPTIM_NAME="${OPTIM[$i]#--optimizer=}" ;;
  esac
done
# SGD (the default) keeps the stamps of before this option was passed on
[ "$OPTIM_NAME" != sgd ] || OPTIM_NAME=""
# --cpu KIND: the simulated cores are another machine's (codelets/dnn_sim_model.h). The model needs
# this machine's cores too, measured as the model counts them (bench/membw_share.c: one core's FMA
# peak, one core's and both cores' copy rates), once per calibration folder: the calibration and
# these rates describe the same cores.
CPU_HERE=""
if [ "$CPU_KIND" != here ]; then
  if [ ! -s "$CALIB/cpu_here.spec" ]; then
    [ -x "$REAL_BUILD/bench/dnn_membw_share" ] || { echo "simulate.sh: --cpu $CPU_KIND needs $REAL_BUILD/bench/dnn_membw_share (run without --no-build)" >&2; exit 1; }
    say "measuring this machine's cores for --cpu $CPU_KIND (bench/membw_share.c --here-only)"
    "$REAL_BUILD/bench/dnn_membw_share" --here-only >"$CALIB/cpu_here.spec.tmp" \
      && mv "$CALIB/cpu_here.spec.tmp" "$CALIB/cpu_here.spec" \
      || { rm -f "$CALIB/cpu_here.spec.tmp"; echo "simulate.sh: measuring this machine's cores failed" >&2; exit 1; }
  fi
  CPU_HERE="$(cat "$CALIB/cpu_here.spec")"
fi
# ---------------------------------------------------------------- the runs
IFS=, read -ra L_NODES <<<"$NODES"; IFS=, read -ra L_GPUS <<<"$GPUS"; IFS=, read -ra L_SCHED <<<"$SCHED"
IFS=, read -ra L_MODE <<<"$MODE"; IFS=, read -ra L_AR <<<"$ALLREDUCE"
STARPU_MAXNODES="$(sed -n 's/^#define STARPU_MAXNODES \([0-9]*\).*/\1/p' "$STARPU_SIM_PREFIX/include/starpu/1.4/starpu_config.h")"
nruns=0 nfail=0
RUNROWS="$(mktemp /tmp/anp-sim-rows-XXXXXX.csv)" # this invocation's rows, for the plot
pd=""                                               # the plot's scratch folder, once made
# Removed on every exit: also a usage error found inside the loop (a batch that does not split).
trap 'rm -f "$RUNROWS"; [ -z "$pd" ] || rm -rf "$pd"' EXIT
for nodes in "${L_NODES[@]}"; do
for gpus in "${L_GPUS[@]}"; do
for mode in "${L_MODE[@]}"; do
for ar in "${L_AR[@]}"; do
  if [ "$nodes" = 1 ] && [ "$ar" != "${L_AR[0]}" ]; then continue; fi # one rank: no all-reduce
  if [ "$mode" = async ] && [ "$ar" != "${L_AR[0]}" ]; then continue; fi # async has no all-reduce
  [ -z "$BATCH_PER_NODE" ] || BATCH=$((BATCH_PER_NODE * nodes))
  [ $((BATCH % nodes)) = 0 ] || usage "--batch $BATCH does not split over $nodes nodes"
  rb=$((BATCH / nodes))
  # StarPU 1.4's own CPU worker count when STARPU_NCPU is unset (src/core/topology.c,
  # src/drivers/cpu/driver_cpu.c, mpi/src/starpu_mpi_init.c): the cores, less one per CUDA
  # device (its driver thread; STARPU_CUDA_THREAD_PER_DEV defaults to 1), less one reserved for
  # StarPU-MPI's progress thread (the app always starts StarPU-MPI in simulation). The default
  # --chunks only: the result line and the CSV say what StarPU gave.
  # A GPU node's cores, unless --cores: a user's GPU node has CPU cores beside its GPUs (this
  # machine's 2 cores would leave StarPU none to give a 4-GPU node: 2 - 4 - 1 < 0, GPU-only).
  cores="${CORES:-$(nproc)}"
  if [ -z "$CORES" ] && [ "$gpus" != 0 ]; then
    cores=$((gpus * $([ "$GPU" = k80 ] && echo 4 || echo 8))); [ "$cores" -le 64 ] || cores=64
  fi
  cpus=${NCPU:-$((cores - gpus - 1))}; [ "$cpus" -ge 0 ] || cpus=0
  workers=$((cpus + gpus)); [ "$workers" -ge 1 ] || workers=1
  k="${CHUNKS:-$((2 * workers))}"
  [ "$k" -le "$rb" ] || k="$rb"
  [ $((rb % k)) = 0 ] || usage "the per-node batch ($rb) must be a multiple of --chunks ($k): chunks of one size keep the shapes to calibrate few"
  # GPU-only nodes (--ncpu 0) time every task with the CUDA models: no CPU shape is looked up, so
  # none is calibrated (and a ring over N ranks needs no N-rank real run here).
  cpu_models=calibrated
  if [ "$gpus" != 0 ] && [ "${NCPU:-}" = 0 ]; then cpu_models=none; fi
  # Pinned chunks on GPU nodes never run a chunk's task on a CPU worker: the CPU workers only
  # see parameter-shaped tasks (the update, the reductions), the same at every chunk size, so the
  # one-process calibration takes 1-sample chunks (ResNet-50's 64-sample chunks would need ~28 GB
  # here). A chunk task that did land on a CPU would stop the run (no calibrated model), not guess.
  cc=$((rb / k)); [ "$gpus" = 0 ] || [ "$PIN" = 0 ] || cc=1
  [ "$cpu_models" = none ] || calibrate 1 "$cc" sync tree
  # The reduction's shapes: tree and async do not depend on the rank count; ring slices do. They
  # are all vector codelets, which ANP_SIM_CPU_VEC_GBS times from a stream rate instead: then no
  # N-rank real run (16 ResNet-50 ranks need more memory than this VM has).
  if [ "$cpu_models" != none ] && [ "$nodes" -gt 1 ] && [ -z "${ANP_SIM_CPU_VEC_GBS:-}" ]; then
    # auto across nodes: rhd for a power-of-two node count, else the ring (dnn_allreduce_resolve)
    rar="$ar"; [ "$ar" != auto ] || { rar=ring; [ $((nodes & (nodes - 1))) != 0 ] || rar=rhd; }
    cranks=2; [ "$mode" = sync ] && { [ "$rar" = ring ] || [ "$rar" = rhd ]; } && cranks="$nodes"
    calibrate "$cranks" 1 "$mode" "$ar"
  fi
  [ "$CALIBRATE_ONLY" = 0 ] || continue
  pdir="${PDIR:-$CACHE/sim/platforms/n$nodes-c$cores$([ "$CPU_KIND" = here ] || echo "-$CPU_KIND")-g$gpus$([ "$gpus" = 0 ] || echo "-$GPU-$GPU_PREC-$GPU_MODELS")-$NETWORK${PCIE_GEN:+-pcie$PCIE_GEN}${NVLINK:+-nvlink$NVLINK}}"
  gen=(python3 "$ROOT/sim/platform.py" --out "$pdir" --nodes "$nodes" --cores "$cores" --gpus "$gpus"
       --network "$([[ "$NETWORK" == netns-* ]] && echo netns || echo "$NETWORK")" --maxnodes "$STARPU_MAXNODES" --cpu "$CPU_KIND")
  [[ "$NETWORK" != netns-* ]] || gen+=(--rate "${NETWORK#netns-}")
  [ "$gpus" = 0 ] || gen+=(--gpu "$GPU" --gpu-precision "$GPU_PREC" --gpu-models "$GPU_MODELS")
  [ "$gpus" = 0 ] || [ -z "${ANP_SIM_GPU_ROOFLINE:-}" ] || gen+=(--roofline "$ANP_SIM_GPU_ROOFLINE")
  [ "$gpus" = 0 ] || [ -z "${ANP_SIM_GPU_MEMSIZE_GB:-}" ] || gen+=(--memsize-gb "$ANP_SIM_GPU_MEMSIZE_GB")
  [ -z "$PCIE" ] || gen+=(--pcie "$PCIE")
  [ "$gpus" = 0 ] || [ -z "$PCIE_GEN" ] || gen+=(--pcie-gen "$PCIE_GEN")
  [ "$gpus" = 0 ] || [ -z "$NVLINK" ] || gen+=(--nvlink "$NVLINK")
  name="$("${gen[@]}")" || exit 2
  spec="$(cat "$pdir/gpu.spec")" cuda_models="$(cat "$pdir/models_cuda")" # fitted-public or estimated
  # ANP_SIM_CPU_VEC_GBS: the CPU vector codelets from a stream rate (codelets/dnn_sim_model.c)
  [ -z "${ANP_SIM_CPU_VEC_GBS:-}" ] || [ "$cpu_models" = none ] || cpu_models="calibrated+vec${ANP_SIM_CPU_VEC_GBS}GBps"
  [ "$CPU_KIND" = here ] || [ "$cpu_models" = none ] || cpu_models+="+scaled-to-$CPU_KIND"
  models="cpu=$cpu_models"
  if [ "$gpus" != 0 ]; then
    if [ -n "$CUDA_MODELS" ]; then models+=",cuda=calibrated"; else models+=",cuda=$cuda_models"; fi
  fi
  for sched in "${L_SCHED[@]}"; do
    args=(bench --net "$NET" --batch "$BATCH" --chunks "$k" --steps "$STEPS" --warmup "$WARMUP" --quiet
          --mode "$mode" --allreduce "$ar" --staleness "$STALENESS" --grad-precision "$GRAD_PREC")
    [ -z "$INPUT" ] || args+=(--input "$INPUT")
    # --bucket-mb as given (auto: the app's default); one after `--` comes later and wins. The
    # tables of docs/SIMULATION.md dated before 2026-12-07 were taken with buckets off.
    args+=(--bucket-mb "$BUCKET_MB" "${EXTRA[@]}")
    envs=(STARPU_PERF_MODEL_DIR="$pdir/sampling" STARPU_HOSTNAME="$name" STARPU_SCHED="$sched"
          STARPU_NCUDA="$gpus" ANP_SIM_CPU_MODELS="$MODELS" ANP_SIM_CPU_HOST="$HOST"
          ANP_SIM_PLATFORM="$name-x$nodes-$NETWORK" ANP_SIM_MODELS="$models" STARPU_SILENT=1)
    [ -z "$NCPU" ] || envs+=(STARPU_NCPU="$NCPU")
    [ "$CPU_KIND" = here ] || envs+=(ANP_SIM_CPU="$(cat "$pdir/cpu.spec")" ANP_SIM_CPU_HERE="$CPU_HERE")
    [ -z "${DNN_BREAKDOWN:-}" ] || envs+=(DNN_BREAKDOWN="$DNN_BREAKDOWN") # the time breakdown (bd_* fields; 2: and critpath: lines)
    [ -z "${DNN_ALLREDUCE_PRIO:-}" ] || envs+=(DNN_ALLREDUCE_PRIO="$DNN_ALLREDUCE_PRIO")
    [ -z "${DNN_ALLREDUCE_ON:-}" ] || envs+=(DNN_ALLREDUCE_ON="$DNN_ALLREDUCE_ON")
    [ -z "${ANP_SIM_FOLD_UNIQUE:-}" ] || envs+=(ANP_SIM_FOLD_UNIQUE="$ANP_SIM_FOLD_UNIQUE") # codelets/dnn_sim_model.c
    if [ "$gpus" != 0 ] && [ -n "$CUDA_MODELS" ]; then
      envs+=(ANP_SIM_CUDA_MODELS="$CUDA_MODELS" ANP_SIM_CUDA_HOST="$CUDA_HOST")
    elif [ "$gpus" != 0 ]; then
      envs+=(ANP_SIM_GPU="$spec")
    fi
    cmd=("${NOASLR[@]}" env "${envs[@]}" "$STARPU_SIM_PREFIX/bin/starpu_smpirun" -platform "$pdir/cluster.xml"
         -hostfile "$pdir/hostfile" -np "$nodes")
    read -ra smpicfg <"$pdir/smpi.cfg" # the platform's SMPI options (netns: its size factors)
    # SMPI folds shared memory (the big parameters, StarPU's main-memory buffers) by mapping one
    # block of a file again and again: with its 1 MiB default, 16 ranks of GPT-2 XL (6.2 GB per
    # parameter array) needed more mappings than vm.max_map_count allows ("Could not map folded
    # virtual memory", abort at the 13th rank). 64 MiB blocks need 64x fewer; memory only.
    # ANP_SIM_SHARED_BLOCK_MB sets another size.
    smpicfg+=(--cfg=smpi/shared-malloc-blocksize:$((${ANP_SIM_SHARED_BLOCK_MB:-64} << 20)))
    cmd+=("${smpicfg[@]}" "$SIM_APP" "${args[@]}")
    echo "+ ${cmd[*]}"
    log="$(mktemp /tmp/anp-sim-XXXXXX.log)"
    t0=$(date +%s.%N); rc=0
    "${cmd[@]}" >"$log" 2>&1 || rc=$?
    t1=$(date +%s.%N)
    nruns=$((nruns + 1))
    line="$(anp_result_line "$log" || true)"
    if [ "$rc" != 0 ] || [ -z "$line" ]; then
      nfail=$((nfail + 1))
      why="$(grep -m1 -E '^error:|does not have a perfmodel|^simulation:' "$log" || grep -v '^\[' "$log" | grep -v '^$' | tail -1)"
      echo "simulate.sh: the simulated run failed (exit $rc): $why (log: $log)" >&2
      continue
    fi
    grep '^critpath: ' "$log" || true # DNN_BREAKDOWN=2: each rank's critical path by codelet
    # GPU nodes: the memory each device needs (runtime/preflight.c), before the run
    gmem="$(grep -m1 '^GPU memory per device: ' "$log" || true)"
    [ -z "$gmem" ] || echo "$gmem"
    gmem_total="$(sed -n 's/^GPU memory per device: \([0-9.]*\) GiB.*/\1/p' <<<"$gmem")"
    gmem_act="$(sed -n 's/.*: activations \([0-9.]*\) GiB.*/\1/p' <<<"$gmem")"
    rm -f "$log"
    echo "$line"
    field() { anp_result_field "$line" "$1"; }
    ips="$(field images_per_s)"; wall="$(field wall_s)"
    ncpu="$(field ncpu)"; ncuda="$(field ncuda)"; pin="$(field pin_chunks)"
    bmb="$(field bucket_mb)"; nar="$(field allreduces)"
    far="$(field allreduce)"; [ -n "$far" ] || far="$ar" # what auto resolved to
    bd=""; for f in $BD_FIELDS; do bd+=",$(field "$f")"; done
    per_node="$(awk -v a="$ips" -v n="$nodes" 'BEGIN{printf "%.1f", a / n}')"
    simw="$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')"
    [ -f "$CSV" ] || echo "$CSV_HEADER" >"$CSV" # written with the first row: a run that fails leaves no empty CSV
    echo "$name,$nodes,$cores,$gpus,$([ "$gpus" = 0 ] && echo none || echo "$GPU"),$NETWORK,$sched,$ncpu,$ncuda,$NET,${INPUT:-},$BATCH,$k,$mode,$([ "$nodes" -gt 1 ] && [ "$mode" = sync ] && echo "$far" || echo -),$STALENESS,$STEPS,$ips,$per_node,$wall,$cpu_models,$([ "$gpus" = 0 ] && echo - || { [ -n "$CUDA_MODELS" ] && echo calibrated || echo "$cuda_models"; }),$simw,${pin:-0},${bmb:--},${nar:--},$([ "$cpu_models" = none ] && echo - || echo "$CPU_KERNELS")$bd,$(field tokens_per_s),$gmem_total,$gmem_act,$([ "$gpus" = 0 ] && echo - || echo "$GPU_PREC"),$([ "$nodes" -gt 1 ] && [ "$mode" = sync ] && echo "$GRAD_PREC" || echo -)" | tee -a "$RUNROWS" >>"$CSV"
  done
done; done; done; done
[ "$CALIBRATE_ONLY" = 0 ] || { say "CPU models calibrated in ${MODELS//:/ and }"; exit 0; }
say "$nruns run(s), $nfail failed; rows appended to $CSV"

# A sweep: images/s against the swept axis (nodes, else GPUs per node), one line per
# scheduler/mode/all-reduce, from this invocation's rows, as a PNG next to the CSV.
if [ "$nruns" -gt 1 ] && command -v gnuplot >/dev/null; then
  png="${CSV%.csv}.png"
  btitle="$BATCH"; [ -z "$BATCH_PER_NODE" ] || btitle="$BATCH_PER_NODE per node"
  col=2 axis=nodes; [ "${#L_NODES[@]}" -gt 1 ] || { col=4; axis="GPUs per node"; }
  pd="$(mktemp -d /tmp/anp-sim-plot-XXXXXX)"
  awk -F, -v c="$col" -v d="$pd" '{ s = $7 "-" $14 ($15 == "-" ? "" : "-" $15); print $c, $18 >> (d "/" s ".dat") }' "$RUNROWS"
  plot=""
  for f in "$pd"/*.dat; do
    sort -n -o "$f" "$f"
    plot+="${plot:+, }'$f' using 1:2 with linespoints lw 2 title '$(basename "$f" .dat)'"
  done
  if gnuplot -e "set terminal pngcairo size 900,560 font 'DejaVu Sans,10'; set output '$png'; set key left top; set grid; set xlabel '$axis'; set ylabel 'simulated images/s'; set title 'starpu-anp in simulation: $NET, batch $btitle, $NETWORK (StarPU + SimGrid)'; plot $plot" 2>"$pd/gnuplot.err"; then
    say "plot: $png"
  else
    say "gnuplot could not draw $png: $(head -1 "$pd/gnuplot.err")"
  fi
  rm -rf "$pd"
fi
rm -f "$RUNROWS"
[ "$nfail" = 0 ]
