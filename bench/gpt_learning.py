#!/usr/bin/env python3
"""gpt_learning.py — the PyTorch side of the learning comparison: a GPT of graph/nets (gpt-nano by
default) trained in PyTorch fp32 with starpu-anp's recipe on a UTF-8 text file, its validation
loss and bits per byte written to a CSV at intervals.

  ~/.cache/starpu-anp/anchors-venv/bin/python bench/gpt_learning.py TEXT [--net gpt-nano] [--seed 1]
      [--batch 32] [--tokens N | --steps N] [--lr 1e-3] [--warmup-steps 100] [--weight-decay 0.1]
      [--beta1 0.9] [--beta2 0.999] [--eps 1e-8] [--clip 0] [--eval-every 100] [--val-batches 0]
      [--threads 1] [--csv FILE] [--time-limit S] [--init-checkpoint CKPT] [--step-log FILE]

The same model and recipe as `starpu_anp train` on the same file (docs/transformers.md):
  - the model: bench/gpt_reference.py's GPT built from the .net (its vocabulary, context, width,
    heads and blocks; the parameter names and order checked against it), initialised as
    starpu-anp does: embeddings normal(0, 0.02), dense weights and biases nn.Linear's default
    uniform(+-1/sqrt(fan_in)), layer norms 1 and 0;
  - the data: the file's bytes are the tokens (vocabulary 256), which must be UTF-8 (as --text);
    the last round(n/10) bytes are the validation part, the rest the training part. Training
    samples are the windows of T tokens at every position i of the training part (x = tok[i:i+T],
    y = tok[i+1:i+T+1]) in starpu-anp's order: each epoch the permutation of
    runtime/schedule.c's dnn_epoch_permutation (Fisher-Yates from splitmix64, seeded by --seed
    and the epoch), step s taking entries [s*B, (s+1)*B) of it. Validation windows do not
    overlap (stride T, from the validation part's start); --val-batches N takes the first N x B of
    them (0: all), as starpu_anp train's --val-batches;
  - AdamW (torch.optim.AdamW: decoupled decay, as codelets/optim.h), weight decay on the dense
    weights and both embeddings, none on biases and layer norms (starpu-anp's no_decay slots);
  - the rate: runtime/schedule.c's dnn_warm_lr: (step+1)/W of the peak for the W warm-up steps,
    then cosine from the peak to 0 over the remaining steps of the run (W = --warmup-steps, which
    is starpu_anp train's --warmup-steps);
  - the loss: cross-entropy averaged over the B*T tokens of the step; --clip C scales the
    gradients to global norm C when above it (0: off);
  - the budget: --tokens N is ceil(N / (B*T)) steps (--steps N directly).
--init-checkpoint CKPT starts from the weights of a starpu_anp checkpoint of the same net (e.g. one
written after a step of rate 1e-30, which leaves its initial weights as they were) instead of a draw
of its own: both sides then start from the same weights and see the same windows, so their losses
step by step show whether they train alike or only start alike. --step-log FILE writes every step's
learning rate and training loss (step, lr, train_loss).

Bits per byte = the validation loss (nats per token) / ln 2: one token is one byte.

CSV columns: step, tokens, train_loss, val_loss, val_bpb, wall_s. train_loss is the mean of the
steps' losses since the previous row; step is the number of updates done; wall_s counts training
time only (evaluation excluded). A row is written at step 0 (before training), every --eval-every
steps and at the end.
"""
import argparse
import csv
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_reference  # noqa: E402  (the GPT model and the .net reader)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = 0x9E3779B97F4A7C15
M64 = (1 << 64) - 1


def mix64(z):
    """util/dnn_rng.h's dnn_mix64 over a numpy uint64 array (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def epoch_permutation(n, seed, epoch):
    """runtime/schedule.c's dnn_epoch_permutation(perm, n, seed, epoch), the same integers."""
    s0 = (seed ^ ((0xD1B54A32D192ED03 * (epoch + 1)) & M64)) & M64
    k = np.arange(1, n, dtype=np.uint64)  # the k-th splitmix64 call sees s0 + k * GOLDEN
    with np.errstate(over="ignore"):
        draws = mix64(np.uint64(s0) + k * np.uint64(GOLDEN))
    perm = list(range(n))
    i_s = np.arange(n - 1, 0, -1, dtype=np.uint64)
    js = (draws % (i_s + np.uint64(1))).tolist()
    for i, j in zip(range(n - 1, 0, -1), js):
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def warm_lr(peak, step, total, warmup):
    """runtime/schedule.c's dnn_warm_lr with cosine decay."""
    if warmup > 0 and step < warmup:
        return peak * (step + 1) / warmup
    s, t = (step - warmup, total - warmup) if warmup > 0 else (step, total)
    return 0.5 * peak * (1.0 + math.cos(math.pi * s / t)) if t > 0 else peak


