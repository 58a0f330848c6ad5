#!/usr/bin/env python3
"""The PyTorch fp32 reference of one whole GPT training step (forward, backward, AdamW), timed.

The model is starpu-anp's built-in GPT layout (graph/nets/gen_nets.py, nanoGPT's model.py):
  - token + position embeddings (wte [V x C], wpe [T x C]);
  - per block: LayerNorm -> Linear(C, 3C) -> scaled_dot_product_attention(is_causal=True) over H
    heads -> Linear(C, C) -> residual add; LayerNorm -> Linear(C, 4C) -> GELU(approximate='tanh')
    -> Linear(4C, C) -> residual add;
  - a final LayerNorm and the output head tied to wte (logits = x @ wte^T, no bias);
  - every Linear and LayerNorm has a bias (GPT-2's); no dropout;
  - PyTorch's default initialisation for Linear and LayerNorm, wte and wpe normal(0, 0.02), as
    starpu-anp's (docs/transformers.md);
  - loss: cross-entropy per token, averaged over every token of the batch (starpu-anp's per-token
    softmax_xent: each sample's mean over its T tokens, averaged over the batch: the same number);
  - AdamW (betas 0.9 / 0.999, eps 1e-8) with weight decay on wte, wpe and the Linear weights, none on
    biases and LayerNorm, as starpu-anp's parameter slots (embed's decayed, layernorm's no_decay).

Nets (--net, as `starpu_anp nets` names them; --vocab/--context/--d/--layers/--heads override):
  gpt-tiny  V 256,   T 32,   C 64,   2 layers,  4 heads
  gpt-nano  V 256,   T 128,  C 128,  4 layers,  4 heads
  gpt2      V 50257, T 1024, C 768,  12 layers, 12 heads (124,439,808 parameters)
  gpt2-xl   V 50257, T 1024, C 1600, 48 layers, 25 heads (1,557,611,200 parameters)
--context T also sizes wpe (T x C), as starpu-anp's embed does for an `input idx tokens T` line.

Run (the anchors venv of scripts/bootstrap.sh --with-anchors, or any python with torch):
  ~/.cache/starpu-anp/anchors-venv/bin/python bench/gpt_torch_step.py --net gpt-nano --batch 16 --threads 1
It prints one machine-readable line, like starpu_anp bench's and bench/pytorch_nets.py's:
  result: framework=pytorch torch=... net=gpt-nano vocab=256 context=128 d=128 layers=4 heads=4
          batch=16 threads=1 params=842496 steps=... train_loss=... tokens_per_s=... images_per_s=...
          wall_s=... peak_rss_mib=...
images_per_s counts samples (sequences) per second, starpu_anp bench's unit; tokens_per_s is that
times the context. peak_rss_mib is this process's peak resident set (getrusage ru_maxrss) at exit:
run one configuration per process for a clean figure. The tokens are random ids in [0, V), made
before timing (4 distinct batches, used in turn); no data loading is timed.
`--params` prints only "NAME PARAMS" for every net at its own context (checked against
`starpu_anp nets`), or with --net for that net with the overrides given (--context sizes wpe).
"""
import math
import resource
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench_timing import common_parser, time_steps  # bench/bench_timing.py, beside this file

# name -> (vocab, context, d, layers, heads): graph/nets/gen_nets.py's built-in GPTs
NETS = {
    "gpt-tiny": (256, 32, 64, 2, 4),
    "gpt-nano": (256, 128, 128, 4, 4),
    "gpt2": (50257, 1024, 768, 12, 12),
    "gpt2-xl": (50257, 1024, 1600, 48, 25),
}


def gpt_params(vocab, ctx, d, layers):
    """Trainable parameters with the tied head counted once (gen_nets.py's gpt_params)."""
    block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    return vocab * d + ctx * d + layers * block + 2 * d


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.mlp = nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        # [B, T, C] -> [B, H, T, C/H]: head h is channels [h C/H, (h+1) C/H) of each of q, k, v
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, ctx, d, layers, heads):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        nn.init.normal_(self.wte.weight, 0.0, 0.02)
        nn.init.normal_(self.wpe.weight, 0.0, 0.02)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(d)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.lnf(x) @ self.wte.weight.t()  # the tied head


