#!/usr/bin/python3
# scripts/gpt2_golden.py — golden values for the reference GPT-2 (models/gpt2) from PyTorch:
# writes tests/data/gpt2_golden.bin, which tests/unit/test_gpt2_golden.c compares against.
#
# The model is rebuilt here from its definition (docs/MODEL.md), not from the C code: token +
# position embeddings, pre-LayerNorm blocks with causal attention and a GELU(tanh) MLP, final
# LayerNorm, LM head tied to wte; weights in Hugging Face's Conv1D layout (in, out). The initial
# weights come from the model's documented init rule (splitmix64 + Box-Muller, one stream per
# unit), re-implemented below. The forward, the backward and five torch.optim.AdamW steps run in
# float64, so the fixture holds the exact answer and the C test measures its own fp32 error.
#
# Run with Debian's python (needs python3-torch and numpy):  /usr/bin/python3 scripts/gpt2_golden.py
#
# Fixture layout (little-endian):
#   char[8] magic "ZGOLDEN1"; uint32 record count; then per record:
#   uint32 name length, name bytes (no NUL), uint32 dtype (0 fp32, 1 fp64, 2 int32),
#   uint32 ndim, int64 shape[ndim], then prod(shape) values.
# Records: config (int32: L, C, H, n_ctx, V, B, T, seed), tokens, targets (int32 B x T),
#   logits (fp32 B x T x V), loss (fp64 [1]), init.<name> (fp32, first 8 initial values),
#   grad.<name> (fp32, every tensor, Conv1D layout), adamw.hparams (fp64: lr, beta1, beta2, eps,
#   weight_decay), adamw.loss (fp64 [6]: the loss before each of 5 steps and after the last).
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

L, C, H, NCTX, V = 2, 64, 4, 64, 256   # the "tiny" preset
B, T = 3, 40                           # odd sizes: B != H, T < n_ctx (unused wpe rows)
SEED = 1234
LR, BETA1, BETA2, EPS, WD = 1e-3, 0.9, 0.999, 1e-8, 0.1
STEPS = 5

TEXT = (b"The quick brown fox keeps a ledger of every hill it has crossed, and at night it "
        b"counts them twice: once forward, once backward, to be sure that the sum is the same. "
        b"Gradients, it says, are only honest when somebody else has checked them.")

M64 = (1 << 64) - 1


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class Rng:
    def __init__(self, state):
        self.state = state

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & M64
        return mix64(self.state)

    def uniform(self):
        return (self.next() >> 11) * (1.0 / 9007199254740992.0)

    def normal(self):
        u1 = 1.0 - self.uniform()
        u2 = self.uniform()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * u2)


def tensor_table():
    """(name, unit, shape, decay, init) in registration order; init: 'std', 'proj', 'one', 'zero'."""
    t = [("wte.weight", 0, (V, C), True, "std"), ("wpe.weight", 0, (NCTX, C), True, "std")]
    for l in range(L):
        p = f"h.{l}."
        t += [(p + "ln_1.weight", 1 + l, (C,), False, "one"),
              (p + "ln_1.bias", 1 + l, (C,), False, "zero"),
              (p + "attn.c_attn.weight", 1 + l, (C, 3 * C), True, "std"),
              (p + "attn.c_attn.bias", 1 + l, (3 * C,), False, "zero"),
              (p + "attn.c_proj.weight", 1 + l, (C, C), True, "proj"),
              (p + "attn.c_proj.bias", 1 + l, (C,), False, "zero"),
              (p + "ln_2.weight", 1 + l, (C,), False, "one"),
              (p + "ln_2.bias", 1 + l, (C,), False, "zero"),
              (p + "mlp.c_fc.weight", 1 + l, (C, 4 * C), True, "std"),
              (p + "mlp.c_fc.bias", 1 + l, (4 * C,), False, "zero"),
              (p + "mlp.c_proj.weight", 1 + l, (4 * C, C), True, "proj"),
              (p + "mlp.c_proj.bias", 1 + l, (C,), False, "zero")]
    t += [("ln_f.weight", L + 1, (C,), False, "one"), ("ln_f.bias", L + 1, (C,), False, "zero")]
    return t


