#!/usr/bin/env python3
# scripts/make_lora_fixtures.py — PEFT LoRA adapters on the decoder fixtures (tests/data/decoder/, made by
# scripts/make_decoder_fixtures.py) and their expected training losses from PEFT + PyTorch, committed under
# tests/data/lora/ so that CI checks zero's LoRA against PEFT without torch.
#
# Needs PyPI torch, transformers (5.x), peft and safetensors. Run from the repository root:
#     python3 scripts/make_lora_fixtures.py               # writes tests/data/lora/
#
# Each fixture NAME is an adapter directory tests/data/lora/NAME/ exactly as PeftModel.save_pretrained writes
# it (adapter_config.json, adapter_model.safetensors: PEFT's initialization with the B matrices then drawn
# away from zero, so that the adapters change the output from the first step) on the base
# tests/data/decoder/BASE/, plus tests/data/lora/NAME.golden.safetensors:
#   tokens  I32 (12, 8)    the decoder fixture's golden batch (tests/data/decoder/BASE.golden.safetensors)
#   targets I32 (12, 8)    its targets, -1 where ignored
#   adamw   F64 (6)        the loss before each of 5 full-batch AdamW steps over the adapters only (the base
#                          frozen, as PEFT trains), and after the last; the batch's trajectory in fp32 stays
#                          within 2e-5 of these float64 values
#   grad_norm F64 (1)      the global L2 norm of the adapters' gradient at step 0
#   val_loss F64 (1)       the loss of base + adapter (untrained) on zero's first validation batch of
#                          tests/data/decoder/tokens.bin (--seq 8, 4 sequences: docs/MODEL.md, Data)
# metadata: base, lr, beta1, beta2, eps, weight_decay (AdamW, decay on every adapter: they are 2-D), versions.
import json
import math
import os
import shutil
import struct
import sys

import peft
import torch
import transformers
from safetensors.torch import load_file, save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DEC = os.path.join(ROOT, "tests", "data", "decoder")
OUT = os.path.join(ROOT, "tests", "data", "lora")
LR, BETAS, EPS, WD = 1e-2, (0.9, 0.999), 1e-8, 0.1
LLAMA_ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

# name: (base fixture, LoraConfig kwargs)
FIXTURES = {
    # GPT-2's Conv1D (fan_in_fan_out), every module: c_attn, both c_proj, c_fc
    "gpt2": ("gpt2", dict(r=4, lora_alpha=8, target_modules=["c_attn", "c_proj", "c_fc"], fan_in_fan_out=True)),
    # every Llama projection (fused q/k/v and gate/up in zero), GQA, rsLoRA
    "llama_gqa4": ("llama_gqa4", dict(r=4, lora_alpha=16, target_modules=LLAMA_ALL, use_rslora=True)),
    # biases on every projection, llama3 RoPE, tied head: k, o and up only
    "llama3_bias": ("llama3_bias", dict(r=3, lora_alpha=6, target_modules=["k_proj", "o_proj", "up_proj"])),
    # q/k RMSNorm after the q adapter
    "qwen3": ("qwen3", dict(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj", "down_proj"])),
    # Gemma 2: every projection, behind the sandwich norms and soft-capping
    "gemma2": ("gemma2", dict(r=4, lora_alpha=8, target_modules=LLAMA_ALL)),
    # Gemma 3: q/k norms after the q and k adapters, GeGLU's gate and up
    "gemma3": ("gemma3", dict(r=2, lora_alpha=4, target_modules=["q_proj", "k_proj", "gate_proj", "up_proj"])),
    # Phi-3's fused modules: qkv_proj and gate_up_proj (one adapter over the three / two), partial RoPE
    "phi3": ("phi3", dict(r=4, lora_alpha=8, target_modules=["qkv_proj", "o_proj", "gate_up_proj", "down_proj"])),
    # LongRoPE, rsLoRA, the fused qkv only
    "phi3_longrope": ("phi3_longrope", dict(r=3, lora_alpha=6, target_modules=["qkv_proj"], use_rslora=True)),
}


def golden_batch(base):
    g = load_file(os.path.join(DEC, base + ".golden.safetensors"))
    tokens = g["tokens"].long()
    labels = g["targets"].long().masked_fill(g["targets"] == -1, -100)
    return g["tokens"], g["targets"], tokens, labels


def mean_loss(model, tokens, labels):
    logits = model(input_ids=tokens).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def load(base_dir, adapter_dir, dtype):
    model = transformers.AutoModelForCausalLM.from_pretrained(base_dir, dtype=dtype, attn_implementation="eager")
    model = peft.PeftModel.from_pretrained(model, adapter_dir, is_trainable=True)
    model.to(dtype)
    model.train()  # no dropout anywhere (the fixtures have none, lora_dropout 0)
    return model


def adamw_run(base_dir, adapter_dir, dtype, tokens, labels):
    model = load(base_dir, adapter_dir, dtype)
    params = [p for p in model.parameters() if p.requires_grad]
    assert params and all(p.dim() == 2 for p in params)
    opt = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, foreach=False)
    losses, norm = [], None
    for step in range(6):
        opt.zero_grad()
        loss = mean_loss(model, tokens, labels)
        losses.append(loss.item())
        if step < 5:
            loss.backward()
            if step == 0:
                norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params)).item()
            opt.step()
    return losses, norm


