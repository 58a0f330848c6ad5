#!/usr/bin/env bash
# bootstrap.sh — install everything starpu-anp needs, idempotently.
#
#   1. Debian packages (build tools, Open MPI, OpenBLAS, hwloc, FxT, zlib, stb, protobuf-c, ViTE, gnuplot,
#      iproute2 + nftables for the network-namespace tests (tests/net),
#      Fashion-MNIST, ...). Skipped when all are already installed.
#   1b. the default text corpus of the language models (docs/transformers.md "Data"):
#      $CACHE/corpus/kjv.txt, the King James Bible (public domain, 4.3 MB of ASCII, one verse a
#      line), dumped from Debian's bible-kjv-text with its `bible` program (bible-kjv). Skipped
#      when the file is there; when apt cannot give the packages, a warning says to pass
#      --text FILE instead (nothing else needs them).
#   2. the tests' Python venv ($STARPU_ANP_CACHE/test-venv: numpy, onnx, onnxruntime from PyPI,
#      for the ONNX export tests); a stamp file makes later runs instant.
#   3. StarPU 1.4 with FxT + MPI (+ CUDA when nvcc exists):
#      - a StarPU >= 1.4 already visible to pkg-config with those features is used as is;
#      - otherwise the newest 1.4.x Debian *source* package is built into a cache prefix
#        ($STARPU_ANP_CACHE, default ~/.cache/starpu-anp) and reused on later runs, with
#        third_party/starpu-mpi-backoff.patch (the MPI progress thread sleeps when idle) and
#        third_party/starpu-worker-backoff.patch (so do idle CPU workers).
#
#   4. With --sim: libsimgrid-dev + xsltproc, and a second StarPU built from the same source for
#      StarPU's SimGrid mode ($CACHE/starpu-<ver>-simgrid: static, MPI through SMPI, no FxT), for
#      scripts/simulate.sh, with third_party/'s five simulation patches (starpu-smpi-vector-bytes,
#      starpu-smpi-envelope-actor, starpu-smpi-small-data-actor, starpu-simgrid-request-poll: the
#      simulator's speed;
#      starpu-simgrid-time-redux: STARPU_REDUX's reduction tasks take simulated time). A cached
#      build that lacks one is rebuilt.
#      Printed as "starpu sim prefix: DIR" before the "starpu prefix:" line.
#
#   5. With --with-anchors: the comparison frameworks (current PyTorch, TensorFlow, NumPy from the
#      Python package index, through pip) in a virtual environment outside the checkout,
#      $CACHE/anchors-venv. Skipped when that venv already imports torch and tensorflow.
#
# Prints the prefix to use as its last line: "starpu prefix: DIR"; with --with-anchors, the line
# before it is "anchors python: PATH" (the venv's interpreter).
# Options: --sim           also the SimGrid StarPU (section 4)
#          --with-anchors  also set up the anchors venv (only bench/compare_frameworks.sh needs it);
#                          pip's own configuration (PIP_INDEX_URL, pip.conf, ...) is honoured
#          --with-torch    old name of --with-anchors (it installed Debian's python3-torch 1.13)
#          --quiet         print only problems and the final lines
set -euo pipefail

WITH_ANCHORS=0
WITH_SIM=0
QUIET=0
for a in "$@"; do
  case "$a" in
    --with-anchors|--with-torch) WITH_ANCHORS=1 ;;
    --sim) WITH_SIM=1 ;;
    --quiet) QUIET=1 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "bootstrap.sh: unknown option '$a' (try --help)" >&2; exit 2 ;;
  esac
done

say() { [ "$QUIET" = 1 ] || echo "[bootstrap] $*"; }
die() { echo "bootstrap.sh: error: $*" >&2; exit 1; }

CACHE="${STARPU_ANP_CACHE:-$HOME/.cache/starpu-anp}"
STARPU_SERIES=1.4
PKGS=(build-essential cmake pkg-config dpkg-dev ca-certificates
      libopenmpi-dev openmpi-bin libopenblas-dev libhwloc-dev
      libdnnl-dev # oneDNN: the bf16 GEMMs of --precision bf16 (codelets/gemm_bf16.c)
      libfxt-dev fxt-tools zlib1g-dev libstb-dev
      vite gnuplot-nox librsvg2-bin dataset-fashion-mnist
      xz-utils file nftables iproute2 libprotobuf-c-dev protobuf-c-compiler python3-venv patch
      gdb) # gdb: the stacks of a hung test's processes (tests/scripts/lib.sh, run_or_dump_stacks)
