#!/usr/bin/env bash
# gpu-pack.sh — prepare a run on a lent GPU machine (DESIGN.md "GPU runs on a lent machine").
# That machine has CUDA/cuDNN/cmake but no StarPU, hwloc, FxT, MPI or OpenBLAS and cannot install
# anything. This builds here with CUDA on (build-gpu/) and packs into gpu-pack.tar.xz (ignored by
# git; carry it with the device tool) the app, the test binaries and every non-CUDA shared library
# they need. Then on the device: bash scripts/gpu-check.sh  (it unpacks and runs the GPU checks).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=env.sh
source "$ROOT/scripts/env.sh" --quiet
cmake -S "$ROOT" -B "$ROOT/build-gpu" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$ROOT/build-gpu" -j"$(nproc)" >/dev/null
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/pack/bin" "$STAGE/pack/lib"
cp "$ROOT/build-gpu/apps/starpu_anp" "$STAGE/pack/bin/"
for t in "$ROOT"/build-gpu/tests/{gpu,unit,grad}_*; do [ -x "$t" ] && cp "$t" "$STAGE/pack/bin/"; done
[ -x "$ROOT/build-gpu/bench/dnn_op_bench" ] && cp "$ROOT/build-gpu/bench/dnn_op_bench" "$STAGE/pack/bin/"
# Libraries: everything ldd resolves outside the CUDA toolkit and outside glibc itself.
for b in "$STAGE"/pack/bin/*; do ldd "$b"; done | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  case "$lib" in
    /usr/local/cuda*|*/libcuda.so*|*/libcudart.so*|*/libcublas*|*/libcudnn*|*/libnv*|*/libcusparse*|*/libcusolver*) ;;
    */libc.so.*|*/libm.so.*|*/libpthread.so.*|*/libdl.so.*|*/librt.so.*|*/ld-linux*) ;;
    *) cp -L "$lib" "$STAGE/pack/lib/" ;;
  esac
done
# StarPU's dlopen'd helpers are not needed; strip everything to fit the 64 MiB carry limit.
strip --strip-unneeded "$STAGE"/pack/bin/* "$STAGE"/pack/lib/* 2>/dev/null || true
# Open MPI plugins are dlopen'd at MPI_Init: GPU checks run without mpirun, but StarPU-MPI's
# library still links libmpi; single-process runs never call MPI_Init.
tar -C "$STAGE" -cJf "$ROOT/gpu-pack.tar.xz" pack
echo "gpu-pack.tar.xz: $(du -h "$ROOT/gpu-pack.tar.xz" | cut -f1) ($(ls "$STAGE/pack/bin" | wc -l) binaries, $(ls "$STAGE/pack/lib" | wc -l) libraries)"
echo "device: carry ['gpu-pack.tar.xz'], command: bash scripts/gpu-check.sh"
