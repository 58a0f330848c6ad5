#!/usr/bin/env bash
# gpu-pack.sh — prepare a run on a lent GPU machine (docs/gpu-run.md).
# That machine has the CUDA driver, nvcc and cmake, and a PyTorch venv whose pip wheels hold
# cuDNN/cuBLAS/cuSPARSE/cuSOLVER/nvJitLink, but no StarPU, hwloc, FxT, MPI or OpenBLAS, and it
# cannot install anything. This builds here with CUDA on (build-gpu/, sm_80 + sm_90: the H200 is
# sm_90), and packs into gpu-pack.tar.gz (gzip; ignored by git; carry it with the device tool):
#   pack/bin/   starpu_anp, every gpu_* test binary (gpu_workers, the worker-count helper, among
#               them), unit_cuda_* tests when they exist, and op_harness (for its gpu mode);
#   pack/lib/   every shared library they need that the GPU machine lacks: StarPU, OpenBLAS,
#               hwloc, FxT, Open MPI, ... — NOT the CUDA libraries (the machine's toolkit or its
#               pip wheels provide them: scripts/gpu-check.sh finds them), NOT glibc, and NOT
#               libstdc++ / libgcc_s (the machine's own are newer and must win);
#   pack/MANIFEST  commit, date, build host, CUDA architectures, file list.
# Then on the device: bash scripts/gpu-check.sh   (it unpacks and runs everything).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=env.sh
source "$ROOT/scripts/env.sh" --quiet
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu-pack: no nvcc: the pack needs a CUDA build"; exit 1; }
BUILD="${GPU_PACK_BUILD:-$ROOT/build-gpu}"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DDNN_ENABLE_CUDA=ON >/dev/null
# Only what travels: the app and the GPU tests (not the fuzzers or the CPU tests).
targets=(starpu_anp)
for src in "$ROOT"/tests/gpu_*.c "$ROOT"/tests/unit_cuda_*.c; do
  [ -e "$src" ] && targets+=("$(basename "$src" .c)")
done
targets+=(op_harness) # its gpu mode: every op's CUDA codelets against the CPU's, the bf16 GEMMs'
cmake --build "$BUILD" -j"$(nproc)" --target "${targets[@]}" >/dev/null
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/pack/bin" "$STAGE/pack/lib"
cp "$BUILD/apps/starpu_anp" "$STAGE/pack/bin/"
for t in "${targets[@]:1}"; do cp "$BUILD/tests/$t" "$STAGE/pack/bin/"; done
# Libraries: everything ldd resolves, except the CUDA libraries, glibc, libstdc++ and libgcc_s.
for b in "$STAGE"/pack/bin/*; do ldd "$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  while read -r lib; do
    case "$(basename "$lib")" in
      libcuda.so*|libcudart.so*|libcublas*|libcudnn*|libnvJitLink*|libnvrtc*|libcusparse*|libcusolver*|libcufft*|libcurand*|libnvidia*) ;;
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libresolv.so.*|libutil.so.*) ;;
      libstdc++.so*|libgcc_s.so*) ;;
      *) cp -L "$lib" "$STAGE/pack/lib/" ;;
    esac
  done
strip --strip-unneeded "$STAGE"/pack/bin/* "$STAGE"/pack/lib/* 2>/dev/null || true
# Nothing CUDA, C++ runtime or glibc slipped in (the checks above are by name; say so if not).
if ls "$STAGE/pack/lib" | grep -Eq '^(libstdc\+\+|libgcc_s|libcudart|libcudnn|libcublas)'; then
  echo "gpu-pack: a library that must not travel is in pack/lib: $(ls "$STAGE/pack/lib" | tr '\n' ' ')"; exit 1
fi
{
  echo "commit: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
  echo "packed: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n) ($(uname -m))"
  echo "cuda code: $(grep -rho -- '--generate-code=[^ ]*' "$BUILD/CMakeFiles/dnn.dir/flags.make" 2>/dev/null | sort -u | paste -sd ' ')"
  echo "nvcc: $( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version) | tail -1)"
  echo "bin: $(ls "$STAGE/pack/bin" | tr '\n' ' ')"
  echo "lib: $(ls "$STAGE/pack/lib" | tr '\n' ' ')"
} >"$STAGE/pack/MANIFEST"
tar -C "$STAGE" -czf "$ROOT/gpu-pack.tar.gz" pack
bytes="$(stat -c %s "$ROOT/gpu-pack.tar.gz")"
echo "gpu-pack.tar.gz: $bytes bytes ($(du -h "$ROOT/gpu-pack.tar.gz" | cut -f1)); $(ls "$STAGE/pack/bin" | wc -l) binaries, $(ls "$STAGE/pack/lib" | wc -l) libraries"
[ "$bytes" -lt $((48 * 1024 * 1024)) ] || { echo "gpu-pack: the pack is over 48 MiB; the device tool carries 64 MiB with the whole tree"; exit 1; }
echo "device: run with carry ['gpu-pack.tar.gz'] and command: bash scripts/gpu-check.sh"
