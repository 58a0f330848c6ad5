#!/usr/bin/env bash
# per-kernel profiles of the GPT comparison's configurations, one worker / one thread
set -u
cd "$(dirname "$0")/../.."
APP=build-bench/apps/starpu_anp
PY=~/.cache/starpu-anp/anchors-venv/bin/python
A="--optimizer adamw --lr 6e-4 --weight-decay 0.1 --quiet"
echo "load: $(cat /proc/loadavg)"
STARPU_NCPU=1 timeout 600 $APP bench --net gpt-nano --batch 16 --steps 12 --warmup 2 $A --trace out/prof/starpu-gpt-nano-1w 2>&1 | grep -E '^result|^trace'
timeout 600 $PY bench/gpt_torch_step.py --net gpt-nano --batch 16 --threads 1 --steps 12 --warmup 2 --profile out/prof/torch-gpt-nano-1t.txt 2>/dev/null
STARPU_NCPU=2 timeout 600 $APP bench --net gpt-nano --batch 16 --steps 12 --warmup 2 $A --trace out/prof/starpu-gpt-nano-2w 2>&1 | grep -E '^result|^trace'
STARPU_NCPU=1 timeout 600 $APP bench --net out/gpt2/gpt2-t256.net --batch 4 --steps 4 --warmup 1 $A --trace out/prof/starpu-gpt2-t256-1w 2>&1 | grep -E '^result|^trace'
timeout 600 $PY bench/gpt_torch_step.py --net gpt2 --context 256 --batch 4 --threads 1 --steps 3 --warmup 1 --profile out/prof/torch-gpt2-t256-1t.txt 2>/dev/null
echo "load: $(cat /proc/loadavg)"
