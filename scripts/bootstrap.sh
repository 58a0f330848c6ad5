#!/usr/bin/env bash
# bootstrap.sh — install everything starpu-anp needs, idempotently.
#
#   1. Debian packages (build tools, Open MPI, OpenBLAS, hwloc, FxT, zlib, stb, protobuf-c, ViTE, gnuplot,
#      Fashion-MNIST, ...). Skipped when all are already installed.
#   2. the tests' Python venv ($STARPU_ANP_CACHE/test-venv: numpy, onnx, onnxruntime from PyPI,
#      for the ONNX export tests); a stamp file makes later runs instant.
#   3. StarPU 1.4 with FxT + MPI (+ CUDA when nvcc exists):
#      - a StarPU >= 1.4 already visible to pkg-config with those features is used as is;
#      - otherwise the newest 1.4.x Debian *source* package is built into a cache prefix
#        ($STARPU_ANP_CACHE, default ~/.cache/starpu-anp) and reused on later runs.
#
# Prints the prefix to use as its last line: "starpu prefix: DIR".
# Options: --with-torch   also install python3-torch (only bench/compare_pytorch.sh needs it)
#          --quiet        print only problems and the final line
set -euo pipefail

WITH_TORCH=0
QUIET=0
for a in "$@"; do
  case "$a" in
    --with-torch) WITH_TORCH=1 ;;
    --quiet) QUIET=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "bootstrap.sh: unknown option '$a' (try --help)" >&2; exit 2 ;;
  esac
done

say() { [ "$QUIET" = 1 ] || echo "[bootstrap] $*"; }
die() { echo "bootstrap.sh: error: $*" >&2; exit 1; }

CACHE="${STARPU_ANP_CACHE:-$HOME/.cache/starpu-anp}"
STARPU_SERIES=1.4
PKGS=(build-essential cmake pkg-config dpkg-dev ca-certificates
      libopenmpi-dev openmpi-bin libopenblas-dev libhwloc-dev
      libfxt-dev fxt-tools zlib1g-dev libstb-dev
      vite gnuplot-nox librsvg2-bin dataset-fashion-mnist
      xz-utils file libprotobuf-c-dev protobuf-c-compiler python3-venv)
[ "$WITH_TORCH" = 1 ] && PKGS+=(python3-torch python3-numpy)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# ---------------------------------------------------------------- 1. Debian packages
missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
APT_UPDATED=0
apt_update() {
  if [ "$APT_UPDATED" = 0 ]; then
    say "apt-get update"
    $SUDO apt-get update -qq >/dev/null || die "apt-get update failed (is the Debian mirror reachable?)"
    APT_UPDATED=1
  fi
}
if [ "${#missing[@]}" -gt 0 ]; then
  apt_update
  say "installing ${#missing[@]} Debian packages: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" \
      >"/tmp/starpu-anp-apt.log" 2>&1 \
    || { tail -20 /tmp/starpu-anp-apt.log >&2; die "apt-get install failed; full log in /tmp/starpu-anp-apt.log"; }
else
  say "Debian packages: all ${#PKGS[@]} present"
fi

# ---------------------------------------------------------------- 2. the tests' Python venv
# starpu_anp export writes ONNX; the tests run the model with onnxruntime and check it with
# onnx.checker. A small venv of its own (not the system Python, not the heavy torch one).
# The stamp names the packages: a change of the list rebuilds the venv.
TEST_VENV="$CACHE/test-venv"
TEST_PY_PKGS=(numpy onnx onnxruntime)
TEST_STAMP="$TEST_VENV/.installed-${TEST_PY_PKGS[*]// /-}"
TEST_STAMP="${TEST_STAMP// /-}"
if [ -f "$TEST_STAMP" ] && [ -x "$TEST_VENV/bin/python" ]; then
  say "test venv: $TEST_VENV"
