#!/bin/bash
# The per-pass A/B of the study: /tmp/fw/wprof_base and /tmp/fw/wprof_new are wino_pass_harness.c linked with the
# old and the new conv2d_winograd_f2.c object; 3 rounds, each shape and pass warm and cold, A then B.
# Run as: setsid -w bash scripts/measure_prio.sh env -u OPENBLAS_CORETYPE docs/studies/2026-12-07-fp32-wino/wino_pass_ab.sh
for r in 1 2 3; do
 for a in "f 16 32 16" "w 16 32 16" "f 32 16 32" "w 32 16 32" "f 64 8 64" "w 64 8 64" "f 16 28 16" "w 16 28 16" "f 32 14 32" "w 32 14 32" "f 64 7 64" "w 64 7 64"; do
  for ev in 0 1; do
   for v in base new; do echo "r$r ev$ev $v $(/tmp/fw/wprof_$v $a 32 40 $ev)"; done
  done
 done
done
