#!/usr/bin/env python3
"""gpt_compare.py REF.ckpt GOT.ckpt — how far a GPT checkpoint is from a reference one, for
tests/scripts/mpi_gpt.sh and net_gpt.sh (plain Python: no numpy).

For every tensor (parameters, AdamW's moments) the relative difference is max|got - ref| / max|ref|
over the tensor. The key slice of every attention's QKV bias (`*_qkv.bias` elements [C, 2C),
the middle third, and the same slice of its moments) is set apart: its gradient is zero in exact
arithmetic (a bias b on the keys adds q·b to every score of a query's row, which the softmax
cancels), so what a float run computes for it is rounding noise (AdamW's second moment there is
about 1e-23, against 1e-8 and more for the query and value slices), and AdamW, which divides by the
root of that moment, turns noise into steps of up to lr·m/(sqrt(v) + eps): its value after a few
steps depends on the order of the sums by construction. The q and v slices of the same tensor are
compared as the other tensors (relative to max|ref| over the whole tensor).

Prints "params REL TENSOR norm NREL TENSOR moments MREL TENSOR keybias KREL kv_max V identical K of N":
the parameters' worst relative difference outside the key slices and its tensor, their worst
||got - ref|| / ||ref|| (whole tensors, key slices included), the same max measure over AdamW's
moments (or SGD's momentum), the key slices' worst (max measure), their largest second moment, and
how many tensors are byte-identical."""
import math, sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from ckpt_compare import load  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = load(sys.argv[1]), load(sys.argv[2])
    if [(n, len(v)) for n, v in a] != [(n, len(v)) for n, v in b]:
        sys.exit("the checkpoints hold different tensors")
    worst = {"p": [0.0, "-"], "n": [0.0, "-"], "m": [0.0, "-"]}
    kworst, kv, ident = 0.0, 0.0, 0
    for (name, va), (_, vb) in zip(a, b):
        if name.startswith("input."):  # the input normalisation, not trained
            continue
        ident += all(x == y for x, y in zip(va, vb))
        rm = max((abs(x) for x in va), default=0.0)
        base, moment = name.split(".adamw_")[0].split(".momentum")[0], ".adamw_" in name or name.endswith(".momentum")
        key = range(len(va) // 3, 2 * len(va) // 3) if base.endswith("_qkv.bias") else range(0)
        if not moment:
            d2, r2 = sum((x - y) ** 2 for x, y in zip(va, vb)), sum(x * x for x in va)
            rn = math.sqrt(d2 / r2) if r2 > 0 else (0.0 if d2 == 0 else math.inf)
            if rn > worst["n"][0]:
                worst["n"] = [rn, name]
        w = worst["m" if moment else "p"]
        for i, (x, y) in enumerate(zip(va, vb)):
            d = abs(x - y)
            r = d / rm if rm > 0 else (0.0 if d == 0 else math.inf)
            if i in key:
                kworst = max(kworst, r)
                if name.endswith(".adamw_v"):
                    kv = max(kv, abs(x))
            elif r > w[0]:
                w[0], w[1] = r, name
    print(" ".join(f"{k} {worst[c][0]:.3g} {worst[c][1]}" for k, c in (("params", "p"), ("norm", "n"), ("moments", "m")))
          + f" keybias {kworst:.3g} kv_max {kv:.3g} identical {ident} of {len(a) - 2}")


if __name__ == "__main__":
    main()
