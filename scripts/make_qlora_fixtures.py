#!/usr/bin/env python3
# scripts/make_qlora_fixtures.py — the expected training losses of QLoRA (LoRA adapters over a frozen base
# whose linear weights are quantized) from PEFT + PyTorch, the base's weights coded and decoded by
# bitsandbytes in zero's formats (docs/QUANT.md), committed under tests/data/lora/ so that CI checks zero's
# LoRA over a quantized base without torch or bitsandbytes.
#
# Needs PyPI torch, transformers (5.x), peft, safetensors and bitsandbytes (run on the CPU). Run from the
# repository root, after scripts/make_lora_fixtures.py (whose adapter it reuses, unchanged):
#     python3 scripts/make_qlora_fixtures.py            # writes tests/data/lora/llama_gqa4_{nf4,int8,nf4_emb}.golden.safetensors
#     python3 scripts/make_qlora_fixtures.py nf4        # one format only
#
# The base is tests/data/decoder/llama_gqa4/ and the adapter tests/data/lora/llama_gqa4/ (made by
# scripts/make_lora_fixtures.py; read here, never written). Each layer's linear weights are replaced by
# their quantized-then-dequantized values, quantized as zero stores them: each Hugging Face tensor
# (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj) quantized on its own, as bitsandbytes'
# Linear4bit/Linear8bit layers do per nn.Linear, never fused with another; each coded in blocks of 64 over
# its own row-major values, from its fp32 values; the decoded fp32 values then cast to the run's dtype.
# Embeddings, lm_head and the norms stay as loaded. Formats:
#   nf4   NF4, blocks of 64, double quantization: bitsandbytes' quantize_4bit(w, blocksize=64,
#         quant_type="nf4", compress_statistics=True) (offset = mean of that tensor's own absmax), the
#         absmax' second level (signed dynamic map, blocks of 256 over that tensor's own absmax) coded by
#         the reference rule as zero and bitsandbytes' GPUs do (scripts/make_quant_fixtures.py), then
#         dequantize_4bit
#   int8  the linear map (create_linear_map(signed=True)), blocks of 64: quantize_blockwise by the
#         reference rule, then dequantize_blockwise
#   nf4_emb  nf4, and the token embeddings and lm_head coded the same way too (zero train
#         --quantize-embeddings; metadata format "nf4", embeddings "1")
# tests/data/lora/llama_gqa4_FORMAT.golden.safetensors:
#   tokens  I32 (12, 8)    the decoder fixture's golden batch (tests/data/decoder/llama_gqa4.golden.safetensors)
#   targets I32 (12, 8)    its targets, -1 where ignored
#   adamw   F64 (6)        the loss before each of 5 full-batch AdamW steps over the adapters only (the
#                          quantized base frozen), and after the last, in float64 (the dequantized fp32
#                          weights are exact in it); the script prints the fp32 trajectory's drift from it
#   adamw20 F64 (21)       the losses of 20 such steps at lr LR20 (3e-4), in float64. Not at 1e-2: that trajectory
#                          is chaotic past step 8 (PyTorch's own fp32 run leaves the float64 one by 8% at step
#                          20; at 1e-3 int8's by 0.1%), so no fp32 implementation can be held to it; at 3e-4
#                          PyTorch's fp32 run stays within 1e-6 of it for 20 steps in every format
#   adamw20_f32 F64 (21)   the same 20 steps computed in float32 by PyTorch (the test checks it stays within
#                          1e-5 of adamw20: the fixture's regime is not chaotic)
#   grad_norm F64 (1)      the global L2 norm of the adapters' gradient at step 0
# metadata: base, adapter, format, blocksize, double_quant, lr, beta1, beta2, eps, weight_decay, versions.
import os
import sys

import bitsandbytes as bnb
import bitsandbytes.functional as bf
import peft
import torch
import transformers
from safetensors.torch import load_file, save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DEC = os.path.join(ROOT, "tests", "data", "decoder")
OUT = os.path.join(ROOT, "tests", "data", "lora")
BASE, ADAPTER = "llama_gqa4", "llama_gqa4"
LR, BETAS, EPS, WD = 1e-2, (0.9, 0.999), 1e-8, 0.1  # as scripts/make_lora_fixtures.py
BLOCK = 64
FORMATS = ["nf4", "int8", "nf4_emb"]
LR20 = 3e-4


