#!/usr/bin/env python3
"""onnx_check.py — helpers of tests/scripts/onnx_export.sh (run with the test venv's Python:
numpy, onnx, onnxruntime).

  onnx_check.py images DIR C SIZE N SEED
      writes N random PNG images of SIZE x SIZE pixels (C = 1: grey, 3: RGB) as DIR/imgK.png,
      each with its pixels in DIR/imgK.npy (H, W, C uint8). SIZE is the short side that
      starpu_anp resizes to (8/7 of the net's input, load_images.h), so its resize is 1:1 and the
      image the net sees is the centre crop: exactly reproducible here.
  onnx_check.py compare MODEL.onnx PREDICT_OUTPUT TOL
      checks MODEL with onnx.checker, runs it with onnxruntime on the centre crops of the images
      that PREDICT_OUTPUT (starpu_anp predict's stdout) names, and compares: the same top-1 class
      and every printed probability within TOL (absolute; predict prints 4 decimals). Also checks
      the metadata (class names, normalisation) and that the probabilities sum to 1.
  onnx_check.py tokens MODEL.onnx TEXT LOGITS.npy TOL
      a byte-level language model: runs MODEL on the validation windows of TEXT (its last
      round(n/10) bytes, windows of T at stride T: docs/transformers.md, "Data") and compares
      its probabilities (N x T x V) with the softmax, in float64, of LOGITS.npy (`starpu_anp eval
      --dump-logits`, N x T x V, one row per window): every probability within TOL (absolute),
      and every log-probability within TOL too, i.e. the logits the same within TOL up to each
      position's constant, which the softmax drops (an absolute bound alone says little about the
      many small probabilities of a 256-token vocabulary).
Exit 0 when every check holds; 1 with one line per failure otherwise."""
import json, struct, sys, zlib

import numpy as np


def png(path, px):
    h, w, c = px.shape
    raw = b"".join(b"\0" + px[y].tobytes() for y in range(h))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0 if c == 1 else 2, 0, 0, 0)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9))
                           + chunk(b"IEND", b""))


def images(d, c, size, n, seed):
    rng = np.random.RandomState(seed)
    for k in range(n):
        # smooth structure plus noise: varied, non-degenerate activations
        yy, xx = np.mgrid[0:size, 0:size]
        base = np.stack([128 + 100 * np.sin((xx * (k + 1) + yy * (ch + 2)) / 7.0) for ch in range(c)], -1)
        px = np.clip(base + rng.randint(-40, 41, (size, size, c)), 0, 255).astype(np.uint8)
        png(f"{d}/img{k}.png", px)
        np.save(f"{d}/img{k}.npy", px)


def compare(model_path, pred_path, tol):
    import onnx
    import onnxruntime as ort

    fails = []
    model = onnx.load(model_path)
    onnx.checker.check_model(model, full_check=True)
    meta = {p.key: p.value for p in model.metadata_props}
    names = json.loads(meta["class_names"])
    opset = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"{model_path}: opset {opset}, {len(model.graph.node)} nodes, ops {' '.join(ops)}, {len(names)} classes")
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    _, C, H, W = inp.shape
    if inp.name != "pixels" or sess.get_outputs()[0].name != "probabilities":
        fails.append(f"input/output names {inp.name}/{sess.get_outputs()[0].name}")
    if int(meta["short_side"]) < max(H, W) or len(meta["input_mean"].split(",")) != C:
        fails.append(f"metadata: short_side {meta['short_side']}, input_mean {meta['input_mean']}")
    rows = []
    for line in open(pred_path):
        if line.startswith("result:") or ":" not in line:
            continue
        path, rest = line.rsplit(":", 1)
        rows.append((path, [(kv.split("=")[0], float(kv.split("=")[1])) for kv in rest.split()]))
    if not rows:
        fails.append("no predictions in " + pred_path)
    batch = []
    for path, _ in rows:
        px = np.load(path[:-4] + ".npy").astype(np.float32)  # (S, S, C)
        s = px.shape[0]
        oy, ox = (s - H) // 2, (s - W) // 2
        batch.append(px[oy:oy + H, ox:ox + W, :].transpose(2, 0, 1))
    probs = sess.run(None, {"pixels": np.stack(batch)})[0]
    worst = 0.0
    for (path, top), p in zip(rows, probs):
        if abs(float(p.sum()) - 1) > 1e-5:
            fails.append(f"{path}: probabilities sum to {p.sum()}")
        best = int(np.argmax(p))
        if top[0][0] != names[best]:
            order = np.argsort(-p)
            fails.append(f"{path}: top-1 is {top[0][0]} in predict, {names[best]} in onnxruntime "
                         f"(p {p[order[0]]:.6f} vs {p[order[1]]:.6f})")
        for cls, pv in top:
            d = abs(pv - float(p[names.index(cls)]))
            worst = max(worst, d)
            if d > tol:
                fails.append(f"{path}: p({cls}) {pv} in predict, {p[names.index(cls)]:.6f} in onnxruntime")
    # A saturated net (every top probability 1.0000 as printed) would make the comparison empty.
    if len(rows) and float(np.max(probs, axis=1).min()) > 0.999:
        fails.append("every image has a top probability over 0.999: the comparison says little (train less hard)")
    print(f"compared {len(rows)} images x {len(rows[0][1]) if rows else 0} classes: "
          f"max |p_predict - p_onnx| = {worst:.2e} (tolerance {tol}, predict prints 4 decimals)")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


