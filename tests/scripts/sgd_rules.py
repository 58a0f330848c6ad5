#!/usr/bin/env python3
"""sgd_rules.py BEFORE.ckpt A.ckpt B.ckpt WD LR TOL — one SGD step taken twice from the same
state BEFORE (same data, same gradient), A with weight decay 0 and B with weight decay WD.
Then, for every parameter tensor (momentum, running statistics and input.* aside):
  - biases, batch-norm gamma and beta (names ending .bias .gamma .beta) get no weight decay, so
    A and B must be bit-identical;
  - every other tensor w: v = momentum * v + g + WD * w, w -= lr * v, so A - B = lr * WD * w_before.
    The tensor's effective rate lr_eff = <A - B, WD w> / <WD w, WD w> must equal LR within TOL
    relative, and ||A - B - LR WD w|| / ||LR WD w|| <= TOL.
Prints one line per tensor and "worst ..." last; exit 1 on a violation, 2 on unreadable input."""
import math, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckpt_compare import load  # noqa: E402


def main():
    if len(sys.argv) != 7:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    w0, a, b = (dict(load(p)) for p in sys.argv[1:4])
    wd, lr, tol = (float(x) for x in sys.argv[4:7])
    bad = 0
    worst = 0.0
    ndecay = nfree = 0
    for name, va in a.items():
        if name.endswith((".momentum", ".running")) or name.startswith("input."):
            continue  # optimiser state, running statistics, the input normalisation
        vb, v0 = b[name], w0[name]
        if name.endswith((".bias", ".gamma", ".beta")):
            nfree += 1
            same = all(x == y for x, y in zip(va, vb))
            print(f"{name} no-decay identical={int(same)}")
            if not same:
                print(f"FAIL: {name} changed with the weight decay (biases and batch-norm parameters get none)")
                bad += 1
            continue
        ndecay += 1
        d = [x - y for x, y in zip(va, vb)]
        e = [wd * x for x in v0]
        ee = sum(x * x for x in e)
        if ee == 0:
            print(f"FAIL: {name}: all-zero before the step, nothing to measure")
            bad += 1
            continue
        lr_eff = sum(x * y for x, y in zip(d, e)) / ee
        res = math.sqrt(sum((x - lr * y) ** 2 for x, y in zip(d, e)) / ee) / lr
        rel = abs(lr_eff - lr) / lr
        worst = max(worst, rel, res)
        print(f"{name} decayed lr_eff={lr_eff:.7g} rel_err={rel:.3g} residual={res:.3g}")
        if not (rel <= tol and res <= tol):
            print(f"FAIL: {name}: A - B is {lr_eff:.7g} * WD * w (residual {res:.3g}), want lr {lr:.7g}")
            bad += 1
    print(f"worst {worst:.3g} decayed_tensors {ndecay} no_decay_tensors {nfree} failures {bad}")
    if ndecay == 0 or nfree == 0:
        print("FAIL: the net must have both kinds of tensor")
        bad += 1
    sys.exit(1 if bad else 0)


main()
