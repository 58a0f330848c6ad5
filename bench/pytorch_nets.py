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
    biases or batch norm), as starpu-anp's sgd rule in codelets/optim.h (PyTorch semantics:
    v = m v + g + wd w).
  - loss: softmax cross-entropy averaged over the batch (starpu-anp scales the summed
    gradients by 1/B in its SGD task: the same update).

  - resnet18 / resnet50: graph/nets/resnet18.net / resnet50.net are torchvision's ResNet-18/-50
    layer for layer (11,689,512 / 25,557,032 parameters, 3x224x224 -> 1000), so these are
    torchvision.models.resnet18/resnet50 (weights=None); they need torchvision.

On a GPU (scripts/gpu-check.sh):
      python3 bench/pytorch_nets.py --net resnet50 --input 224 --batch 128 --device cuda --math tf32
--math fp32 turns TF32 off in both cuBLAS and cuDNN (torch.backends.cuda.matmul.allow_tf32 and
torch.backends.cudnn.allow_tf32 False), tf32 turns both on (starpu-anp: DNN_CUDA_MATH=fp32|tf32).
On cuda, cudnn.benchmark is on (fixed shapes: cuDNN picks its fastest algorithms during the
warm-up steps) and the timer waits for the GPU (torch.cuda.synchronize) before reading.

Run (with the anchors venv of scripts/bootstrap.sh --with-anchors, or any python with torch):
  ~/.cache/starpu-anp/anchors-venv/bin/python bench/pytorch_nets.py --net resnet20 --batch 64 --threads 2 --steps 10
It prints one line like starpu_anp bench's:
  result: framework=pytorch net=resnet20 batch=64 threads=2 params=272474 steps=10 images_per_s=...
`--params` prints only "NAME PARAMS" for every net (checked against `starpu_anp nets`).
Data are synthetic (random pixels and labels), generated once before timing, as in
starpu_anp bench; no data loading is timed.
"""
import contextlib
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench_timing import common_parser, time_steps  # bench/bench_timing.py, beside this file


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


def _torchvision(name):
    def make():
        try:
            import torchvision.models as tvm
        except ImportError as e:
            raise RuntimeError(f"--net {name} needs torchvision") from e
        return getattr(tvm, name)(weights=None)
    return make


# name -> (constructor, input shape C, H, W, classes), as `starpu_anp nets` lists them
NETS = {
    "lenet5": (LeNet5, (1, 28, 28), 10),
    "resnet8": (lambda: CifarResNet(1, 1), (1, 28, 28), 10),
    "resnet20": (lambda: CifarResNet(3, 3), (3, 32, 32), 10),
    "resnet18": (_torchvision("resnet18"), (3, 224, 224), 1000),
    "resnet50": (_torchvision("resnet50"), (3, 224, 224), 1000),
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


def set_math(device, math):
    """fp32: no TF32 anywhere; tf32: TF32 in cuBLAS matmuls and cuDNN convolutions."""
    if device.type != "cuda":
        return
    on = math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    torch.backends.cudnn.benchmark = True


def bench(net, batch, threads, steps, warmup, max_seconds=0.0, seed=1, device="cpu", math="fp32", input_hw=0,
          autocast="off"):
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    dev = torch.device(device)
    set_math(dev, math)
    ctor, shape, classes = NETS[net]
    if input_hw:
        shape = (shape[0], input_hw, input_hw)
    model = ctor().to(dev)
    model.train()
    opt = make_optimizer(model)
    loss_fn = nn.CrossEntropyLoss()
    # A few distinct synthetic batches, made before timing (bench has no data loading either).
    xs = [torch.randn(batch, *shape, device=dev) for _ in range(4)]
    ys = [torch.randint(0, classes, (batch,), device=dev) for _ in range(4)]
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    # --autocast bf16: torch.autocast around forward and loss (convs and matmuls in bf16, master
    # weights and the optimiser fp32), as bench/gpt_torch_step.py; starpu-anp's --precision bf16.
    cast = (lambda: torch.autocast(dev.type, dtype=torch.bfloat16)) if autocast == "bf16" else contextlib.nullcontext

    def step(i):
        opt.zero_grad(set_to_none=True)
        with cast():
            loss = loss_fn(model(xs[i % 4]), ys[i % 4])
        loss.backward()
        opt.step()
        return loss

    def wait(loss):
        value = loss.item()
        sync()
        return value

    wall, loss, done = time_steps(step, steps, warmup, max_seconds, wait)
    return batch * done / wall, wall, loss, done


def main():
    ap = common_parser(__doc__, NETS, "torch.set_num_threads", "untimed steps first")
    ap.add_argument("--device", default="cpu", help="torch device: cpu (default) or cuda[:N]")
    ap.add_argument("--math", choices=["fp32", "tf32"], default="fp32",
                    help="on cuda: fp32 disables TF32 in cuBLAS and cuDNN, tf32 enables it [fp32]")
    ap.add_argument("--input", type=int, default=0, help="input N x N (as starpu_anp --input) [the net's]")
    ap.add_argument("--autocast", choices=["off", "bf16"], default="off",
                    help="bf16: torch.autocast(dtype=torch.bfloat16) around forward and loss [off]")
    ap.add_argument("--params", action="store_true", help="print 'NAME PARAMS' for every net and exit")
    a = ap.parse_args()
    if a.params:
        for name in sorted(NETS):
            try:
                print(name, param_count(NETS[name][0]()))
            except RuntimeError:  # resnet18/50 without torchvision: not listed
                pass
        return 0
    if not a.net:
        ap.error("--net is required (or --params)")
    torch.set_num_interop_threads(1)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("error: --device cuda: torch sees no CUDA device")
    try:
        NETS[a.net][0]()
    except RuntimeError as e:
        sys.exit(f"error: {e}")
    ips, wall, loss, done = bench(a.net, a.batch, a.threads, a.steps, a.warmup, a.max_seconds,
                                  device=a.device, math=a.math, input_hw=a.input, autocast=a.autocast)
    params = param_count(NETS[a.net][0]())
    extra = ""
    if a.device != "cpu" or a.input:
        gpu = torch.cuda.get_device_name(torch.device(a.device)).replace(" ", "_") if a.device.startswith("cuda") else "cpu"
        extra = (f" device={a.device} gpu={gpu} math={a.math} input={a.input or NETS[a.net][1][1]}"
                 f" cudnn={torch.backends.cudnn.version() if a.device.startswith('cuda') else 0}")
    print(f"result: framework=pytorch torch={torch.__version__} net={a.net} batch={a.batch} "
          f"threads={a.threads} params={params} steps={done} train_loss={loss:.6f} "
          f"images_per_s={ips:.1f} wall_s={wall:.2f}{' autocast=bf16' if a.autocast == 'bf16' else ''}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
