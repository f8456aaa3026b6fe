#!/usr/bin/env python3
# scripts/make_decoder_fixtures.py — tiny random Hugging Face models of every architecture the decoder
# computes, made by transformers' own classes, and their expected values from PyTorch, committed under
# tests/data/decoder/ so that CI checks zero against transformers without torch.
#
# Needs PyPI torch, transformers (5.x) and safetensors. Run from the repository root:
#     python3 scripts/make_decoder_fixtures.py            # writes tests/data/decoder/
#
# Each fixture NAME is a model directory tests/data/decoder/NAME/ exactly as save_pretrained writes it
# (config.json, model.safetensors or shards + model.safetensors.index.json; some rewritten to the
# published rope_scaling form), plus tests/data/decoder/NAME.golden.safetensors:
#   tokens  I32 (12, 8)    inputs of a global batch of 12 sequences
#   targets I32 (12, 8)    targets; -1 where PyTorch's label is -100 (ignored): ~20% at random, and
#                          sequences 9-11 entirely (so a rank of 4 counts no target at all)
#   logits  F32 (3, 8, V)  the logits of sequences 0-2
#   loss    F64 (1)        cross-entropy, mean over the counted targets of the 12 sequences
#   grad_norm F64 (1)      the global L2 norm of that loss's gradient
#   adamw   F64 (6)        the loss before each of 5 full-batch AdamW steps and after the last; the
#                          batch is one on which PyTorch's own fp32 run stays within 2e-5 of these
#   val_loss F64 (1)       the mean loss `zero train --data tokens.bin --seq 8` validates on with a global
#                          batch of 4 sequences and --val-batches 1 (windows 0-3 of the last 5% of the
#                          tokens: docs/MODEL.md, Data): what an exported copy must give again
#   gen_prompt I32 (6)     (the *_window fixtures, whose sliding window is shorter than the sequence)
#   gen_tokens I32 (10)    transformers' greedy generate() of 10 tokens after the prompt (its KV cache:
#                          a sliding layer's query sees the last sliding_window keys), every step's
#                          float64 logit margin between the first and second token over 1e-3
# metadata: lr, beta1, beta2, eps, weight_decay (AdamW; weight decay on the 2-D tensors only).
# tests/data/decoder/tokens.bin: 2048 random tokens below 64 in zero's ZEROTOK1 format.
# The goldens are computed in float64 from the stored weights (a bf16/fp16 file's values widened).
import json
import math
import os
import shutil
import struct
import sys

import torch
import transformers
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "decoder")
B, T = 12, 8
LR, BETAS, EPS, WD = 1e-2, (0.9, 0.999), 1e-8, 0.1


def perturb(model, seed):
    """Weights that make every path matter: fan-in-scaled normals, gains near 1, nonzero biases."""
    g = torch.Generator().manual_seed(seed)
    conv1d = isinstance(model, transformers.GPT2LMHeadModel)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                if "embed" in name or "wte" in name or "wpe" in name:
                    std = 0.5
                else:  # GPT-2's Conv1D is (in, out), Linear (out, in)
                    std = (p.shape[0] if conv1d else p.shape[1]) ** -0.5
                p.copy_(torch.randn(p.shape, generator=g) * std)
            elif name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            elif "Gemma" in type(model).__name__:  # Gemma's gains are 1 + w
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            else:  # LayerNorm / RMSNorm gains
                p.copy_(1.0 + torch.randn(p.shape, generator=g) * 0.1)


def batch(V, seed):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, V, (B, T), generator=g)
    targets = torch.randint(0, V, (B, T), generator=g)
    mask = torch.rand((B, T), generator=g) < 0.2
    mask[9:] = True
    labels = targets.masked_fill(mask, -100)
    return tokens, labels


def mean_loss(model, tokens, labels):
    logits = model(input_ids=tokens).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                             ignore_index=-100), logits


N_TOKENS, VAL_T, VAL_G = 2048, 8, 4


def write_tokens(path, V, seed):
    """A ZEROTOK1 token file (docs/MODEL.md): magic, version 1, vocab, count, reserved, uint16 tokens."""
    g = torch.Generator().manual_seed(seed)
    toks = torch.randint(0, V, (N_TOKENS,), generator=g)
    with open(path, "wb") as f:
        f.write(b"ZEROTOK1" + struct.pack("<IIQQ", 1, V, N_TOKENS, 0))
        f.write(struct.pack("<%dH" % N_TOKENS, *toks.tolist()))
    return toks


