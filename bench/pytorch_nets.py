#!/usr/bin/env python3
"""The built-in starpu-anp nets written in PyTorch, and a training-throughput benchmark.

The definitions mirror graph/nets/*.net (docs/net-format.md) layer for layer:
  - lenet5: conv 1->6 k5 pad2 (bias), relu, maxpool 2, conv 6->16 k5 (bias), relu, maxpool 2,
    dense 400->120, relu, dense 120->84, relu, dense 84->10;
  - resnet8 / resnet20: CIFAR-style ResNet (6n+2, n = 1 / 3), 16-channel 3x3 stem, basic blocks
    of 16/32/64 channels, projection shortcuts (1x1 conv + batch norm) where the shape changes,
    convolutions without bias, global average pool, dense 64->10;
  - PyTorch's default initialisation (the same as starpu-anp's), batch-norm gamma 1, beta 0;
  - SGD with momentum 0.9, lr 0.05, weight decay 5e-4 on conv/dense weights only (not on
    biases or batch norm), as starpu-anp's dnn_sgd (PyTorch semantics: v = m v + g + wd w).
  - loss: softmax cross-entropy averaged over the batch (starpu-anp scales the summed
    gradients by 1/B in its SGD task: the same update).

Run (with the anchors venv of scripts/bootstrap.sh --with-anchors, or any python with torch):
  ~/.cache/starpu-anp/anchors-venv/bin/python bench/pytorch_nets.py --net resnet20 --batch 64 --threads 2 --steps 10
It prints one line like starpu_anp bench's:
  result: framework=pytorch net=resnet20 batch=64 threads=2 params=272474 steps=10 images_per_s=...
`--params` prints only "NAME PARAMS" for every net (checked against `starpu_anp nets`).
Data are synthetic (random pixels and labels), generated once before timing, as in
starpu_anp bench; no data loading is timed.
"""
import argparse
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNet5(nn.Module):
    """graph/nets/lenet5.net: 1x28x28 -> 10, 61,706 parameters."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 6, 5, padding=2, bias=True)
        self.c2 = nn.Conv2d(6, 16, 5, bias=True)
        self.f1 = nn.Linear(16 * 5 * 5, 120)
        self.f2 = nn.Linear(120, 84)
        self.f3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2, 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.f1(x))
        x = F.relu(self.f2(x))
        return self.f3(x)


class BasicBlock(nn.Module):
    """gen_nets.py basic_block: conv3x3-bn-relu-conv3x3-bn (+ projection shortcut), add, relu."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.a = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.a_bn = nn.BatchNorm2d(cout)
        self.b = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.b_bn = nn.BatchNorm2d(cout)
        self.sc = None
        if stride != 1 or cin != cout:
            self.sc = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        h = F.relu(self.a_bn(self.a(x)))
        h = self.b_bn(self.b(h))
        return F.relu(h + (self.sc(x) if self.sc is not None else x))


class CifarResNet(nn.Module):
    """gen_nets.py cifar_resnet: stem conv3x3(16)-bn-relu, 3 stages x n blocks, avgpool, fc."""

    def __init__(self, in_c, n, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(in_c, 16, 3, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(16)
        blocks, cin = [], 16
        for s, width in enumerate([16, 32, 64]):
            for b in range(n):
                blocks.append(BasicBlock(cin, width, 2 if (s > 0 and b == 0) else 1))
                cin = width
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = F.relu(self.stem_bn(self.stem(x)))
        x = self.blocks(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


# name -> (constructor, input shape C, H, W), as `starpu_anp nets` lists them
NETS = {
    "lenet5": (LeNet5, (1, 28, 28)),
    "resnet8": (lambda: CifarResNet(1, 1), (1, 28, 28)),
    "resnet20": (lambda: CifarResNet(3, 3), (3, 32, 32)),
}


def param_count(model):
    return sum(p.numel() for p in model.parameters())


def make_optimizer(model, lr=0.05, momentum=0.9, weight_decay=5e-4):
    """Weight decay on conv/dense weights only, as starpu-anp (docs/net-format.md)."""
    decay, no_decay = [], []
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            decay.append(m.weight)
            if m.bias is not None:
                no_decay.append(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            no_decay += [m.weight, m.bias]
    assert len(decay) + len(no_decay) == len(list(model.parameters()))
    return torch.optim.SGD([{"params": decay, "weight_decay": weight_decay},
                            {"params": no_decay, "weight_decay": 0.0}], lr=lr, momentum=momentum)


def bench(net, batch, threads, steps, warmup, max_seconds=0.0, seed=1):
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    ctor, shape = NETS[net]
    model = ctor()
    model.train()
    opt = make_optimizer(model)
    loss_fn = nn.CrossEntropyLoss()
    # A few distinct synthetic batches, made before timing (bench has no data loading either).
    xs = [torch.randn(batch, *shape) for _ in range(4)]
    ys = [torch.randint(0, 10, (batch,)) for _ in range(4)]

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xs[i % 4]), ys[i % 4])
        loss.backward()
        opt.step()
        return loss

    t0 = time.perf_counter()
    for i in range(warmup):
        step(i)
        if max_seconds > 0 and time.perf_counter() - t0 > max_seconds / 2:
            break  # --max-seconds bounds the warm-up too (half of it)
    t0 = time.perf_counter()
    done = 0
    for i in range(steps):
        loss = step(warmup + i)
        done += 1
        # --max-seconds: stop early (a slow configuration, e.g. 2 threads on a busy machine)
        if max_seconds > 0 and done >= 3 and time.perf_counter() - t0 > max_seconds:
            break
    loss.item()
    wall = time.perf_counter() - t0
    return batch * done / wall, wall, float(loss.detach()), done


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", choices=sorted(NETS))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--max-seconds", type=float, default=0.0,
                    help="stop timing after this many seconds (at least 3 steps); 0: run all --steps")
    ap.add_argument("--params", action="store_true", help="print 'NAME PARAMS' for every net and exit")
    a = ap.parse_args()
    if a.params:
        for name in sorted(NETS):
            print(name, param_count(NETS[name][0]()))
        return 0
    if not a.net:
        ap.error("--net is required (or --params)")
    torch.set_num_interop_threads(1)
    ips, wall, loss, done = bench(a.net, a.batch, a.threads, a.steps, a.warmup, a.max_seconds)
    params = param_count(NETS[a.net][0]())
    print(f"result: framework=pytorch torch={torch.__version__} net={a.net} batch={a.batch} "
          f"threads={a.threads} params={params} steps={done} train_loss={loss:.6f} "
          f"images_per_s={ips:.1f} wall_s={wall:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
