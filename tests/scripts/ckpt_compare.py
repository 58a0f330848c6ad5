#!/usr/bin/env python3
"""ckpt_compare.py A.ckpt B.ckpt [SUFFIX_TO_SKIP...] — per-tensor relative difference of two
checkpoints of the same net (format: runtime/checkpoint.h, version 1 to 3). Prints one line per
tensor, "name n rel_norm rel_max identical", where rel_norm = ||a-b|| / ||a|| and rel_max =
max|a-b| / max|a| (0 when a is all zero and b equals it), then a last line
"worst rel_norm R (tensor) rel_max M (tensor) identical_tensors K of N". Exit 2 on a file
that is not a checkpoint or on tensors that do not match by name and size."""
import math, struct, sys


def load(path):
    b = open(path, "rb").read()
    if b[:8] != b"ANPCKPT\0":
        sys.exit(f"{path}: not a checkpoint")
    ver, hlen = struct.unpack_from("<II", b, 8)
    if ver not in (1, 2, 3):
        sys.exit(f"{path}: version {ver}, want 1, 2 or 3")
    o = 16
    _fp, _step, _epoch, ntens, _rng, ncls = struct.unpack_from("<QQIIQI", b, o)
    o += 36
    for _ in range(ncls):
        (ln,) = struct.unpack_from("<I", b, o)
        o += 4 + ln
    if ver >= 2:  # the net text
        (ln,) = struct.unpack_from("<I", b, o)
        o += 4 + ln
    tens = []
    for _ in range(ntens):
        (ln,) = struct.unpack_from("<I", b, o)
        name = b[o + 4:o + 4 + ln].decode()
        (n,) = struct.unpack_from("<Q", b, o + 4 + ln)
        o += 4 + ln + 8
        tens.append((name, n))
    if o != 16 + hlen:
        sys.exit(f"{path}: header length {hlen} does not match its contents ({o - 16})")
    out = []
    for name, n in tens:
        out.append((name, struct.unpack_from(f"<{n}f", b, o)))
        o += 4 * n
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    a, b = load(sys.argv[1]), load(sys.argv[2])
    skip = sys.argv[3:]
    if [(n, len(v)) for n, v in a] != [(n, len(v)) for n, v in b]:
        sys.exit("the checkpoints hold different tensors")
    worst_n = worst_m = (0.0, "-")
    ident = total = 0
    for (name, va), (_, vb) in zip(a, b):
        if any(name.endswith(s) for s in skip):
            continue
        total += 1
        d2 = sum((x - y) ** 2 for x, y in zip(va, vb))
        r2 = sum(x * x for x in va)
        dm = max((abs(x - y) for x, y in zip(va, vb)), default=0.0)
        rm = max((abs(x) for x in va), default=0.0)
        rn = math.sqrt(d2) / math.sqrt(r2) if r2 > 0 else (0.0 if d2 == 0 else math.inf)
        rx = dm / rm if rm > 0 else (0.0 if dm == 0 else math.inf)
        same = all(x == y for x, y in zip(va, vb))
        ident += same
        print(f"{name} {len(va)} {rn:.3g} {rx:.3g} {int(same)}")
        if rn > worst_n[0]:
            worst_n = (rn, name)
        if rx > worst_m[0]:
            worst_m = (rx, name)
    print(f"worst rel_norm {worst_n[0]:.3g} ({worst_n[1]}) rel_max {worst_m[0]:.3g} ({worst_m[1]}) "
          f"identical_tensors {ident} of {total}")


if __name__ == "__main__":
    main()