# --sim: SimGrid (with smpicc/smpirun) and xsltproc, which StarPU's SimGrid configure needs.
SIM_PKGS=(libsimgrid-dev xsltproc patch)
# Applied to StarPU's source before the simulation build (section 4).
SIM_PATCH="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/third_party/starpu-smpi-vector-bytes.patch"
# and this one: StarPU-MPI's envelopes are not detached SMPI sends (the simulator's cost per message).
SIM_PATCH2="$(dirname "$SIM_PATCH")/starpu-smpi-envelope-actor.patch"
# and this one: StarPU's own STARPU_REDUX tasks are timed by their codelets' perfmodels, not skipped.
SIM_PATCH3="$(dirname "$SIM_PATCH")/starpu-simgrid-time-redux.patch"
# and this one: empty data-request lists are skipped without a mutex (a simcall each: the speed).
SIM_PATCH4="$(dirname "$SIM_PATCH")/starpu-simgrid-request-poll.patch"
# and this one: small data sends go out as the envelopes do (SimGrid's walks of detached comms).
SIM_PATCH5="$(dirname "$SIM_PATCH")/starpu-smpi-small-data-actor.patch"
# Applied before the real build: StarPU-MPI's progress thread backs off instead of busy-polling.
REAL_PATCH="$(dirname "$SIM_PATCH")/starpu-mpi-backoff.patch"
# and this one: an idle CPU worker sleeps instead of spinning.
REAL_PATCH2="$(dirname "$SIM_PATCH")/starpu-worker-backoff.patch"
# patches_of KIND: the names of the patches a build of KIND (sim, real) carries, as its cache
# stamp lists them (names only: the checkout's path may hold blanks, these names do not)
patches_of() {
  local p
  if [ "$1" = sim ]; then set -- "$SIM_PATCH" "$SIM_PATCH2" "$SIM_PATCH3" "$SIM_PATCH4" "$SIM_PATCH5"; else set -- "$REAL_PATCH" "$REAL_PATCH2"; fi
  for p in "$@"; do basename "$p"; done
}
# apply_patch_once SRCDIR PATCH FILE MARKER: apply PATCH to SRCDIR unless FILE (relative to it)
# already holds MARKER (a grep pattern only the patch adds), so a patched tree is left alone.
apply_patch_once() {
  grep -q -- "$4" "$1/$3" && return 0
  patch -d "$1" -p1 --forward -s < "$2" || die "cannot apply $2 to $1"
}

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# ---------------------------------------------------------------- 1. Debian packages
missing=()
[ "$WITH_SIM" = 0 ] || PKGS+=("${SIM_PKGS[@]}")
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

# ---------------------------------------------------------------- 1b. the text corpus
# The King James Bible as UTF-8 (ASCII) text, one verse a line without its reference: the default
# data of a net whose input is tokens. The `bible` program only reads its compressed data file, so
# the text is dumped once and kept in the cache; written to a temporary name, then renamed.
CORPUS="$CACHE/corpus/kjv.txt"
corpus_warn() { echo "bootstrap.sh: warning: $*; a language model then needs --text FILE" >&2; }
if [ -s "$CORPUS" ]; then
  say "text corpus: $CORPUS"
else
  CORPUS_PKGS=(bible-kjv bible-kjv-text)
  cmissing=()
  for p in "${CORPUS_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || cmissing+=("$p")
  done
  cok=1
  if [ "${#cmissing[@]}" -gt 0 ]; then
    apt_update
    say "installing the text corpus's Debian packages: ${cmissing[*]}"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${cmissing[@]}" \
        >"/tmp/starpu-anp-apt-corpus.log" 2>&1 \
      || { cok=0; corpus_warn "apt-get install ${cmissing[*]} failed (log: /tmp/starpu-anp-apt-corpus.log)"; }
  fi
  if [ "$cok" = 1 ]; then
    mkdir -p "$CACHE/corpus"
    # -f: no pretty-printing: one verse a line, "Ge1:1 In the beginning ..."; the reference goes.
    if bible -f Gen1:1-Rev22:21 2>/dev/null | sed -E 's/^[^ ]+ //' >"$CORPUS.tmp.$$" && [ -s "$CORPUS.tmp.$$" ]; then
      mv -f "$CORPUS.tmp.$$" "$CORPUS"
      say "text corpus: $CORPUS ($(wc -c <"$CORPUS") bytes)"
    else
      rm -f "$CORPUS.tmp.$$"
      corpus_warn "bible -f Gen1:1-Rev22:21 did not write the text"
    fi
  fi