def init_like_starpu(model):
    with torch.no_grad():
        for name, p in model.named():
            node, slot = name.split(".")
            if node == "tok":
                p.normal_(0.0, 0.02)
            elif node.split("_")[-1] in ("ln1", "ln2", "lnf"):
                p.fill_(1.0 if slot == "weight" else 0.0)
            # dense: nn.Linear's own default init, as starpu-anp's


def load_checkpoint(path):
    """runtime/checkpoint.h's format (versions 1-3): {tensor name: float32 array}."""
    import struct
    import zlib
    try:
        b = open(path, "rb").read()
    except OSError as e:
        sys.exit(f"{path}: {e.strerror}")
    if b[:8] != b"ANPCKPT\0" or len(b) < 48:
        sys.exit(f"{path}: not a starpu-anp checkpoint (bad magic)")
    if zlib.crc32(b[:-4]) != struct.unpack_from("<I", b, len(b) - 4)[0]:
        sys.exit(f"{path}: CRC mismatch")
    try:
        return parse_checkpoint(b)
    except (struct.error, UnicodeDecodeError, ValueError) as e:
        sys.exit(f"{path}: a damaged checkpoint ({e})")


def parse_checkpoint(b):
    import struct
    version, _ = struct.unpack_from("<II", b, 8)
    o = 16 + 8 + 8 + 4
    (ntensors,) = struct.unpack_from("<I", b, o)
    o += 4 + 8
    (ncls,) = struct.unpack_from("<I", b, o)
    o += 4
    for _ in range(ncls):
        o += 4 + struct.unpack_from("<I", b, o)[0]
    if version >= 2:
        o += 4 + struct.unpack_from("<I", b, o)[0]
    heads = []
    for _ in range(ntensors):
        (ln,) = struct.unpack_from("<I", b, o)
        name = b[o + 4:o + 4 + ln].decode()
        (n,) = struct.unpack_from("<Q", b, o + 4 + ln)
        o += 4 + ln + 8
        heads.append((name, n))
    out = {}
    for name, n in heads:
        out[name] = np.frombuffer(b, dtype="<f4", count=n, offset=o)  # ValueError when short
        o += 4 * n
    return out


