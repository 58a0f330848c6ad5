#!/usr/bin/env bash
# train_default_chunks — the chunk count without --chunks (runtime/opts.c, dnn_opts_chunks) on CPU workers: 2 per
# worker for a net with batch norm while each chunk keeps 32 images (DNN_CHUNK_MIN_IMAGES), else 1 per worker; 1 per
# worker for a net without batch norm; --chunks wins. Read from the result line's chunks= of a 1-step bench
# (its synthetic batches), and the --summary memory line's "2 workers' default" (runtime/nets_cmd.c mirrors the rule)
# must name the same count. Each case's expected count is written out, so a rule that drifts on either side of
# the 32-image bound (batch 127 / 128 on 2 workers, 63 / 64 on 1) fails here.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export STARPU_NCUDA=0

# chunks NCPU NET BATCH [ARGS...]: the result line's chunks= of a one-step bench
chunks() {
	local ncpu="$1" net="$2" batch="$3" line
	shift 3
	line="$(STARPU_NCPU="$ncpu" "$STARPU_ANP" bench --net "$net" --batch "$batch" --steps 1 --warmup 0 \
		"$@" 2>"$TMP/err" | grep '^result:')" || { cat "$TMP/err" >&2; return 1; }
	result_field "$line" chunks
}

# expect NCPU NET BATCH WANT [ARGS...]
expect() {
	local ncpu="$1" net="$2" batch="$3" want="$4" got
	shift 4
	got="$(chunks "$ncpu" "$net" "$batch" "$@")" || { fail "$net batch $batch on $ncpu workers $*: run failed"; return; }
	echo "$net batch $batch, $ncpu workers $*: chunks=$got (want $want)"
	[ "$got" = "$want" ] || fail "$net batch $batch on $ncpu workers $*: chunks=$got, want $want"
}

expect 2 resnet8 64 2    # 4 chunks would hold 16 images: 1 per worker
expect 2 resnet8 127 2   # 31.75 images a chunk
expect 2 resnet8 128 4   # 32 images a chunk: 2 per worker
expect 2 resnet8 256 4
expect 1 resnet8 64 2
expect 1 resnet8 63 1
expect 2 lenet5 256 2    # no batch norm: 1 per worker at any batch
expect 2 resnet8 64 4 --chunks 4

# --summary's memory line, at the 2 workers it assumes
for case in "64 2" "128 4"; do
	set -- $case
	out="$("$STARPU_ANP" train --net resnet8 --data synthetic --batch "$1" --summary 2>&1)" ||
		{ fail "train --summary --batch $1 failed: $(tail -1 <<<"$out")"; continue; }
	line="$(grep 'training memory at' <<<"$out")" || { fail "--summary --batch $1: no memory line"; continue; }
	[[ "$line" == *"--batch $1, --chunks $2 (2 workers' default)"* ]] ||
		fail "--summary --batch $1 names another default chunk count than $2: $line"
done
finish
