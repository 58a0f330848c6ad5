#!/usr/bin/env python3
"""gpt_reference.py — the PyTorch reference of the whole GPT model (as llm.c checks its model
against a PyTorch dump): gpt-tiny (graph/nets/gpt-tiny.net: byte vocabulary 256, context 32,
2 layers, d 64, 4 heads, 118,528 parameters) with fixed weights and one fixed batch, its mean
per-token cross-entropy loss and every parameter's gradient, computed in float64, written to
tests/data/gpt_tiny_ref.bin, which tests/train_gpt_reference.c (CTest train_gpt_reference)
checks starpu-anp's training step against, without torch.

  ~/.cache/starpu-anp/anchors-venv/bin/python bench/gpt_reference.py [--out FILE] [--net FILE]

The model is nanoGPT's (model.py) GPT-2 layout, as the .net writes it (docs/transformers.md):
  x = wte[idx] + wpe[t]; per block: x += c_proj(attn(c_attn(ln_1(x)))),
  x += mlp_proj(gelu_tanh(c_fc(ln_2(x)))); logits = ln_f(x) @ wte^T (the head tied to wte, no bias);
  attention: q, k, v = channels [0, C), [C, 2C), [2C, 3C) of c_attn's output, H heads of C/H
  channels, causal, scale 1/sqrt(C/H) (torch.nn.functional.scaled_dot_product_attention);
  layer norms eps 1e-5; every Linear has a bias; loss: cross-entropy averaged over the B*T tokens.

Weights: a torch.Generator seeded with 43 draws, in the .net's parameter order, float32 values:
  tok.wte, tok.wpe         normal(0, 0.1)  (larger than GPT-2's 0.02, so the logits and the
                           attention are far from uniform and every path's gradient counts)
  <ln>.weight, <ln>.bias   1 + 0.1 normal, 0.1 normal  (not the 1 / 0 init, so the affine part is checked)
  <dense>.weight, .bias    uniform(-1/sqrt(fan_in), 1/sqrt(fan_in))  (nn.Linear's default)
then the batch: B*(T+1) ids uniform in [0, 256); sample b's inputs are ids[b][0:T], its targets
ids[b][1:T+1]. The float32 values are what the file stores; the model computes in float64 from
them, so the file's loss and gradients are the exact model's to float64 rounding (the gradients
are then rounded to float32). The same model in float32 is also run, and its worst per-tensor
error against float64 printed: what a correct float32 implementation can be expected to reach.

The file (little-endian):
  char     magic[8]   "GPTREF1\\0"
  uint32   version    1
  int32    B, T, V, C, L, H, ntensors
  ntensors times, in the .net's parameter order (nodes in file order, slots in order):
    uint32 namelen; char name[namelen]   "<node>.<slot>", e.g. "tok.wte", "h0_qkv.weight"
    int64  n
    float  value[n]                      (row-major as the .net stores it: dense weight OUT x IN,
                                          wte V x C, wpe T x C)
    float  grad[n]                       d loss / d value, the loss being the mean over B*T tokens
  int32    ids[B*T]                      sample-major, token-major: ids[b*T + t]
  int32    targets[B*T]
  float64  loss
  char     end[8]     "GPTREND\\0"
"""
import argparse
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B, T, V, C, L, H = 4, 32, 256, 64, 2, 4
SEED = 43


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.C, self.H = C, H
        self.ln1 = nn.LayerNorm(C, eps=1e-5)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C, eps=1e-5)
        self.fc = nn.Linear(C, 4 * C)
        self.mlp = nn.Linear(4 * C, C)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(self.C, dim=2)
        q, k, v = (z.view(b, t, self.H, c // self.H).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # scale 1/sqrt(C/H)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    """The .net's GPT (graph/nets/gen_nets.py): vocabulary V, context T, L blocks of width C, H heads.
    bench/gpt_learning.py trains it too."""

    def __init__(self, V=V, T=T, C=C, L=L, H=H):
        super().__init__()
        self.V = V
        self.wte = nn.Parameter(torch.empty(V, C))
        self.wpe = nn.Parameter(torch.empty(T, C))
        self.h = nn.ModuleList(Block(C, H) for _ in range(L))
        self.lnf = nn.LayerNorm(C, eps=1e-5)

    def forward(self, idx, targets):
        x = self.wte[idx] + self.wpe[: idx.shape[1]]
        for blk in self.h:
            x = blk(x)
        logits = self.lnf(x) @ self.wte.t()  # the head is wte itself
        return F.cross_entropy(logits.reshape(-1, self.V), targets.reshape(-1))

    def named(self):
        """(the .net's name, tensor) in the .net's parameter order."""
        out = [("tok.wte", self.wte), ("tok.wpe", self.wpe)]
        for i, blk in enumerate(self.h):
            for mod in ("ln1", "qkv", "proj", "ln2", "fc", "mlp"):
                m = getattr(blk, mod)
                out += [(f"h{i}_{mod}.weight", m.weight), (f"h{i}_{mod}.bias", m.bias)]
        return out + [("lnf.weight", self.lnf.weight), ("lnf.bias", self.lnf.bias)]


def net_param_names(path):
    """The parameter names the .net gives, in its order (nodes top to bottom, which its topological
    sort keeps, slots in order), and its shape keys: the check that this model is that net."""
    slots = {"embed": ("wte", "wpe"), "layernorm": ("weight", "bias"), "dense": ("weight", "bias")}
    names, keys = [], {}
    for line in open(path):
        f = line.split("#")[0].split()
        if not f:
            continue
        if f[0] == "input":
            keys["T"] = int(f[3])
        for kv in f[3:]:
            if "=" in kv:
                k, v = kv.split("=")
                keys.setdefault(k, set()).add(int(v))
        names += [f"{f[1]}.{s}" for s in slots.get(f[0], ())]
    return names, keys


def net_model(path):
    """A GPT of the .net at path (its vocab, context, dim, heads and block count), checked to have
    the .net's parameters in its order; exits with a line when the .net is not such a GPT."""
    names, keys = net_param_names(path)
    try:
        (V,), (C,), (H,), T = keys["vocab"], keys["dim"], keys["heads"], keys["T"]
    except (KeyError, ValueError):
        sys.exit(f"{path}: not a GPT net of gen_nets.py's form (keys {keys})")
    L = sum(n.endswith("_ln1.weight") for n in names)
    model = GPT(V, T, C, L, H)
    if names != [n for n, _ in model.named()]:
        sys.exit(f"{path}: its parameters are not gen_nets.py's GPT's: {names}")
    return model


def init(model, gen):
    fan_in = {}
    for name, p in model.named():
        node, slot = name.split(".")
        with torch.no_grad():
            if node == "tok":
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
            elif node.split("_")[-1] in ("ln1", "ln2", "lnf"):
                z = torch.randn(p.shape, generator=gen) * 0.1
                p.copy_(1 + z if slot == "weight" else z)
            else:  # a dense: its weight (OUT x IN) comes first and gives the bias its fan_in
                fan_in.setdefault(node, p.shape[1] if p.dim() == 2 else None)
                bound = 1 / math.sqrt(fan_in[node])
                p.copy_(torch.rand(p.shape, generator=gen) * (2 * bound) - bound)


def loss_and_grads(model, ids, dtype):
    model = model.to(dtype)
    model.zero_grad()
    loss = model(ids[:, :T], ids[:, 1:])
    loss.backward()
    return loss.item(), [(n, p.detach().clone(), p.grad.detach().clone()) for n, p in model.named()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "gpt_tiny_ref.bin"))
    ap.add_argument("--net", default=os.path.join(ROOT, "graph", "nets", "gpt-tiny.net"))
    a = ap.parse_args()
    torch.set_num_threads(1)  # one summation order: the same file on every run

    model = net_model(a.net)
    if model.named()[1][1].shape != (T, C) or model.V != V or len(model.h) != L or model.h[0].H != H:
        sys.exit(f"gpt_reference.py: {a.net} is not gpt-tiny (T={T} V={V} C={C} L={L} H={H})")

    gen = torch.Generator().manual_seed(SEED)
    init(model, gen)  # float32 values
    ids = torch.randint(0, V, (B, T + 1), generator=gen)

    loss64, g64 = loss_and_grads(model, ids, torch.float64)
    loss32, g32 = loss_and_grads(model, ids, torch.float32)
    worst, wname = 0.0, ""
    for (n, _, r), (_, _, g) in zip(g64, g32):
        e = ((g.double() - r).abs().max() / r.abs().max()).item()
        if e > worst:
            worst, wname = e, n
    nparams = sum(p.numel() for _, p, _ in g64)
    print(f"gpt-tiny: {len(g64)} tensors, {nparams} parameters; loss float64 {loss64:.12f}, float32 {loss32:.9f} "
          f"(relative {abs(loss32 - loss64) / loss64:.2e}); float32 gradients vs float64: worst tensor {wname} "
          f"{worst:.2e} (max|g32 - g64| / max|g64|)")

    with open(a.out, "wb") as f:
        f.write(b"GPTREF1\0")
        f.write(struct.pack("<I7i", 1, B, T, V, C, L, H, len(g64)))
        for n, p, g in g64:
            nb = n.encode()
            f.write(struct.pack("<I", len(nb)) + nb + struct.pack("<q", p.numel()))
            f.write(p.float().contiguous().numpy().astype("<f4").tobytes())
            f.write(g.float().contiguous().numpy().astype("<f4").tobytes())
        f.write(ids[:, :T].to(torch.int32).contiguous().numpy().astype("<i4").tobytes())
        f.write(ids[:, 1:].to(torch.int32).contiguous().numpy().astype("<i4").tobytes())
        f.write(struct.pack("<d", loss64))
        f.write(b"GPTREND\0")
    print(f"wrote {a.out} ({os.path.getsize(a.out)} bytes)")


if __name__ == "__main__":
    main()