def blockwise_reference(x, code, blocksize):
    """bitsandbytes' 8-bit blockwise coding by its reference rule (its PyTorch kernel, torch.bucketize over the
    map's midpoints), not the CPU extension's approximate search; returns (codes, absmax, how many codes the
    CPU extension would have picked otherwise)."""
    op = torch.ops.bitsandbytes.quantize_blockwise.default
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)
    q, absmax = op.redispatch(keys, x, code, blocksize)
    q_ext, _ = op(x, code, blocksize)
    return q, absmax, int((q != q_ext).sum())


def roundtrip(w, fmt):
    """w (fp32, any shape) coded in fmt as one tensor and decoded: fp32, w's shape; and the count of codes where
    the CPU extension's search differs from the reference rule."""
    x = w.float().contiguous().reshape(-1)
    assert x.numel() % BLOCK == 0
    if fmt == "nf4":
        q, st = bf.quantize_4bit(x, blocksize=BLOCK, quant_type="nf4", compress_statistics=False)
        q2, st2 = bf.quantize_4bit(x, blocksize=BLOCK, quant_type="nf4", compress_statistics=True)
        if not torch.equal(q2, q) or not torch.equal(st2.offset, st.absmax.mean()):
            sys.exit("nf4: codes or offset differ with double quantization")
        qa, a2, off = blockwise_reference(st.absmax - st2.offset, bf.create_dynamic_map(signed=True).float(), 256)
        st2.absmax, st2.state2.absmax = qa, a2
        d = bf.dequantize_4bit(q2, st2)
    elif fmt == "int8":
        code = bf.create_linear_map(signed=True).float()
        idx, absmax, off = blockwise_reference(x, code, BLOCK)
        d = bf.dequantize_blockwise(idx, absmax=absmax, code=code, blocksize=BLOCK)
    else:
        raise ValueError(fmt)
    return d.float().reshape(w.shape), off


def quantized_base(fmt):
    """{HF weight name: decoded fp32 tensor} for every linear weight of the base's layers (nf4_emb: and the
    embeddings and lm_head), each coded on its own."""
    sd = load_file(os.path.join(DEC, BASE, "model.safetensors"))
    cfg = transformers.AutoConfig.from_pretrained(os.path.join(DEC, BASE))
    nl = cfg.num_hidden_layers
    names = []
    if fmt == "nf4_emb":
        assert not cfg.tie_word_embeddings
        names += ["model.embed_tokens.weight", "lm_head.weight"]
        fmt = "nf4"
    for i in range(nl):
        p = "model.layers.%d." % i
        names += [p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight",
                  p + "self_attn.o_proj.weight", p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight",
                  p + "mlp.down_proj.weight"]
    out, err, off, n = {}, 0.0, 0, 0
    for k in names:
        w = sd[k].float()
        d, o = roundtrip(w, fmt)
        err = max(err, (d - w).abs().max().item())
        off += o
        n += w.numel()
        out[k] = d.contiguous()
    return out, err, off, n


def golden_batch():
    g = load_file(os.path.join(DEC, BASE + ".golden.safetensors"))
    tokens = g["tokens"].long()
    labels = g["targets"].long().masked_fill(g["targets"] == -1, -100)
    return g["tokens"], g["targets"], tokens, labels


def mean_loss(model, tokens, labels):
    logits = model(input_ids=tokens).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def load(weights, dtype):
    model = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(DEC, BASE), dtype=dtype,
                                                              attn_implementation="eager")
    params = dict(model.named_parameters())
    with torch.no_grad():
        for k, w in weights.items():
            assert params[k].shape == w.shape
            params[k].copy_(w.to(dtype))
    model = peft.PeftModel.from_pretrained(model, os.path.join(OUT, ADAPTER), is_trainable=True)
    model.to(dtype)
    model.train()  # no dropout anywhere (lora_dropout 0)
    # the quantized weights reached PEFT's frozen base layers
    k = "model.layers.0.self_attn.k_proj.weight"
    got = dict(model.named_parameters())["base_model.model." + k.replace(".weight", ".base_layer.weight")]
    assert torch.equal(got, weights[k].to(dtype)) and not got.requires_grad
    return model