def init_params():
    std, proj = 0.02, 0.02 / math.sqrt(2.0 * L)
    rngs = {}
    out = {}
    for name, unit, shape, _, kind in tensor_table():
        if unit not in rngs:
            rngs[unit] = Rng(mix64(SEED ^ mix64(0x6770743275 + unit)))
        n = int(np.prod(shape))
        if kind in ("std", "proj"):
            s = std if kind == "std" else proj
            r = rngs[unit]
            a = np.array([np.float32(s * r.normal()) for _ in range(n)], dtype=np.float32)
        else:
            a = np.full(n, 1.0 if kind == "one" else 0.0, dtype=np.float32)
        out[name] = a.reshape(shape)
    return out


def forward(P, idx, tgt):
    hs = C // H
    x = P["wte.weight"][idx] + P["wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        p = f"h.{l}."
        h = F.layer_norm(x, (C,), P[p + "ln_1.weight"], P[p + "ln_1.bias"], 1e-5)
        qkv = h @ P[p + "attn.c_attn.weight"] + P[p + "attn.c_attn.bias"]
        q, k, v = (z.view(B, T, H, hs).transpose(1, 2) for z in qkv.split(C, dim=2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ P[p + "attn.c_proj.weight"] + P[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), P[p + "ln_2.weight"], P[p + "ln_2.bias"], 1e-5)
        h = F.gelu(h @ P[p + "mlp.c_fc.weight"] + P[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + h @ P[p + "mlp.c_proj.weight"] + P[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), P["ln_f.weight"], P["ln_f.bias"], 1e-5)
    logits = x @ P["wte.weight"].t()
    loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
    return logits, loss


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "gpt2_golden.bin")
    torch.manual_seed(0)
    data = np.frombuffer(TEXT, dtype=np.uint8).astype(np.int64)
    assert len(data) >= B * T + 1
    seqs = np.stack([data[b * T: b * T + T + 1] for b in range(B)])
    idx = torch.tensor(seqs[:, :T])
    tgt = torch.tensor(seqs[:, 1:])

    init = init_params()
    table = tensor_table()
    P = {n: torch.tensor(init[n], dtype=torch.float64, requires_grad=True) for n, *_ in table}
    logits, loss = forward(P, idx, tgt)
    loss.backward()
    records = [
        ("config", np.array([L, C, H, NCTX, V, B, T, SEED], dtype=np.int32)),
        ("tokens", seqs[:, :T].astype(np.int32)),
        ("targets", seqs[:, 1:].astype(np.int32)),
        ("logits", logits.detach().numpy().astype(np.float32)),
        ("loss", np.array([loss.item()], dtype=np.float64)),
    ]
    for n, *_ in table:
        records.append(("init." + n, init[n].reshape(-1)[:8].copy()))
    for n, *_ in table:
        records.append(("grad." + n, P[n].grad.numpy().astype(np.float32)))

    # Five AdamW steps on the same batch, from the same initial weights.
    P = {n: torch.tensor(init[n], dtype=torch.float64, requires_grad=True) for n, *_ in table}
    decay = [P[n] for n, _, _, d, _ in table if d]
    no_decay = [P[n] for n, _, _, d, _ in table if not d]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=(BETA1, BETA2), eps=EPS)
    losses = []
    for step in range(STEPS + 1):
        opt.zero_grad()
        _, l2 = forward(P, idx, tgt)
        losses.append(l2.item())
        if step == STEPS:
            break
        l2.backward()
        opt.step()
    records.append(("adamw.hparams", np.array([LR, BETA1, BETA2, EPS, WD], dtype=np.float64)))
    records.append(("adamw.loss", np.array(losses, dtype=np.float64)))

    codes = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.int32): 2}
    with open(out_path, "wb") as f:
        f.write(b"ZGOLDEN1")
        f.write(struct.pack("<I", len(records)))
        for name, a in records:
            a = np.ascontiguousarray(a)
            nb = name.encode()
            f.write(struct.pack("<I", len(nb)) + nb)
            f.write(struct.pack("<II", codes[a.dtype], a.ndim))
            f.write(struct.pack("<%dq" % a.ndim, *a.shape))
            f.write(a.astype(a.dtype.newbyteorder("<")).tobytes())
    print(f"wrote {out_path}: loss {loss.item():.9f}, adamw losses "
          + " ".join(f"{x:.6f}" for x in losses) + f", {os.path.getsize(out_path)} bytes")


if __name__ == "__main__":
    main()