else
  say "test venv: creating $TEST_VENV (${TEST_PY_PKGS[*]})"
  # A failure here does not stop bootstrap (the build and the other tests need none of it); the
  # ONNX tests then fail, naming the missing venv.
  venv_warn() { echo "bootstrap.sh: warning: $*; the ONNX tests (label onnx) will fail" >&2; }
  mkdir -p "$CACHE"
  rm -rf "$TEST_VENV"
  if ! /usr/bin/python3 -m venv "$TEST_VENV" >"/tmp/starpu-anp-venv.log" 2>&1; then
    venv_warn "python3 -m venv $TEST_VENV failed (log: /tmp/starpu-anp-venv.log)"
  elif ! "$TEST_VENV/bin/pip" install -q --disable-pip-version-check "${TEST_PY_PKGS[@]}" >>"/tmp/starpu-anp-venv.log" 2>&1; then
    venv_warn "pip install ${TEST_PY_PKGS[*]} into $TEST_VENV failed (log: /tmp/starpu-anp-venv.log)"
  elif ! "$TEST_VENV/bin/python" -c "import numpy, onnx, onnxruntime" >>"/tmp/starpu-anp-venv.log" 2>&1; then
    venv_warn "the test venv cannot import numpy, onnx and onnxruntime (log: /tmp/starpu-anp-venv.log)"
  else
    date -u +%FT%TZ >"$TEST_STAMP"
  fi
fi

# ---------------------------------------------------------------- 3. StarPU
HAVE_NVCC=0
NVCC="$(command -v nvcc || true)"
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
[ -n "$NVCC" ] && HAVE_NVCC=1

# check_starpu PREFIX_INCLUDE_DIR -> 0 when starpu_config.h there has what we need
check_starpu_config() {
  local cfg="$1/starpu_config.h" why=""
  [ -f "$cfg" ] || { echo "no starpu_config.h in $1"; return 1; }
  grep -q '^#define STARPU_USE_FXT 1' "$cfg" || why+=" FxT (STARPU_USE_FXT)"
  grep -q '^#define STARPU_USE_MPI 1' "$cfg" || why+=" MPI (STARPU_USE_MPI)"
  if [ "$HAVE_NVCC" = 1 ]; then
    grep -q '^#define STARPU_USE_CUDA 1' "$cfg" || why+=" CUDA (STARPU_USE_CUDA, nvcc is present)"
  fi
  [ -z "$why" ] || { echo "$cfg lacks:$why"; return 1; }
  return 0
}

# (a) a site StarPU already found by pkg-config
if [ -z "${STARPU_ANP_FORCE_BUILD:-}" ] && pkg-config --exists "starpu-$STARPU_SERIES starpumpi-$STARPU_SERIES" 2>/dev/null; then
  inc="$(pkg-config --variable=includedir "starpu-$STARPU_SERIES")/starpu/$STARPU_SERIES"
  if msg="$(check_starpu_config "$inc")"; then
    say "using StarPU $(pkg-config --modversion starpu-$STARPU_SERIES) found by pkg-config"
    echo "starpu prefix: $(pkg-config --variable=prefix starpu-$STARPU_SERIES)"
    exit 0
  else
    say "ignoring the StarPU found by pkg-config: $msg"
  fi
fi

# (b) our cached build
STAMP_GLOB="$CACHE/starpu-$STARPU_SERIES.*-cuda$HAVE_NVCC/.installed"
for stamp in $STAMP_GLOB; do
  [ -f "$stamp" ] || continue
  prefix="$(dirname "$stamp")"
  if msg="$(check_starpu_config "$prefix/include/starpu/$STARPU_SERIES")"; then
    say "StarPU cached in $prefix"
    echo "starpu prefix: $prefix"
    exit 0
  fi
done

