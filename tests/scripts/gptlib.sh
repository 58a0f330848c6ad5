# gptlib.sh — what tests/scripts/mpi_gpt.sh and net_gpt.sh share (sourced after lib.sh): the
# built-in gpt-tiny (2 blocks, d = 64, T = 32, 118,528 parameters) trained with AdamW on a small
# deterministic text, 8 steps of 12 windows (12 = 2·6 = 3·4 = 4·3: every rank count and chunk
# count of the tests splits it evenly), and the comparisons against one process in one chunk.
#
# The loss at every one of the 8 steps (the metrics CSV's train_step rows: the loss of the global
# batch, summed over the ranks) within TOL = 1e-6 relative, |l - l_ref| <= TOL·|l_ref|: the issue's
# bound for sync, as tests/scripts/mpi_sync.sh holds lenet5's loss to it. The CSV's 6 decimals resolve
# about 2e-7 relative here; measured at most 1.9e-7 (one quantum).
#
# The final parameters within TOL_P = 5e-5 relative per tensor, max|a - a_ref| / max|a_ref| over
# each tensor (tests/scripts/gpt_compare.py), outside the key slice of each attention's QKV bias.
# Not 1e-6: training amplifies the reassociation of the first steps' sums, and AdamW most where a
# gradient is small (it divides by the gradient's own scale): measured 1.7e-6 to 9.1e-6 at worst,
# in h1_qkv.weight (block 1's query and key rows, whose gradients nearly cancel while its attention
# is near uniform); SGD with momentum 0.9 at lr 0.3 gives 1.2e-6 (tok.wte) in the same 8 steps.
# The key slice of the QKV bias has a zero gradient in exact arithmetic (gpt_compare.py): its values
# are noise that AdamW turns into steps, 1e-4 to 1e-3 apart; checked instead is that its second
# moment is noise (below KV_NOISE = 1e-18; measured 6e-23, against 1e-10 and more for the query and
# value slices), so the slice set apart is the degenerate one.
TOL=1e-6
TOL_P=5e-5
KV_NOISE=1e-18
# A deterministic 40 KB text: sentences drawn from 17 words by a fixed LCG (train_text.sh's).
awk 'BEGIN { split("the lord and god said unto them of israel in that day there was light upon earth", w, " ");
  s = 12345; out = "";
  for (i = 0; i < 7000; i++) { s = (s * 1103515245 + 12345) % 2147483648; out = out w[int(s / 65536) % 17 + 1];
    out = out (s % 7 == 0 ? ".\n" : " ") }
  printf "%s", out }' >"$TMP/t.txt"
GPT=(train --net gpt-tiny --text "$TMP/t.txt" --batch 12 --optimizer adamw --lr 0.003 --weight-decay 0.1
     --warmup-steps 2 --max-steps 8 --no-eval --seed 3 --quiet)
CMP="$DNN_SOURCE_DIR/tests/scripts/gpt_compare.py"

# gpt_go TAG LAUNCH... -- ARGS...: the run of GPT ARGS under LAUNCH (nothing: one process; an
# mpirun command line), its checkpoint and metrics in $TMP/TAG.{ckpt,csv}, its result line in
# LINE. Status 1 (stderr shown, one FAIL) when it failed.
gpt_go() {
  local tag="$1" launch=() rc=0; shift
  while [ "$1" != -- ]; do launch+=("$1"); shift; done; shift
  LINE="$("${launch[@]}" "$STARPU_ANP" "${GPT[@]}" --checkpoint "$TMP/$tag.ckpt" --metrics "$TMP/$tag.csv" "$@" \
    2>"$TMP/$tag.err" | tail -1)" || rc=$?
  if [ "$rc" != 0 ] || [ ! -s "$TMP/$tag.ckpt" ]; then
    tail -20 "$TMP/$tag.err" >&2; fail "$tag: ${launch[*]} ... $* failed (exit $rc)"; return 1
  fi
  note_result "$LINE"
}
# gpt_loss_worst REF TAG: the largest |l - l_ref| / |l_ref| over the 8 steps (status 1: steps
# missing).
gpt_loss_worst() {
  paste -d, <(awk -F, '$1 == "train_step" { print $4 }' "$TMP/$1.csv") \
            <(awk -F, '$1 == "train_step" { print $4 }' "$TMP/$2.csv") | awk -F, '
    { n++; if ($1 == "" || $2 == "") exit 1; d = $1 - $2; if (d < 0) d = -d; r = $1 < 0 ? -$1 : $1
      if (d / r > w) w = d / r }
    END { if (n != 8) exit 1; printf "%.3g\n", w + 0 }'
}
# gpt_close REF TAG: TAG within TOL (loss) and TOL_P (parameters) of REF; sets WL (the loss's
# worst relative difference over the steps), WP and WT (the parameters' worst max measure and its
# tensor), WK (the key slices', set apart) and SAME (1 when the checkpoints are byte-identical).
# Status 1 (one FAIL) when not within.
gpt_close() {
  local out kv
  SAME=0; cmp -s "$TMP/$1.ckpt" "$TMP/$2.ckpt" && SAME=1
  WL="$(gpt_loss_worst "$1" "$2")" || { fail "$2: the metrics do not hold 8 train_step losses"; return 1; }
  out="$(python3 "$CMP" "$TMP/$1.ckpt" "$TMP/$2.ckpt")" || { fail "$2: checkpoint comparison: $out"; return 1; }
  WP="$(awk '{ print $2 }' <<<"$out")" WT="$(awk '{ print $3 }' <<<"$out")"
  WK="$(awk '{ print $11 }' <<<"$out")" kv="$(awk '{ print $13 }' <<<"$out")"
  fcmp "$kv < $KV_NOISE" || fail "$2: the QKV bias's key slice has a second moment $kv, not noise (< $KV_NOISE)"
  fcmp "$WL <= $TOL && $WP <= $TOL_P" && return 0
  fail "$2 vs $1: loss $WL (tolerance $TOL), parameters $WP $WT (tolerance $TOL_P)"; return 1
}
