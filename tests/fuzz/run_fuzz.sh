#!/usr/bin/env bash
# run_fuzz.sh HARNESS SEEDS WORKDIR SECONDS [libFuzzer options...]
# Runs a libFuzzer harness for SECONDS on a fresh corpus grown from SEEDS (which stays as it is).
# A crash leaves its input in WORKDIR (crash-*, leak-*, timeout-*, oom-*) and fails the test;
# keep such inputs as regression cases in tests/fuzz/regressions/<harness>/.
set -euo pipefail
bin="$1" seeds="$2" work="$3" secs="$4"
shift 4
rm -rf "$work"
mkdir -p "$work/corpus"
rc=0
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "$@" "$work/corpus" "$seeds" 2>"$work/log" || rc=$?
grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|Done )' "$work/log" || true
grep -E 'cov: .* corp: ' "$work/log" | tail -1 || true
if [ "$rc" != 0 ]; then
  tail -60 "$work/log" >&2
  echo "FAIL: $(basename "$bin") exited $rc; inputs: $(ls "$work" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' | tr '\n' ' ' || true)" >&2
  exit 1
fi
rm -rf "$work/corpus"
exit 0