def evaluate(model, val, T, nwin, batch):
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for w0 in range(0, nwin, batch):
            starts = range(w0 * T, min(w0 + batch, nwin) * T, T)
            x = torch.stack([val[s:s + T] for s in starts])
            y = torch.stack([val[s + 1:s + T + 1] for s in starts])
            total += model(x, y).item() * x.numel()
            count += x.numel()
    model.train()
    return total / count


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("text", help="a UTF-8 text file (its bytes are the tokens)")
    ap.add_argument("--net", default="gpt-nano", help="a built-in name (graph/nets/NAME.net) or a .net path")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    budget = ap.add_mutually_exclusive_group()
    budget.add_argument("--tokens", type=int, help="training tokens (steps = ceil(N / (batch * context)))")
    budget.add_argument("--steps", type=int, help="training steps [1000]")
    ap.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    ap.add_argument("--warmup-steps", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--clip", type=float, default=0.0, help="global gradient-norm clipping (0: off)")
    ap.add_argument("--eval-every", type=int, default=100, help="steps between validation rows")
    ap.add_argument("--val-batches", type=int, default=0, help="validation batches of --batch windows (0: all)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (more: faster on an idle machine; on a loaded one OpenMP's waiting threads "
                    "made 2 threads 10x slower than 1)")
    ap.add_argument("--csv", default="gpt_learning.csv")
    ap.add_argument("--time-limit", type=float, default=0, help="stop after S seconds of training (0: off)")
    ap.add_argument("--init-checkpoint", help="start from this starpu_anp checkpoint's weights (same net)")
    ap.add_argument("--step-log", help="write every step's lr and training loss to this CSV")
    a = ap.parse_args()
    if a.batch < 1 or a.eval_every < 1 or a.threads < 1 or a.warmup_steps < 0 or a.val_batches < 0:
        ap.error("--batch, --eval-every and --threads must be >= 1, --warmup-steps and --val-batches >= 0")

    net = a.net if os.path.exists(a.net) else os.path.join(ROOT, "graph", "nets", a.net + ".net")
    if not os.path.exists(net):
        ap.error(f"--net {a.net}: no such built-in net or file")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = gpt_reference.net_model(net)
    T, V = model.wpe.shape[0], model.V
    if V < 256:
        sys.exit(f"{net}: vocabulary {V}: the byte tokenizer needs 256")
    init_like_starpu(model)
    if a.init_checkpoint:
        ck = load_checkpoint(a.init_checkpoint)
        with torch.no_grad():
            for name, p in model.named():
                if name not in ck or ck[name].size != p.numel():
                    sys.exit(f"{a.init_checkpoint}: no tensor {name} of {p.numel()} floats: not this net's checkpoint")
                p.copy_(torch.from_numpy(ck[name].copy()).view_as(p))

    try:
        raw = open(a.text, "rb").read()
    except OSError as e:
        sys.exit(f"{a.text}: {e.strerror}")
    bad = raw.find(b"\0")  # the first NUL or invalid UTF-8 byte, as starpu_anp's --text reports it
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        bad = e.start if bad < 0 else min(bad, e.start)
    if bad >= 0:
        sys.exit(f"{a.text}: not UTF-8 text: byte 0x{raw[bad]:02x} at offset {bad}"
                 + (" (NUL: a binary file?)" if raw[bad] == 0 else ""))
    tok = torch.tensor(np.frombuffer(raw, dtype=np.uint8).astype(np.int64))
    nval = (len(tok) + 5) // 10
    train, val = tok[: len(tok) - nval], tok[len(tok) - nval:]
    nwin_train = len(train) - T  # stride 1: (n - T - 1) / 1 + 1
    nwin_val = (len(val) - T - 1) // T + 1 if len(val) > T else 0
    if nwin_train < a.batch or nwin_val < 1:
        sys.exit(f"{a.text}: {len(tok)} bytes: too short for a batch of {a.batch} windows of {T + 1} bytes and "
                 "one validation window in its last tenth")
    if a.val_batches:
        nwin_val = min(nwin_val, a.val_batches * a.batch)
    steps_per_epoch = nwin_train // a.batch
    steps = a.steps if a.steps else math.ceil(a.tokens / (a.batch * T)) if a.tokens else 1000

    decay = [p for n, p in model.named() if n.split(".")[0] == "tok" or (n.endswith(".weight") and p.dim() == 2)]
    no_decay = [p for n, p in model.named() if not any(p is q for q in decay)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"gpt_learning: {os.path.basename(net)} {nparams} parameters, {len(train)} training / {len(val)} validation "
          f"bytes, {steps} steps of {a.batch}x{T} tokens ({steps_per_epoch} per epoch), {nwin_val} validation windows, "
          f"torch {torch.__version__} {a.threads} threads", file=sys.stderr)

    out = open(a.csv, "w", newline="")
    w = csv.writer(out)
    w.writerow(["step", "tokens", "train_loss", "val_loss", "val_bpb", "wall_s"])

    def row(step, train_loss, wall):
        vl = evaluate(model, val, T, nwin_val, a.batch)
        w.writerow([step, step * a.batch * T, f"{train_loss:.6f}" if train_loss == train_loss else "",
                    f"{vl:.6f}", f"{vl / math.log(2):.6f}", f"{wall:.3f}"])
        out.flush()
        print(f"step {step:6d}  train {train_loss:.4f}  val {vl:.4f}  bpb {vl / math.log(2):.4f}  {wall:.1f} s",
              file=sys.stderr)

    row(0, float("nan"), 0.0)
    slog = open(a.step_log, "w") if a.step_log else None
    if slog:
        slog.write("step,lr,train_loss\n")
    wall, acc, nacc, perm, epoch = 0.0, 0.0, 0, None, -1
    step = 0
    while step < steps:
        if step // steps_per_epoch != epoch:
            epoch = step // steps_per_epoch
            perm = epoch_permutation(nwin_train, a.seed, epoch)
        t0 = time.perf_counter()
        s = step - epoch * steps_per_epoch
        starts = perm[s * a.batch:(s + 1) * a.batch]
        x = torch.stack([train[i:i + T] for i in starts])
        y = torch.stack([train[i + 1:i + T + 1] for i in starts])
        for g in opt.param_groups:
            g["lr"] = warm_lr(a.lr, step, steps, a.warmup_steps)
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        wall += time.perf_counter() - t0
        acc, nacc, step = acc + loss.item(), nacc + 1, step + 1
        if slog:
            slog.write(f"{step},{opt.param_groups[0]['lr']:.9g},{loss.item():.6f}\n")
        stop = a.time_limit > 0 and wall >= a.time_limit
        if step % a.eval_every == 0 or step == steps or stop:
            row(step, acc / nacc, wall)
            acc, nacc = 0.0, 0
        if stop:
            print(f"gpt_learning: --time-limit {a.time_limit:g} s reached at step {step} of {steps}", file=sys.stderr)
            break
    out.close()
    if slog:
        slog.close()


if __name__ == "__main__":
    main()
