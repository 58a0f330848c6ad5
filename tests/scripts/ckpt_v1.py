#!/usr/bin/env python3
"""ckpt_v1.py IN.ckpt OUT.ckpt [VERSION] — rewrite a checkpoint of version 2 or 3 as the file an
older starpu_anp wrote (runtime/checkpoint.h): VERSION 1 (the default) is the same header without
the net text, VERSION 2 keeps it; both store the structure hash as their fingerprint (what those
versions stored: graph.h dnn_graph_structure_hash), which a version-3 input does not hold, so it
is read with $DNN_BUILD_DIR/tests/netvariants fp-v1. CRC recomputed. Tests use it to check that
old checkpoints still load. Exit 2 on a file that is not such a checkpoint."""
import os, struct, subprocess, sys, zlib

src, dst = sys.argv[1], sys.argv[2]
want = int(sys.argv[3]) if len(sys.argv) > 3 else 1
if want not in (1, 2):
    sys.exit(f"version {want}: want 1 or 2")
b = open(src, "rb").read()
if b[:8] != b"ANPCKPT\0":
    sys.exit(f"{src}: not a checkpoint")
ver, hlen = struct.unpack_from("<II", b, 8)
if ver not in (2, 3):
    sys.exit(f"{src}: version {ver}, want 2 or 3")
h = b[16:16 + hlen]
if ver == 3:
    tool = os.path.join(os.environ.get("DNN_BUILD_DIR", "build"), "tests", "netvariants")
    fp = int(subprocess.run([tool, "fp-v1", src], check=True, capture_output=True, text=True).stdout, 16)
    h = struct.pack("<Q", fp) + h[8:]
o = 36
(ncls,) = struct.unpack_from("<I", h, 32)
for _ in range(ncls):
    (ln,) = struct.unpack_from("<I", h, o)
    o += 4 + ln
(nl,) = struct.unpack_from("<I", h, o)
h1 = h[:o] + h[o + 4 + nl:] if want == 1 else h
body = b"ANPCKPT\0" + struct.pack("<II", want, len(h1)) + h1 + b[16 + hlen:-4]
open(dst, "wb").write(body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF))
