#!/usr/bin/python3
# An independent GPT-2 reference for the CLI tests, in numpy (float64) and the standard library:
# a safetensors reader, the forward pass as published (docs/MODEL.md), the validation loss of
# `zero train` (data rule of models/gpt2/data.h) and greedy generation.
#   gpt2_ref.py valloss FILE DATA T G HEADS     -> mean cross-entropy of validation batch 0
#   gpt2_ref.py greedy FILE HEADS N ID ID ...   -> {"tokens": [...], "min_gap": g} (JSON)
#   gpt2_ref.py ranks FILE HEADS NPROMPT ID ... -> [r, ...]: each token after the first NPROMPT,
#                                                 its rank among the logits (0: the argmax)
import json, struct, sys
import numpy as np

HF_PREFIX = "transformer."


def read_safetensors(path):
    """{name: float64 array} for F32/F16/BF16 (U8/BOOL/I64 as they are), and the metadata."""
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        lo, hi = t["data_offsets"]
        raw = b[8 + n + lo:8 + n + hi]
        dt = t["dtype"]
        if dt == "F32":
            a = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif dt == "F16":
            a = np.frombuffer(raw, dtype="<f2").astype(np.float64)
        elif dt == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        elif dt in ("U8", "BOOL"):
            a = np.frombuffer(raw, dtype=np.uint8)
        elif dt == "I64":
            a = np.frombuffer(raw, dtype="<i8")
        else:
            raise ValueError("%s: dtype %s" % (name, dt))
        out[name] = a.reshape(t["shape"])
    return out, meta


def model(path, heads):
    w, meta = read_safetensors(path)
    w = {k[len(HF_PREFIX):] if k.startswith(HF_PREFIX) else k: v for k, v in w.items()}
    L = 1 + max(int(k.split(".")[1]) for k in w if k.startswith("h."))
    return w, L, heads


def layer_norm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * g + b


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def logits(m, tokens):
    """Logits (T, V) of a sequence of T token ids."""
    w, L, H = m
    T = len(tokens)
    x = w["wte.weight"][tokens] + w["wpe.weight"][:T]
    C = x.shape[1]
    hd = C // H
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    for l in range(L):
        p = lambda n: w["h.%d.%s" % (l, n)]
        h = layer_norm(x, p("ln_1.weight"), p("ln_1.bias"))
        qkv = h @ p("attn.c_attn.weight") + p("attn.c_attn.bias")
        q, k, v = (qkv[:, i * C:(i + 1) * C].reshape(T, H, hd).transpose(1, 0, 2) for i in range(3))
        att = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
        att[:, mask] = -np.inf
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(1, 0, 2).reshape(T, C)
        x = x + y @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        h = layer_norm(x, p("ln_2.weight"), p("ln_2.bias"))
        x = x + gelu(h @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias")) @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
    x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"])
    return x @ w["wte.weight"].T


def cross_entropy(lg, targets):
    mx = lg.max(-1, keepdims=True)
    lse = mx[:, 0] + np.log(np.exp(lg - mx).sum(-1))
    return lse - lg[np.arange(len(targets)), targets]


def val_loss(m, data, T, G):
    """Validation batch 0 of G sequences: window j of the last floor(0.05 n) bytes (data.h)."""
    n_val = int(0.05 * len(data))
    val = np.frombuffer(data[len(data) - n_val:], dtype=np.uint8).astype(np.int64)
    W = (n_val - 1) // T
    losses = []
    for j in range(G):
        s = val[(j % W) * T:(j % W) * T + T + 1]
        losses.append(cross_entropy(logits(m, s[:T]), s[1:]))
    return float(np.mean(losses))


def greedy(m, prompt, n):
    """n tokens, each the argmax after the last n_ctx tokens; also the smallest top-2 gap seen."""
    n_ctx = m[0]["wpe.weight"].shape[0]
    hist, gaps = list(prompt), []
    for _ in range(n):
        lg = logits(m, hist[-n_ctx:])[-1]
        top = np.sort(lg)[-2:]
        gaps.append(top[1] - top[0])
        hist.append(int(np.argmax(lg)))
    return hist[len(prompt):], float(min(gaps)) if gaps else 0.0


def ranks(m, ids, n_prompt):
    n_ctx = m[0]["wpe.weight"].shape[0]
    out = []
    for i in range(n_prompt, len(ids)):
        lg = logits(m, ids[max(0, i - n_ctx):i])[-1]
        out.append(int((lg > lg[ids[i]]).sum()))
    return out


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "valloss":
        path, data, T, G, heads = sys.argv[2], open(sys.argv[3], "rb").read(), *map(int, sys.argv[4:7])
        print("%.10f" % val_loss(model(path, heads), data, T, G))
    elif cmd == "greedy":
        path, heads, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        toks, gap = greedy(model(path, heads), [int(t) for t in sys.argv[5:]], n)
        print(json.dumps({"tokens": toks, "min_gap": gap}))
    elif cmd == "ranks":
        path, heads, n_prompt = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        print(json.dumps(ranks(model(path, heads), [int(t) for t in sys.argv[5:]], n_prompt)))
    else:
        sys.exit("usage: gpt2_ref.py valloss|greedy ...")
