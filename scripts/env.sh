# env.sh — sourced by the scripts: runs bootstrap (quietly when asked) and exports the StarPU
# prefix so CMake's pkg-config finds it. Sets STARPU_PREFIX, with --with-anchors
# STARPU_ANP_ANCHORS_PY (the anchors venv's python: current PyTorch and TensorFlow), and with --sim
# STARPU_SIM_PREFIX (the SimGrid StarPU, for scripts/simulate.sh).
_anp_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_anp_boot_out="$(bash "$_anp_root/scripts/bootstrap.sh" "$@")" || exit 1
printf '%s\n' "$_anp_boot_out" | grep -v '^starpu prefix:\|^starpu sim prefix:\|^anchors python:' || true
STARPU_PREFIX="$(printf '%s\n' "$_anp_boot_out" | sed -n 's/^starpu prefix: //p' | tail -1)"
[ -n "$STARPU_PREFIX" ] || { echo "error: bootstrap did not report a StarPU prefix" >&2; exit 1; }
export STARPU_PREFIX
_anp_sim_prefix="$(printf '%s\n' "$_anp_boot_out" | sed -n 's/^starpu sim prefix: //p' | tail -1)"
if [ -n "$_anp_sim_prefix" ]; then export STARPU_SIM_PREFIX="$_anp_sim_prefix"; fi
_anp_anchors_py="$(printf '%s\n' "$_anp_boot_out" | sed -n 's/^anchors python: //p' | tail -1)"
if [ -n "$_anp_anchors_py" ]; then export STARPU_ANP_ANCHORS_PY="$_anp_anchors_py"; fi
export PKG_CONFIG_PATH="$STARPU_PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PATH="$STARPU_PREFIX/bin:$PATH"