def val_loss(path, toks):
    """zero's validation rule: the last floor(0.05 n) tokens; sequence j of batch 0 is window j, tokens
    [j T, j T + T] of the split (inputs the first T, targets the last T)."""
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64, attn_implementation="eager")
    val = toks[N_TOKENS - int(math.floor(0.05 * N_TOKENS)):]
    w = torch.stack([val[j * VAL_T:j * VAL_T + VAL_T + 1] for j in range(VAL_G)])
    with torch.no_grad():
        logits = model(input_ids=w[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1)).item()


def adamw_losses(path, dtype, tokens, labels):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="eager")
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS, foreach=False)
    losses = []
    for step in range(6):
        opt.zero_grad()
        l, _ = mean_loss(model, tokens, labels)
        losses.append(l.item())
        if step < 5:
            l.backward()
            opt.step()
    return losses


def goldens(path, seed):
    """The goldens for the first batch on which PyTorch's fp32 AdamW trajectory stays within 2e-5 of its
    float64 one: a gradient element within fp32 rounding of zero makes AdamW's first steps (g / (|g| +
    eps)) depend on that rounding, and no fp32 implementation could then agree with the golden."""
    for attempt in range(20):
        g = golden_of(path, seed + 1000 * attempt)
        f32 = adamw_losses(path, torch.float32, g["tokens"].long(), g["labels"])
        drift = max(abs(a - b) / b for a, b in zip(f32, g["adamw"].tolist()))
        if drift <= 2e-5:
            del g["labels"]
            return g, drift
    raise SystemExit("%s: no batch found whose AdamW trajectory fp32 can follow" % path)


def golden_of(path, seed):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64, attn_implementation="eager")
    model.train()  # the fixtures have no dropout: train and eval compute the same
    V = model.config.vocab_size
    tokens, labels = batch(V, seed)
    loss, logits = mean_loss(model, tokens, labels)
    loss.backward()
    grad_norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters()))
    losses = adamw_losses(path, torch.float64, tokens, labels)
    targets = labels.masked_fill(labels == -100, -1)
    return {
        "tokens": tokens.to(torch.int32).contiguous(),
        "targets": targets.to(torch.int32).contiguous(),
        "logits": logits[:3].detach().to(torch.float32).contiguous(),
        "loss": torch.tensor([loss.item()], dtype=torch.float64),
        "grad_norm": torch.tensor([grad_norm.item()], dtype=torch.float64),
        "adamw": torch.tensor(losses, dtype=torch.float64),
        "labels": labels,
    }


GEN_PROMPT, GEN_NEW, GEN_MARGIN = 6, 10, 1e-3


def generation(path, V, seed):
    """A prompt and transformers' greedy continuation (generate(), with its cache), on a prompt whose
    every step picks its token by a float64 logit margin over GEN_MARGIN (fp32 must pick the same), and
    whose continuation the same model without its window (sliding_window 64: nothing masked) does not
    generate: the tokens depend on the window."""
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64, attn_implementation="eager")
    full = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64, attn_implementation="eager",
                                                             sliding_window=64)
    g = torch.Generator().manual_seed(seed)

    def greedy(m, prompt):
        with torch.no_grad():
            return m.generate(prompt, max_new_tokens=GEN_NEW, min_new_tokens=GEN_NEW, do_sample=False,
                              eos_token_id=None, pad_token_id=0, output_scores=True, return_dict_in_generate=True)
    for _ in range(200):
        prompt = torch.randint(0, V, (1, GEN_PROMPT), generator=g)
        out = greedy(model, prompt)
        margins = [s[0].topk(2).values for s in out.scores]
        if min((m[0] - m[1]).item() for m in margins) > GEN_MARGIN and \
                not torch.equal(greedy(full, prompt).sequences, out.sequences):
            return prompt[0].to(torch.int32).contiguous(), out.sequences[0, GEN_PROMPT:].to(torch.int32).contiguous()
    raise SystemExit("%s: no prompt found whose greedy tokens are clear and depend on the window" % path)