fi

# ---------------------------------------------------------------- 5. anchors venv (PyTorch, TensorFlow)
# A stamp written after a successful import check makes the second run instant (importing both
# takes 10-20 s); without the stamp, or if a package has gone, the venv is checked by importing.
ANCHORS_VENV="$CACHE/anchors-venv"
ANCHORS_PY="$ANCHORS_VENV/bin/python"
ANCHORS_STAMP="$ANCHORS_VENV/.anchors-ok"
ANCHORS_PIP=(torch tensorflow-cpu numpy)
anchors_find() { # cheap: are the packages still there?
  "$ANCHORS_PY" -c "import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) for m in ('torch', 'tensorflow', 'numpy')) else 1)" 2>/dev/null
}
anchors_import() { # real: do they import? Writes the stamp (versions) when they do.
  local v
  v="$(TF_CPP_MIN_LOG_LEVEL=3 "$ANCHORS_PY" -c "import torch, tensorflow, numpy; print('torch', torch.__version__, 'tensorflow', tensorflow.__version__, 'numpy', numpy.__version__)" 2>/dev/null | tail -1)" || return 1
  [ -n "$v" ] || return 1
  printf '%s\n' "$v" >"$ANCHORS_STAMP"
}
if [ "$WITH_ANCHORS" = 1 ]; then
  if [ -x "$ANCHORS_PY" ] && [ -f "$ANCHORS_STAMP" ] && anchors_find; then
    say "anchors venv: $(cat "$ANCHORS_STAMP") in $ANCHORS_VENV"
  elif [ -x "$ANCHORS_PY" ] && anchors_import; then
    say "anchors venv: $(cat "$ANCHORS_STAMP") in $ANCHORS_VENV"
  else
    # python3 -m venv needs ensurepip, which Debian ships in python3-venv
    if ! python3 -c "import venv, ensurepip" 2>/dev/null; then
      apt_update
      say "installing python3-venv"
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv \
          >"/tmp/starpu-anp-apt.log" 2>&1 \
        || die "apt-get install python3-venv failed (python3 -m venv is unavailable); log in /tmp/starpu-anp-apt.log"
    fi
    if [ ! -x "$ANCHORS_PY" ]; then
      say "creating the venv $ANCHORS_VENV"
      mkdir -p "$CACHE"
      python3 -m venv "$ANCHORS_VENV" >/tmp/starpu-anp-venv.log 2>&1 \
        || die "python3 -m venv $ANCHORS_VENV failed; log in /tmp/starpu-anp-venv.log"
    fi
    rm -f "$ANCHORS_STAMP"
    piplog="$CACHE/anchors-pip.log"
    say "pip install ${ANCHORS_PIP[*]} into $ANCHORS_VENV (a few GB the first time; log: $piplog)"
    "$ANCHORS_PY" -m pip install --disable-pip-version-check -q "${ANCHORS_PIP[@]}" >"$piplog" 2>&1 \
      || die "pip could not install ${ANCHORS_PIP[*]} into $ANCHORS_VENV (no network or no wheel for $(python3 -V 2>&1)?): last line: $(grep -v '^ *$' "$piplog" | tail -1); full log in $piplog"
    anchors_import || die "the anchors venv $ANCHORS_VENV was installed but cannot import torch and tensorflow; see $piplog"
    say "anchors venv: $(cat "$ANCHORS_STAMP") in $ANCHORS_VENV"
  fi
  echo "anchors python: $ANCHORS_PY"
fi

# ---------------------------------------------------------------- 2. the tests' Python venv
# starpu_anp export writes ONNX; the tests run the model with onnxruntime and check it with
# onnx.checker. A small venv of its own (not the system Python, not the heavy anchors one).
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