def val_loss(base_dir, adapter_dir):
    """zero's validation rule (scripts/make_decoder_fixtures.py): windows 0-3 of the last 5% of tokens.bin."""
    b = open(os.path.join(DEC, "tokens.bin"), "rb").read()
    n = struct.unpack("<Q", b[16:24])[0]
    toks = torch.tensor(struct.unpack("<%dH" % n, b[32:32 + 2 * n]))
    val = toks[n - int(math.floor(0.05 * n)):]
    w = torch.stack([val[j * 8:j * 8 + 9] for j in range(4)])
    model = load(base_dir, adapter_dir, torch.float64)
    with torch.no_grad():
        logits = model(input_ids=w[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1)).item()


def make_adapter(base_dir, out_dir, kw, seed):
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32, attn_implementation="eager")
    cfg = peft.LoraConfig(lora_dropout=0.0, bias="none", task_type="CAUSAL_LM", **kw)
    pm = peft.get_peft_model(model, cfg)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    shutil.rmtree(out_dir, ignore_errors=True)
    pm.save_pretrained(out_dir)
    for f in os.listdir(out_dir):  # a README.md model card: not part of the format
        if f not in ("adapter_config.json", "adapter_model.safetensors"):
            os.remove(os.path.join(out_dir, f))
    p = os.path.join(out_dir, "adapter_config.json")  # the base by its place in the repository
    c = json.load(open(p))
    c["base_model_name_or_path"] = os.path.relpath(base_dir, ROOT)
    json.dump(c, open(p, "w"), indent=2, sort_keys=True)


def main():
    only = sys.argv[1:]
    os.makedirs(OUT, exist_ok=True)
    for i, (name, (base, kw)) in enumerate(FIXTURES.items()):
        if only and name not in only:
            continue
        base_dir, out_dir = os.path.join(DEC, base), os.path.join(OUT, name)
        tok32, tgt32, tokens, labels = golden_batch(base)
        for attempt in range(20):
            make_adapter(base_dir, out_dir, kw, 500 + 10 * i + 1000 * attempt)
            losses, norm = adamw_run(base_dir, out_dir, torch.float64, tokens, labels)
            f32, _ = adamw_run(base_dir, out_dir, torch.float32, tokens, labels)
            drift = max(abs(a - b) / b for a, b in zip(f32, losses))
            if drift <= 2e-5:
                break
        else:
            raise SystemExit("%s: no adapter found whose AdamW trajectory fp32 can follow" % name)
        g = {"tokens": tok32.contiguous(), "targets": tgt32.contiguous(),
             "adamw": torch.tensor(losses, dtype=torch.float64), "grad_norm": torch.tensor([norm], dtype=torch.float64),
             "val_loss": torch.tensor([val_loss(base_dir, out_dir)], dtype=torch.float64)}
        meta = {"base": base, "lr": repr(LR), "beta1": repr(BETAS[0]), "beta2": repr(BETAS[1]), "eps": repr(EPS),
                "weight_decay": repr(WD), "peft": peft.__version__, "transformers": transformers.__version__,
                "torch": torch.__version__}
        save_file(g, os.path.join(OUT, name + ".golden.safetensors"), metadata=meta)
        cfg = json.load(open(os.path.join(out_dir, "adapter_config.json")))
        print("%-12s on %-12s r %d alpha %g %s%s: adamw %s (fp32 drift %.1e), val %.6f" % (
            name, base, cfg["r"], cfg["lora_alpha"], ",".join(sorted(cfg["target_modules"])),
            " rslora" if cfg.get("use_rslora") else "", " ".join("%.5f" % x for x in losses), drift,
            g["val_loss"].item()))


if __name__ == "__main__":
    main()
