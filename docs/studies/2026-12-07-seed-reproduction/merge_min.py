#!/usr/bin/env python3
"""merge_min.py OUT DIR1 DIR2 ... — merge several CPU calibrations (StarPU history files,
DIR/.starpu/sampling/codelets/45/*) of the same shapes into OUT, keeping for each (file, footprint)
the entry of the smallest mean. On this shared 2-core machine (load average 15-18) a task's
calibration samples hold descheduled ones (deviations of 1-3 means, docs/studies/
2026-12-07-seed-reproduction.md): the smallest of several draws' means is the least contaminated.
OUT starts as a copy of DIR1 (stamps, kernels.txt, cpu_here.spec included)."""
import os
import re
import shutil
import sys

ENTRY = re.compile(r"^([0-9a-f]{8})\t")


def entries(path):
    out = {}
    if os.path.exists(path):
        for line in open(path):
            m = ENTRY.match(line)
            if m:
                out[m.group(1)] = line
    return out


def main():
    out, dirs = sys.argv[1], sys.argv[2:]
    if os.path.exists(out):
        shutil.rmtree(out)
    shutil.copytree(dirs[0], out)
    sub = os.path.join(".starpu", "sampling", "codelets", "45")
    replaced = kept = 0
    for name in sorted(os.listdir(os.path.join(out, sub))):
        path = os.path.join(out, sub, name)
        draws = [entries(os.path.join(d, sub, name)) for d in dirs]
        lines = []
        for line in open(path):
            m = ENTRY.match(line)
            if m:
                cands = [e[m.group(1)] for e in draws if m.group(1) in e]
                best = min(cands, key=lambda l: float(l.split()[3]))
                replaced += best != line
                kept += best == line
                line = best
            lines.append(line)
        with open(path, "w") as f:
            f.writelines(lines)
    print(f"merge_min: {replaced} entries from later draws, {kept} from the first, into {out}")


if __name__ == "__main__":
    main()