# check_starpu_config KIND INCLUDE_DIR -> 0 when starpu_config.h there has what KIND needs:
# real = FxT + MPI (+ CUDA when nvcc exists) and no SimGrid; sim = SimGrid + MPI.
check_starpu_config() {
  local kind="$1" cfg="$2/starpu_config.h" why=""
  [ -f "$cfg" ] || { echo "no starpu_config.h in $2"; return 1; }
  grep -q '^#define STARPU_USE_MPI 1' "$cfg" || why+=" MPI (STARPU_USE_MPI)"
  if [ "$kind" = sim ]; then
    grep -q '^#define STARPU_SIMGRID 1' "$cfg" || why+=" SimGrid (STARPU_SIMGRID)"
    grep -q '^#define STARPU_MAXNODES 16$' "$cfg" || why+=" 16 memory nodes (STARPU_MAXNODES; an older cache has 32)"
  else
    grep -q '^#define STARPU_SIMGRID 1' "$cfg" && why+=" a real run (it is a SimGrid build)"
    grep -q '^#define STARPU_USE_FXT 1' "$cfg" || why+=" FxT (STARPU_USE_FXT)"
    if [ "$HAVE_NVCC" = 1 ]; then
      grep -q '^#define STARPU_USE_CUDA 1' "$cfg" || why+=" CUDA (STARPU_USE_CUDA, nvcc is present)"
    fi
  fi
  [ -z "$why" ] || { echo "$cfg lacks:$why"; return 1; }
  return 0
}

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