def adamw_run(weights, dtype, tokens, labels, steps=5, lr=LR):
    model = load(weights, dtype)
    params = [p for p in model.parameters() if p.requires_grad]
    assert params and all(p.dim() == 2 and "lora_" in n for n, p in model.named_parameters() if p.requires_grad)
    opt = torch.optim.AdamW(params, lr=lr, betas=BETAS, eps=EPS, weight_decay=WD, foreach=False)
    losses, norm = [], None
    for step in range(steps + 1):
        opt.zero_grad()
        loss = mean_loss(model, tokens, labels)
        losses.append(loss.item())
        if step < steps:
            loss.backward()
            if step == 0:
                norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params)).item()
            opt.step()
    return losses, norm


def main():
    only = sys.argv[1:]
    for f in only:
        if f not in FORMATS:
            sys.exit("unknown format %s (have %s)" % (f, ", ".join(FORMATS)))
    tok32, tgt32, tokens, labels = golden_batch()
    ref = load_file(os.path.join(OUT, ADAPTER + ".golden.safetensors"))
    assert torch.equal(ref["tokens"], tok32) and torch.equal(ref["targets"], tgt32)
    unq = ref["adamw"].tolist()
    print("unquantized (%s.golden): adamw %s" % (ADAPTER, " ".join("%.6f" % x for x in unq)))
    for fmt in FORMATS:
        if only and fmt not in only:
            continue
        weights, err, off, n = quantized_base(fmt)
        losses, norm = adamw_run(weights, torch.float64, tokens, labels)
        f32, _ = adamw_run(weights, torch.float32, tokens, labels)
        drift = max(abs(a - b) / b for a, b in zip(f32, losses))
        l20, _ = adamw_run(weights, torch.float64, tokens, labels, 20, LR20)
        f20, _ = adamw_run(weights, torch.float32, tokens, labels, 20, LR20)
        drift20 = max(abs(a - b) / b for a, b in zip(f20, l20))
        delta = [a - b for a, b in zip(losses, unq)]
        if max(abs(d) for d in delta) <= 1e-6:
            sys.exit("%s: the losses equal the unquantized ones: the quantization did nothing" % fmt)
        g = {"tokens": tok32.contiguous(), "targets": tgt32.contiguous(),
             "adamw": torch.tensor(losses, dtype=torch.float64), "adamw20": torch.tensor(l20, dtype=torch.float64),
             "adamw20_f32": torch.tensor(f20, dtype=torch.float64), "grad_norm": torch.tensor([norm], dtype=torch.float64)}
        meta = {"base": BASE, "adapter": ADAPTER, "format": "nf4" if fmt == "nf4_emb" else fmt, "blocksize": str(BLOCK),
                "embeddings": "1" if fmt == "nf4_emb" else "0",
                "double_quant": "1" if fmt != "int8" else "0", "lr": repr(LR), "lr20": repr(LR20), "beta1": repr(BETAS[0]),
                "beta2": repr(BETAS[1]), "eps": repr(EPS), "weight_decay": repr(WD), "peft": peft.__version__,
                "transformers": transformers.__version__, "torch": torch.__version__,
                "bitsandbytes": bnb.__version__, "made_by": "scripts/make_qlora_fixtures.py"}
        path = os.path.join(OUT, "%s_%s.golden.safetensors" % (ADAPTER, fmt))
        save_file(g, path, metadata=meta)
        print("%-5s max |deq - w| %.3e over %d weights (%d codes where the CPU extension's search differs)" % (
            fmt, err, n, off))
        print("      adamw %s, grad_norm %.6f (fp32 drift %.1e%s)" % (
            " ".join("%.6f" % x for x in losses), norm, drift, "" if drift <= 2e-5 else ", over 2e-5"))
        print("      20 steps at lr %g: %.6f -> %.6f (fp32 drift up to %.1e)" % (LR20, l20[0], l20[-1], drift20))
        print("      - unquantized %s" % " ".join("%+.2e" % d for d in delta))
        print("      wrote %s (%d bytes)" % (os.path.relpath(path, ROOT), os.path.getsize(path)))


if __name__ == "__main__":
    main()