def make_optimizer(model, lr, weight_decay, impl):
    """AdamW, decay on the embeddings and Linear weights only. impl: PyTorch's for-loop default on
    CPU ("default"), its multi-tensor path ("foreach") or its fused CPU kernel ("fused")."""
    decay, no_decay = [], []
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            decay.append(m.weight)
            if getattr(m, "bias", None) is not None:
                no_decay.append(m.bias)
        elif isinstance(m, nn.LayerNorm):
            no_decay += [m.weight, m.bias]
    assert len(decay) + len(no_decay) == len(list(model.parameters()))
    kw = {"foreach": True} if impl == "foreach" else {"fused": True} if impl == "fused" else {"foreach": False}
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.999), eps=1e-8, **kw)


def main():
    ap = common_parser(__doc__, NETS, "torch.set_num_threads (intra-op; inter-op is 1)", "untimed steps first")
    ap.set_defaults(batch=16, steps=10, warmup=2)
    ap.add_argument("--vocab", type=int, help="vocabulary [the net's]")
    ap.add_argument("--context", type=int, help="context T, tokens per sample [the net's]")
    ap.add_argument("--d", type=int, help="channels C [the net's]")
    ap.add_argument("--layers", type=int, help="blocks [the net's]")
    ap.add_argument("--heads", type=int, help="attention heads [the net's]")
    ap.add_argument("--lr", type=float, default=6e-4, help="AdamW learning rate [6e-4]")
    ap.add_argument("--weight-decay", type=float, default=0.1, help="AdamW weight decay [0.1]")
    ap.add_argument("--adamw", choices=["default", "foreach", "fused"], default="fused",
                    help="PyTorch's AdamW implementation on CPU [fused: its fastest here]")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--autocast", choices=["off", "bf16"], default="off",
                    help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16), PyTorch's "
                         "one-line mixed precision (starpu_anp --precision bf16's counterpart) [off]")
    ap.add_argument("--profile", metavar="FILE",
                    help="also run 2 more steps under torch.profiler and write its per-op CPU time table to FILE "
                         "(the timed steps are not profiled)")
    ap.add_argument("--params", action="store_true",
                    help="print 'NAME PARAMS' for every net (or --net's, with the overrides) and exit")
    a = ap.parse_args()
    if a.params and not a.net:
        for name in sorted(NETS):
            v, t, d, l, _ = NETS[name]
            print(name, gpt_params(v, t, d, l))
        return 0
    if not a.net:
        ap.error("--net is required (or --params)")
    v, t, d, l, h = NETS[a.net]
    v, t, d, l, h = (a.vocab or v, a.context or t, a.d or d, a.layers or l, a.heads or h)
    if a.params:
        print(a.net, gpt_params(v, t, d, l))
        return 0
    for k, x in (("--batch", a.batch), ("--threads", a.threads), ("--vocab", v), ("--context", t), ("--d", d),
                 ("--layers", l), ("--heads", h)):
        if x < 1:
            ap.error(f"{k} must be at least 1 (got {x})")
    if d % h:
        ap.error(f"--d {d} is not a multiple of --heads {h}")

    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(a.seed)
    model = GPT(v, t, d, l, h)
    model.train()
    params = sum(p.numel() for p in model.parameters())
    assert params == gpt_params(v, t, d, l), (params, gpt_params(v, t, d, l))
    opt = make_optimizer(model, a.lr, a.weight_decay, a.adamw)
    xs = [torch.randint(0, v, (a.batch, t)) for _ in range(4)]
    ys = [torch.randint(0, v, (a.batch, t)) for _ in range(4)]

    def step(i):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast == "bf16"):
            logits = model(xs[i % 4])
            loss = F.cross_entropy(logits.view(-1, v), ys[i % 4].view(-1))
        loss.backward()
        opt.step()
        return loss

    wall, loss, done = time_steps(step, a.steps, a.warmup, a.max_seconds, lambda x: x.item())
    if not math.isfinite(loss):
        sys.exit(f"error: the training loss is {loss}")
    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for i in range(2):
                step(i).item()
        with open(a.profile, "w") as f:
            f.write(f"# torch.profiler, 2 training steps: {a.net} vocab {v} context {t} d {d} layers {l} heads {h} "
                    f"batch {a.batch} threads {a.threads} adamw {a.adamw}, torch {torch.__version__}\n")
            f.write(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40) + "\n")
    sps = a.batch * done / wall
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB
    print(f"result: framework=pytorch torch={torch.__version__} net={a.net} vocab={v} context={t} d={d} "
          f"layers={l} heads={h} batch={a.batch} threads={a.threads} adamw={a.adamw} autocast={a.autocast} params={params} "
          f"steps={done} train_loss={loss:.6f} tokens_per_s={sps * t:.1f} images_per_s={sps:.2f} "
          f"wall_s={wall:.2f} peak_rss_mib={rss_mib:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