def to_published_rope(path):
    """Rewrites transformers 5's rope_parameters as the published form: rope_theta + rope_scaling."""
    p = os.path.join(path, "config.json")
    c = json.load(open(p))
    rp = c.pop("rope_parameters")
    c["rope_theta"] = rp.pop("rope_theta")
    if "partial_rotary_factor" in rp:
        c["partial_rotary_factor"] = rp.pop("partial_rotary_factor")
    if rp.get("rope_type", "default") != "default":
        rp["type"] = rp.pop("rope_type")  # Phi-3's published files say "type"
        c["rope_scaling"] = rp
    json.dump(c, open(p, "w"), indent=2, sort_keys=True)


# name: (class, config kwargs, stored dtype, max shard size or None, published rope form)
FIXTURES = {
    # GPT-2: LayerNorm, learned positions, tanh GELU, Conv1D weights, tied head
    "gpt2": (transformers.GPT2LMHeadModel, dict(vocab_size=64, n_positions=16, n_embd=24, n_layer=2, n_head=3,
                                                resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None,
                                                eos_token_id=None), torch.bfloat16,
             None, False),
    # GQA 4 (8 query heads on 2 key/value heads), untied head, fp32
    "llama_gqa4": (transformers.LlamaForCausalLM, dict(vocab_size=64, hidden_size=32, intermediate_size=48,
                                                      num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                                                      max_position_embeddings=64, rope_theta=10000.0,
                                                      tie_word_embeddings=False), torch.float32, None, True),
    # Llama 3.1 RoPE (llama3 scaling, every band), explicit head_dim (6 x 8 = 48 != 24), GQA 3,
    # attention and MLP biases, tied head, bf16 file, the published rope_scaling form
    "llama3_bias": (transformers.LlamaForCausalLM, dict(vocab_size=64, hidden_size=24, intermediate_size=40,
                                                       num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2,
                                                       head_dim=8, max_position_embeddings=64, attention_bias=True,
                                                       mlp_bias=True, tie_word_embeddings=True, rms_norm_eps=1e-5,
                                                       rope_parameters=dict(rope_type="llama3", rope_theta=10000.0,
                                                                            factor=8.0, low_freq_factor=1.0,
                                                                            high_freq_factor=4.0,
                                                                            original_max_position_embeddings=16)),
                    torch.bfloat16, None, True),
    # MQA (one key/value head), linear RoPE scaling in transformers 5's rope_parameters form, fp16,
    # sharded into several files with an index
    "llama_mqa_sharded": (transformers.LlamaForCausalLM, dict(vocab_size=64, hidden_size=32, intermediate_size=64,
                                                             num_hidden_layers=3, num_attention_heads=4,
                                                             num_key_value_heads=1, max_position_embeddings=64,
                                                             rope_parameters=dict(rope_type="linear", factor=2.0,
                                                                                  rope_theta=500.0),
                                                             tie_word_embeddings=False), torch.float16, "20KB", False),
    # Mistral: explicit head_dim 16 (4 x 16 = 64 != 32), sliding_window far past the sequence, bf16
    "mistral": (transformers.MistralForCausalLM, dict(vocab_size=64, hidden_size=32, intermediate_size=48,
                                                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                     head_dim=16, max_position_embeddings=64, sliding_window=4096,
                                                     rope_theta=1e6, tie_word_embeddings=False), torch.bfloat16, None,
                True),
    # Qwen2: q/k/v biases (no o bias), GQA 3, tied head, fp32
    "qwen2": (transformers.Qwen2ForCausalLM, dict(vocab_size=64, hidden_size=24, intermediate_size=40,
                                                 num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2,
                                                 max_position_embeddings=64, rope_theta=1e6, rms_norm_eps=1e-6,
                                                 use_sliding_window=False, tie_word_embeddings=True), torch.float32,
              None, True),
    # Qwen3: per-head q/k RMSNorm, explicit head_dim 8 (4 x 8 = 32), GQA 4, untied, bf16
    "qwen3": (transformers.Qwen3ForCausalLM, dict(vocab_size=64, hidden_size=32, intermediate_size=48,
                                                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                                                 head_dim=8, max_position_embeddings=64, rope_theta=1e6,
                                                 tie_word_embeddings=False), torch.bfloat16, None, False),
    # Gemma: (1 + w) RMSNorm gains, GeGLU (gelu_pytorch_tanh), embeddings x sqrt(32), head_dim 16
    # (4 x 16 = 64 != 32), MQA, tied head, bf16
    "gemma": (transformers.GemmaForCausalLM, dict(vocab_size=64, hidden_size=32, intermediate_size=48,
                                                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                                                 head_dim=16, max_position_embeddings=64, rope_theta=10000.0,
                                                 hidden_act="gelu_pytorch_tanh", tie_word_embeddings=True),
              torch.bfloat16, None, False),
    # Gemma 2: sandwich norms, query_pre_attn_scalar 12 (!= head_dim 8), attention soft-capping at 4 and
    # final soft-capping at 3 (small: they shape every logit), 3 layers alternating local/global with
    # a window past the sequence, GQA 2, tied, fp32
    "gemma2": (transformers.Gemma2ForCausalLM, dict(vocab_size=64, hidden_size=32, intermediate_size=48,
                                                   num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                                                   head_dim=8, max_position_embeddings=64, query_pre_attn_scalar=12,
                                                   attn_logit_softcapping=4.0, final_logit_softcapping=3.0,
                                                   sliding_window=32, tie_word_embeddings=True), torch.float32,
               None, False),
    # Gemma 3 (text): q/k norms, layers local-local-global-local (pattern 3), the local layers' RoPE
    # base 100 and the global ones' 1e4 with linear scaling x2, query_pre_attn_scalar 8, GQA 2, bf16
    "gemma3": (transformers.Gemma3ForCausalLM, dict(vocab_size=64, hidden_size=32, intermediate_size=48,
                                                   num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                                                   head_dim=8, max_position_embeddings=64, query_pre_attn_scalar=8,
                                                   sliding_window=32,
                                                   layer_types=["sliding_attention", "sliding_attention",
                                                                "full_attention", "sliding_attention"],
                                                   rope_parameters={
                                                       "full_attention": dict(rope_type="linear", factor=2.0,
                                                                              rope_theta=10000.0),
                                                       "sliding_attention": dict(rope_type="default",
                                                                                 rope_theta=100.0)},
                                                   tie_word_embeddings=True), torch.bfloat16, None, False),
    # Phi-3: fused qkv_proj and gate_up_proj, partial_rotary_factor 0.5 (4 of head_dim 8 rotated),
    # GQA 2, untied, fp32
    "phi3": (transformers.Phi3ForCausalLM, dict(vocab_size=64, hidden_size=32, intermediate_size=48,
                                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                               max_position_embeddings=64, original_max_position_embeddings=64,
                                               partial_rotary_factor=0.5, rope_theta=10000.0,
                                               tie_word_embeddings=False, pad_token_id=0, bos_token_id=1,
                                               eos_token_id=2), torch.float32, None, False),
    # Phi-3 with LongRoPE: original_max_position_embeddings 4 < the sequences' 8, so the long factors
    # and the attention factor sqrt(1 + ln 16 / ln 4) apply; bf16, the published rope_scaling form
    "phi3_longrope": (transformers.Phi3ForCausalLM, dict(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=64, original_max_position_embeddings=4,
        rope_parameters=dict(rope_type="longrope", rope_theta=10000.0, original_max_position_embeddings=4,
                             short_factor=[1.0, 1.5, 2.0, 3.5], long_factor=[1.2, 2.5, 4.0, 9.0]),
        tie_word_embeddings=False, pad_token_id=0, bos_token_id=1, eos_token_id=2), torch.bfloat16, None, True),
    # Sliding windows shorter than the sequences of 8 (transformers 5: query t sees keys t - W < j <= t).
    # Mistral with window 3 on both layers, GQA 2, fp32
    "mistral_window": (transformers.MistralForCausalLM, dict(vocab_size=64, hidden_size=32, intermediate_size=48,
                                                            num_hidden_layers=2, num_attention_heads=4,
                                                            num_key_value_heads=2, max_position_embeddings=64,
                                                            sliding_window=3, rope_theta=10000.0,
                                                            tie_word_embeddings=False), torch.float32, None, True),
    # Gemma 2 with window 4 on layers 0 and 2 (layer 1 global), attention soft-capping 4, final 3, bf16
    "gemma2_window": (transformers.Gemma2ForCausalLM, dict(vocab_size=64, hidden_size=32, intermediate_size=48,
                                                          num_hidden_layers=3, num_attention_heads=4,
                                                          num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
                                                          query_pre_attn_scalar=12, attn_logit_softcapping=4.0,
                                                          final_logit_softcapping=3.0, sliding_window=4,
                                                          tie_word_embeddings=True), torch.bfloat16, None, False),
    # Gemma 3 with window 3 on its local layers (local-local-global-local), q/k norms, local RoPE base
    # 100, the published sliding_window_pattern form (no layer_types), fp32
    "gemma3_window": (transformers.Gemma3ForCausalLM, dict(vocab_size=64, hidden_size=32, intermediate_size=48,
                                                          num_hidden_layers=4, num_attention_heads=4,
                                                          num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
                                                          query_pre_attn_scalar=8, sliding_window=3,
                                                          layer_types=["sliding_attention", "sliding_attention",
                                                                       "full_attention", "sliding_attention"],
                                                          rope_parameters={
                                                              "full_attention": dict(rope_type="default",
                                                                                     rope_theta=10000.0),
                                                              "sliding_attention": dict(rope_type="default",
                                                                                        rope_theta=100.0)},
                                                          tie_word_embeddings=True), torch.float32, None, False),
    # Phi-3 with window 4 on every layer (Phi-3-mini-4k's sliding_window 2047, scaled down), partial
    # RoPE 0.5, GQA 2, bf16
    "phi3_window": (transformers.Phi3ForCausalLM, dict(vocab_size=64, hidden_size=32, intermediate_size=48,
                                                      num_hidden_layers=2, num_attention_heads=4,
                                                      num_key_value_heads=2, max_position_embeddings=64,
                                                      original_max_position_embeddings=64, partial_rotary_factor=0.5,
                                                      rope_theta=10000.0, sliding_window=4, tie_word_embeddings=False,
                                                      pad_token_id=0, bos_token_id=1, eos_token_id=2),
                    torch.bfloat16, None, False),
}


