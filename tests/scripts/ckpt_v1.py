#!/usr/bin/env python3
"""ckpt_v1.py IN.ckpt OUT.ckpt — rewrite a version-2 checkpoint as the version-1 file an older
starpu_anp wrote (runtime/checkpoint.h): the same header without the net text, version 1, CRC
recomputed. Tests use it to check that old checkpoints still load (with --net). Exit 2 on a file
that is not a version-2 checkpoint."""
import struct, sys, zlib

src, dst = sys.argv[1], sys.argv[2]
b = open(src, "rb").read()
if b[:8] != b"ANPCKPT\0":
    sys.exit(f"{src}: not a checkpoint")
ver, hlen = struct.unpack_from("<II", b, 8)
if ver != 2:
    sys.exit(f"{src}: version {ver}, want 2")
h = b[16:16 + hlen]
o = 36
(ncls,) = struct.unpack_from("<I", h, 32)
for _ in range(ncls):
    (ln,) = struct.unpack_from("<I", h, o)
    o += 4 + ln
(nl,) = struct.unpack_from("<I", h, o)
h1 = h[:o] + h[o + 4 + nl:]
body = b"ANPCKPT\0" + struct.pack("<II", 1, len(h1)) + h1 + b[16 + hlen:-4]
open(dst, "wb").write(body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF))