def tokens(model_path, text_path, logits_path, tol):
    import onnx
    import onnxruntime as ort

    fails = []
    model = onnx.load(model_path)
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    inp, out = sess.get_inputs()[0], sess.get_outputs()[0]
    T = inp.shape[1]
    if out.name != "probabilities" or len(inp.shape) != 2:
        fails.append(f"output {out.name}, input shape {inp.shape}: want probabilities from N x T token ids")
    logits = np.load(logits_path).astype(np.float64)
    n, t, V = logits.shape
    b = np.frombuffer(open(text_path, "rb").read(), dtype=np.uint8)
    val = b[len(b) - (len(b) + 5) // 10:]  # round(n/10), halves up (runtime/tokens.c)
    want = (len(val) - T - 1) // T + 1
    if t != T or n != want:
        fails.append(f"{logits_path}: {n} windows x {t}, want {want} x {T}")
        n = min(n, want)
    ids = np.stack([val[i * T:i * T + T] for i in range(n)]).astype(np.float32)
    probs = sess.run(None, {inp.name: ids})[0].astype(np.float64)
    z = logits[:n] - logits[:n].max(axis=2, keepdims=True)
    ref = np.exp(z) / np.exp(z).sum(axis=2, keepdims=True)
    d = np.abs(probs - ref)
    worst = float(d.max())
    if worst > tol:
        w = np.unravel_index(int(np.argmax(d)), d.shape)
        fails.append(f"window {w[0]} position {w[1]} token {w[2]}: p {ref[w]:.7f} by starpu_anp, {probs[w]:.7f} "
                     f"by onnxruntime")
    logref = z - np.log(np.exp(z).sum(axis=2, keepdims=True))
    dl = np.abs(np.log(np.maximum(probs, 1e-300)) - logref)
    lworst = float(dl.max())
    if lworst > tol:
        w = np.unravel_index(int(np.argmax(dl)), dl.shape)
        fails.append(f"window {w[0]} position {w[1]} token {w[2]}: log p {logref[w]:.7f} by starpu_anp, "
                     f"{np.log(probs[w]):.7f} by onnxruntime")
    if float(np.abs(probs.sum(axis=2) - 1).max()) > 1e-5:
        fails.append("onnxruntime's probabilities do not sum to 1")
    if float(ref.max(axis=2).min()) > 0.999:
        fails.append("every position has a top probability over 0.999: the comparison says little")
    print(f"{model_path}: {len(model.graph.node)} nodes, ops {' '.join(sorted({x.op_type for x in model.graph.node}))}; "
          f"compared {n} windows x {T} positions x {V} tokens: max |p_starpu_anp - p_onnx| = {worst:.2e}, "
          f"max |log p_starpu_anp - log p_onnx| = {lworst:.2e} (tolerance {tol}); top p: median "
          f"{float(np.median(ref.max(axis=2))):.3f}, largest {ref.max():.3f}; smallest p {ref.min():.1e}")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    if sys.argv[1] == "images":
        images(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    elif sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3], float(sys.argv[4])))
    elif sys.argv[1] == "tokens":
        sys.exit(tokens(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])))
    else:
        sys.exit("usage: onnx_check.py images DIR C SIZE N SEED | compare MODEL PREDICT_OUTPUT TOL | "
                 "tokens MODEL TEXT LOGITS.npy TOL")