def main():
    only = sys.argv[1:]
    os.makedirs(OUT, exist_ok=True)
    toks = write_tokens(os.path.join(OUT, "tokens.bin"), 64, 7)
    for i, (name, (cls, kw, dtype, shard, published)) in enumerate(FIXTURES.items()):
        if only and name not in only:
            continue
        torch.manual_seed(100 + i)
        config = cls.config_class(**kw)
        model = cls(config)
        perturb(model, 200 + i)
        path = os.path.join(OUT, name)
        shutil.rmtree(path, ignore_errors=True)
        model.to(dtype).save_pretrained(path, max_shard_size=shard or "5GB")
        gen = os.path.join(path, "generation_config.json")
        if os.path.exists(gen):
            os.remove(gen)
        if published:
            to_published_rope(path)
        if name == "gemma3_window":  # Gemma 3's published form: sliding_window_pattern, no layer_types
            c = json.load(open(os.path.join(path, "config.json")))
            assert c.pop("layer_types") == kw["layer_types"]
            c["sliding_window_pattern"] = 3
            json.dump(c, open(os.path.join(path, "config.json"), "w"), indent=2, sort_keys=True)
        g, drift = goldens(path, 300 + i)
        g["val_loss"] = torch.tensor([val_loss(path, toks)], dtype=torch.float64)
        if name.endswith("_window"):
            g["gen_prompt"], g["gen_tokens"] = generation(path, kw["vocab_size"], 400 + i)
        meta = {"lr": repr(LR), "beta1": repr(BETAS[0]), "beta2": repr(BETAS[1]), "eps": repr(EPS),
                "weight_decay": repr(WD), "transformers": transformers.__version__, "torch": torch.__version__}
        save_file(g, os.path.join(OUT, name + ".golden.safetensors"), metadata=meta)
        files = sorted(os.listdir(path))
        size = sum(os.path.getsize(os.path.join(path, f)) for f in files)
        print("%-18s %-20s %s, %d files, %d bytes; loss %.6f, adamw %s (fp32 drift %.1e)" % (
            name, cls.__name__, str(dtype).replace("torch.", ""), len(files), size, g["loss"].item(),
            " ".join("%.5f" % x for x in g["adamw"].tolist()), drift))


if __name__ == "__main__":
    main()
