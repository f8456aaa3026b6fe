#!/usr/bin/python3
# Writes tests/data/safetensors_numpy.safetensors with numpy and the standard library only: an
# independent writer for tests/unit/test_safetensors.c (which knows the values by formula).
import json, struct, sys
import numpy as np

def crc32c(data):  # bitwise CRC32C (Castagnoli, reflected 0x82F63B78)
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF

def bf16(x):  # fp32 -> bf16 bits, round to nearest even
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)

tensors = [  # data order; the JSON below lists them sorted by name instead
    ("ids", "I64", [3], np.array([-1, 0, 1 << 40], dtype="<i8")),
    ("wte", "F32", [3, 4], (np.arange(12, dtype=np.float32) * 0.25 - 1.5).astype("<f4")),
    ("scalar", "F32", [], np.array(3.5, dtype="<f4")),
    ("empty", "F32", [0], np.zeros(0, dtype="<f4")),
    ("h.0.bf16", "BF16", [5], bf16([1.0, -2.5, 3.14159265, 1e-3, 65504.0]).astype("<u2")),
    ("half", "F16", [2, 2], np.array([0.5, -0.25, 1000.0, 2.0 ** -14], dtype="<f2")),
    ("mask", "U8", [4], np.array([0, 1, 254, 255], dtype=np.uint8)),
]
header, blobs, at = {}, [], 0
for name, dt, shape, arr in tensors:
    b = arr.tobytes()
    header[name] = {"dtype": dt, "shape": shape, "data_offsets": [at, at + len(b)]}
    blobs.append(b)
    at += len(b)
header["__metadata__"] = {"format": "pt", "crc32c.wte": "%08x" % crc32c(blobs[1])}
text = json.dumps(header, sort_keys=True).encode()
text += b" " * (-len(text) % 8)
out = sys.argv[1] if len(sys.argv) > 1 else "safetensors_numpy.safetensors"
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