# ensure_starpu KIND: finds or builds StarPU and prints "starpu prefix: DIR" (KIND=real) or
# "starpu sim prefix: DIR" (KIND=sim: the SimGrid build of the same source, for scripts/simulate.sh).
#   real: a site StarPU found by pkg-config is used as is when it has what we need; else the cache.
#   sim:  always our cache build, $CACHE/starpu-<ver>-simgrid: static (SMPI requires it), with
#         StarPU-MPI, without FxT (Debian's libfxt.a is not -fPIC, so the static link fails:
#         simulated runs have no traces), up to 64 cores and 8 GPUs per simulated node.
ensure_starpu() {
  local kind="$1" tag label stamp prefix msg inc p stale
  if [ "$kind" = sim ]; then tag=simgrid; label="starpu sim prefix"; else tag="cuda$HAVE_NVCC"; label="starpu prefix"; fi

  # (a) a site StarPU already found by pkg-config (real runs only)
  if [ "$kind" = real ] && [ -z "${STARPU_ANP_FORCE_BUILD:-}" ] \
     && pkg-config --exists "starpu-$STARPU_SERIES starpumpi-$STARPU_SERIES" 2>/dev/null; then
    inc="$(pkg-config --variable=includedir "starpu-$STARPU_SERIES")/starpu/$STARPU_SERIES"
    if msg="$(check_starpu_config real "$inc")"; then
      say "using StarPU $(pkg-config --modversion starpu-$STARPU_SERIES) found by pkg-config"
      echo "$label: $(pkg-config --variable=prefix starpu-$STARPU_SERIES)"
      return 0
    else
      say "ignoring the StarPU found by pkg-config: $msg"
    fi
  fi

  # (b) our cached build
  for stamp in "$CACHE"/starpu-"$STARPU_SERIES".*-"$tag"/.installed; do
    [ -f "$stamp" ] || continue
    prefix="$(dirname "$stamp")"
    stale=""
    for p in $(patches_of "$kind"); do
      grep -qx "patch: $p" "$stamp" || { stale="$p"; break; }
    done
    if [ -n "$stale" ]; then
      say "the cached $prefix predates $stale: rebuilding it"
      continue
    fi
    if msg="$(check_starpu_config "$kind" "$prefix/include/starpu/$STARPU_SERIES")"; then
      say "StarPU ($kind) cached in $prefix"
      echo "$label: $prefix"
      return 0
    fi
  done

  # (c) build from the newest 1.4.x Debian source package
  mkdir -p "$CACHE/src"
  ensure_deb_src
  local ver upver srcdir orig log builddir total mpid n cudadir
  ver="$(apt-cache showsrc starpu 2>/dev/null | awk '/^Version: 1\.4\./{print $2}' | sort -V | tail -1)"
  [ -n "$ver" ] || die "no StarPU 1.4.x source package is available from the Debian sources"
  upver="${ver%%+*}"; upver="${upver%%-*}"
  prefix="$CACHE/starpu-$upver-$tag"
  srcdir="$CACHE/src/starpu-${ver%%-*}"
  say "building StarPU $ver ($kind) from Debian source into $prefix (about 5 min on 2 cores)"
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

  # third_party/'s patches, each applied once (the source tree is shared by both builds: the
  # simulation ones compile only under SimGrid, the real ones are compiled out there; see each
  # patch's head). In this order: the small-data patch goes on top of the envelopes' one.
  if [ "$kind" = sim ]; then
    # StarPU-MPI under SMPI sends vectors as bytes, not as a derived datatype SMPI copies 3 times.
    apply_patch_once "$srcdir" "$SIM_PATCH" mpi/src/starpu_mpi_datatype.h _starpu_mpi_datatype_count
    # Its envelopes from an actor of their own, not detached.
    apply_patch_once "$srcdir" "$SIM_PATCH2" mpi/src/mpi/starpu_mpi_mpi.c _starpu_mpi_simgrid_envelope_isend
    # Small data sends from a copy and an actor, as the envelopes.
    apply_patch_once "$srcdir" "$SIM_PATCH5" mpi/src/mpi/starpu_mpi_mpi.c _starpu_mpi_simgrid_data_isend
    # STARPU_REDUX's reduction tasks timed in simulation.
    apply_patch_once "$srcdir" "$SIM_PATCH3" src/core/simgrid.c "STARPU_REDUX$"
    # Empty request lists skipped without their mutex.
    apply_patch_once "$srcdir" "$SIM_PATCH4" src/datawizard/data_request.c "starpu-anp: under SimGrid too"
  else
    # The progress thread's back-off.
    apply_patch_once "$srcdir" "$REAL_PATCH" mpi/src/mpi/starpu_mpi_mpi.c STARPU_MPI_BACKOFF_MAX
    # The idle CPU workers' back-off.
    apply_patch_once "$srcdir" "$REAL_PATCH2" src/drivers/driver_common/driver_common.c STARPU_WORKER_BACKOFF_MAX
  fi

  log="$CACHE/starpu-build-$upver-$tag.log"
  local cfg=(--prefix="$prefix" --enable-mpi --disable-opencl --disable-build-doc
       --disable-build-examples --disable-build-tests --disable-starpufft --disable-fortran
       --disable-socl --disable-starpupy --disable-starpurm --disable-hip --disable-mlr
       --enable-maxcpus=64 --disable-openmp)
  if [ "$kind" = sim ]; then
    # configure picks smpicc/smpirun itself; CUDA devices are simulated (no CUDA is linked).
    # --enable-maxnodes=16 (RAM + 8 simulated GPUs fit; configure's default counts OpenCL too and
    # picks 32): every data handle carries one replicate per possible memory node, so halving
    # them makes a 4-node x 4-GPU ResNet-50 simulation 23% faster (16.7 -> 12.9 s), same result.
    cfg+=(--enable-simgrid --disable-shared --without-fxt --enable-maxcudadev=8 --enable-maxnodes=16)
  else
    cfg+=(--with-fxt)
    if [ "$HAVE_NVCC" = 1 ]; then
      cudadir="$(dirname "$(dirname "$(readlink -f "$NVCC")")")"
      cfg+=(--enable-cuda --with-cuda-dir="$cudadir")
    else
      cfg+=(--disable-cuda)
    fi
  fi
  builddir="$CACHE/build-starpu-$upver-$tag"
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
  msg="$(check_starpu_config "$kind" "$prefix/include/starpu/$STARPU_SERIES")" \
    || die "StarPU built without a required feature: $msg (configure log: $log)"
  { date -u +%FT%TZ; for p in $(patches_of "$kind"); do echo "patch: $p"; done; } > "$prefix/.installed"
  rm -rf "$builddir"
  say "StarPU $upver ($kind) installed in $prefix"
  echo "$label: $prefix"
}

# The simulation build first, so that "starpu prefix:" stays the last line.
# ensure_starpu_locked KIND: ensure_starpu under a lock per kind, so that bootstraps started at
# once (tests running side by side after a patch of third_party/ changed) build StarPU once: the
# others wait, then find the first one's stamp. Always sim before real, so two never deadlock.
# (A failure inside exits the script, which releases the lock.)
ensure_starpu_locked() {
  local lockfd
  mkdir -p "$CACHE"
  exec {lockfd}>"$CACHE/.starpu-$1.lock"
  flock "$lockfd"
  ensure_starpu "$1"
  exec {lockfd}>&-
}
if [ "$WITH_SIM" = 1 ]; then ensure_starpu_locked sim; fi
ensure_starpu_locked real
