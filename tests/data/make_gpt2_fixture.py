#!/usr/bin/python3
# Writes tests/data/gpt2_numpy.safetensors with numpy and the standard library only: a small
# GPT-2 (2 layers, width 32, 2 heads, 32 positions, 256 tokens) laid out as a Hugging Face
# checkpoint of GPT2LMHeadModel would be: "transformer."-prefixed names, Conv1D (in, out)
# weights, the attn.bias / attn.masked_bias buffers, a tied lm_head.weight, metadata
# {"format": "pt"} only (so n_head must come from --heads), and mixed dtypes (F32, F16, BF16).
# tests/cli/test_export.sh loads it with --init-from and checks the loss and the greedy text
# against tests/data/gpt2_ref.py.
import json, struct, sys
import numpy as np

L, C, NCTX, V = 2, 32, 32, 256
rng = np.random.default_rng(20241129)


def bf16(x):  # fp32 -> bf16 bits, round to nearest even
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")


def normal(shape, std):
    return rng.normal(0.0, std, size=shape).astype(np.float32)


tensors = []  # (name, dtype, shape, bytes) in data order


def add(name, dtype, arr):
    arr = np.asarray(arr)
    if dtype == "F32":
        b = arr.astype("<f4").tobytes()
    elif dtype == "F16":
        b = arr.astype("<f2").tobytes()
    elif dtype == "BF16":
        b = bf16(arr).tobytes()
    elif dtype == "U8":
        b = arr.astype(np.uint8).tobytes()
    tensors.append(("transformer." + name if not name.startswith("lm_head") else name, dtype, list(arr.shape), b))


wte = normal((V, C), 0.3)
add("wte.weight", "F32", wte)
add("wpe.weight", "F16", normal((NCTX, C), 0.1))
for l in range(L):
    dt = "BF16" if l == 0 else "F32"
    p = "h.%d." % l
    add(p + "ln_1.weight", dt, 1 + normal((C,), 0.1))
    add(p + "ln_1.bias", dt, normal((C,), 0.05))
    add(p + "attn.bias", "U8", np.tril(np.ones((NCTX, NCTX))).reshape(1, 1, NCTX, NCTX))
    add(p + "attn.masked_bias", "F32", np.array(-1e4))
    add(p + "attn.c_attn.weight", dt, normal((C, 3 * C), 0.2))
    add(p + "attn.c_attn.bias", dt, normal((3 * C,), 0.05))
    add(p + "attn.c_proj.weight", dt, normal((C, C), 0.2))
    add(p + "attn.c_proj.bias", dt, normal((C,), 0.05))
    add(p + "ln_2.weight", dt, 1 + normal((C,), 0.1))
    add(p + "ln_2.bias", dt, normal((C,), 0.05))
    add(p + "mlp.c_fc.weight", dt, normal((C, 4 * C), 0.2))
    add(p + "mlp.c_fc.bias", dt, normal((4 * C,), 0.05))
    add(p + "mlp.c_proj.weight", dt, normal((4 * C, C), 0.1))
    add(p + "mlp.c_proj.bias", dt, normal((C,), 0.05))
add("ln_f.weight", "F16", 1 + normal((C,), 0.1))
add("ln_f.bias", "F16", normal((C,), 0.05))
add("lm_head.weight", "F32", wte)

header, at = {"__metadata__": {"format": "pt"}}, 0
for name, dt, shape, b in tensors:
    header[name] = {"dtype": dt, "shape": shape, "data_offsets": [at, at + len(b)]}
    at += len(b)
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
out = sys.argv[1] if len(sys.argv) > 1 else "gpt2_numpy.safetensors"
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(b for _, _, _, b in tensors))