# (c) build from the newest 1.4.x Debian source package
mkdir -p "$CACHE/src"
ensure_deb_src() {
  # apt-get source needs deb-src entries. We copy the machine's own Debian sources entry (so no
  # mirror host is named here) and point it at the suites that carry StarPU 1.4.
  local f=/etc/apt/sources.list.d/starpu-anp-src.sources base=/etc/apt/sources.list.d/debian.sources
  if [ ! -f "$f" ]; then
    if [ -f "$base" ]; then
      awk 'BEGIN{RS="";ORS="\n\n"} NR==1' "$base" \
        | sed -e 's/^Types: .*/Types: deb-src/' -e 's/^Suites: .*/Suites: trixie sid/' \
        | $SUDO tee "$f" >/dev/null
    elif [ -f /etc/apt/sources.list ]; then
      local uri
      uri="$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list)"
      [ -n "$uri" ] || die "no Debian 'deb' line in /etc/apt/sources.list to copy for deb-src"
      printf 'Types: deb-src\nURIs: %s\nSuites: trixie sid\nComponents: main\n' "$uri" | $SUDO tee "$f" >/dev/null
    else
      die "no Debian sources entry found to derive a deb-src line from"
    fi
    APT_UPDATED=0
  fi
  apt_update
}
ensure_deb_src
ver="$(apt-cache showsrc starpu 2>/dev/null | awk '/^Version: 1\.4\./{print $2}' | sort -V | tail -1)"
[ -n "$ver" ] || die "no StarPU 1.4.x source package is available from the Debian sources"
upver="${ver%%+*}"; upver="${upver%%-*}"
prefix="$CACHE/starpu-$upver-cuda$HAVE_NVCC"
srcdir="$CACHE/src/starpu-${ver%%-*}"
say "building StarPU $ver from Debian source into $prefix (about 5 min on 2 cores)"
if [ ! -d "$srcdir" ]; then
  ( cd "$CACHE/src" && apt-get source --download-only "starpu=$ver" >/dev/null 2>&1 ) \
    || die "apt-get source starpu=$ver failed"
  orig="$(ls "$CACHE/src"/starpu_"${ver%%-*}".orig.tar.* | head -1)"
  tar -C "$CACHE/src" -xf "$orig" || die "cannot unpack $orig"
  [ -d "$srcdir" ] || srcdir="$(ls -d "$CACHE"/src/starpu-"$upver"*/ | head -1)"
fi
# CUDA 13 removed cudaDeviceProp::computeMode: read the compute mode through the attribute API.
for f in "$srcdir/src/drivers/cuda/driver_cuda.c" "$srcdir/src/drivers/cuda/driver_cuda1.c"; do
  [ -f "$f" ] || continue
  perl -0pi -e 's/props\[devid\]\.computeMode == cudaComputeModeExclusive/({ int anp_cm_ = 0; cudaDeviceGetAttribute(&anp_cm_, cudaDevAttrComputeMode, devid); anp_cm_; }) == cudaComputeModeExclusive/g' "$f"
done

log="$CACHE/starpu-build-$upver.log"
cfg=(--prefix="$prefix" --with-fxt --enable-mpi --disable-opencl --disable-build-doc
     --disable-build-examples --disable-build-tests --disable-starpufft --disable-fortran
     --disable-socl --disable-starpupy --disable-starpurm --disable-hip --disable-mlr
     --enable-maxcpus=64 --disable-openmp)
if [ "$HAVE_NVCC" = 1 ]; then
  cudadir="$(dirname "$(dirname "$(readlink -f "$NVCC")")")"
  cfg+=(--enable-cuda --with-cuda-dir="$cudadir")
else
  cfg+=(--disable-cuda)
fi
builddir="$CACHE/build-starpu-$upver-cuda$HAVE_NVCC"
rm -rf "$builddir"; mkdir -p "$builddir"
say "configure (log: $log)"
( cd "$builddir" && PATH="$(dirname "${NVCC:-/bin/true}"):$PATH" "$srcdir/configure" "${cfg[@]}" ) >"$log" 2>&1 \
  || { tail -15 "$log" >&2; die "StarPU configure failed; full log in $log"; }
total=$(find "$srcdir/src" "$srcdir/mpi/src" -name '*.c' | wc -l)
say "make -j$(nproc) ($total source files)"
( cd "$builddir" && make -j"$(nproc)" ) >>"$log" 2>&1 &
mpid=$!
while kill -0 "$mpid" 2>/dev/null; do
  sleep 10
  n=$(find "$builddir" -name '*.lo' 2>/dev/null | wc -l)
  [ "$QUIET" = 1 ] || printf '[bootstrap]   compiled %d/~%d objects\n' "$n" "$total"
done
wait "$mpid" || { tail -25 "$log" >&2; die "StarPU build failed; full log in $log"; }
( cd "$builddir" && make install ) >>"$log" 2>&1 || { tail -15 "$log" >&2; die "StarPU install failed; full log in $log"; }
msg="$(check_starpu_config "$prefix/include/starpu/$STARPU_SERIES")" \
  || die "StarPU built without a required feature: $msg (configure log: $log)"
date -u +%FT%TZ > "$prefix/.installed"
rm -rf "$builddir"
say "StarPU $upver installed in $prefix"
echo "starpu prefix: $prefix"
