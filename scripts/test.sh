#!/usr/bin/env bash
# test.sh — bootstrap, configure, build into build/ and run the whole CTest suite.
#   scripts/test.sh                 everything
#   scripts/test.sh -L unit         only one label (any ctest arguments pass through)
#   scripts/test.sh --sanitize ...  ASan+UBSan build in build-sanitize/ (C only: the sanitizers
#                                   instrument the C code; nvcc's CUDA kernels would only make
#                                   the build longer). CI (.ci/run) runs its unit, grad, bad and
#                                   fuzz labels, so that the sanitizer build cannot rot.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$ROOT/build"
CMAKE_EXTRA=()
if [ "${1:-}" = "--sanitize" ]; then
  shift
  BUILD="$ROOT/build-sanitize"
  CMAKE_EXTRA+=(-DDNN_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDNN_ENABLE_CUDA=OFF)
fi
# shellcheck source=env.sh
ctest_args=("$@")
set --  # a sourced script sees our arguments: keep the ctest ones away from bootstrap.sh
# --sim: the SimGrid StarPU too (the `sim` tests simulate with it; about 6 min the first time)
source "$ROOT/scripts/env.sh" --sim
set -- "${ctest_args[@]}"
echo "[test] configure + build in $BUILD"
cmake -S "$ROOT" -B "$BUILD" "${CMAKE_EXTRA[@]}" >"$BUILD.cmake.log" 2>&1 \
  || { cat "$BUILD.cmake.log" >&2; exit 1; }
cmake --build "$BUILD" -j"$(nproc)" 2>&1 | grep -E 'error|warning|Error' || true
cmake --build "$BUILD" -j"$(nproc)" >/dev/null   # fails loudly if the build is broken
cd "$BUILD"
exec ctest --output-on-failure "$@"
