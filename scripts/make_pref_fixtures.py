#!/usr/bin/env python3
# scripts/make_pref_fixtures.py — what TRL computes for preference tuning of the chat fixture
# (tests/data/finetune/qwen2_chat) on tests/data/finetune/pairs.jsonl (8 pairs of plain-text prompt,
# chosen and rejected completions), kept as tests/data/finetune/pref_golden.json so that
# tests/cli/test_pref.sh checks `zero train --objective dpo|orpo` in CI without TRL.
#
# DPO: trl.DPOTrainer (sigmoid loss, beta 0.1, precompute_ref_log_probs: the reference is the
# initial model); ORPO: trl.experimental.orpo.ORPOTrainer (lambda = beta 0.1). Both in float64, the
# 8 pairs one batch a step, AdamW lr 1e-2 betas (0.9, 0.999) eps 1e-8 without weight decay, a
# constant learning rate and no gradient clipping, 3 steps; recorded: each step's logged loss,
# rewards (chosen, rejected, margins, accuracies) and (DPO) the policy's mean log-probabilities; and
# "dpo_torch": the same DPO steps written out in plain PyTorch (torch_dpo below says why).
#
# Needs PyPI torch, transformers, trl, datasets. Run from the repository root:
#     python3 scripts/make_pref_fixtures.py
import json
import os
import tempfile

import datasets
import torch
import transformers
import trl

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FT = os.path.join(ROOT, "tests", "data", "finetune")
STEPS = 3


def run(kind):
    model = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(FT, "qwen2_chat"), dtype=torch.float64)
    tok = transformers.AutoTokenizer.from_pretrained(os.path.join(FT, "qwen2_chat"))
    ds = datasets.load_dataset("json", data_files=os.path.join(FT, "pairs.jsonl"), split="train")
    common = dict(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=len(ds), max_steps=STEPS,
                  learning_rate=1e-2, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
                  adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8, max_grad_norm=0.0, logging_steps=1,
                  report_to=[], seed=0, use_cpu=True, save_strategy="no", beta=0.1)
    if kind == "dpo":
        cfg = trl.DPOConfig(precompute_ref_log_probs=True, **common)
        tr = trl.DPOTrainer(model=model, args=cfg, train_dataset=ds, processing_class=tok)
    else:
        from trl.experimental.orpo import ORPOConfig, ORPOTrainer
        cfg = ORPOConfig(**common)
        tr = ORPOTrainer(model=model, args=cfg, train_dataset=ds, processing_class=tok)
    tr.train()
    logs = [h for h in tr.state.log_history if "loss" in h and "train_runtime" not in h]
    assert len(logs) == STEPS, logs
    return logs


def torch_dpo():
    """The DPO definition in plain PyTorch (float64, the same AdamW steps): each pair's prompt + completion
    + EOS tokenized whole, the completion's summed log-probabilities, the reference the initial model.
    TRL's DPOTrainer computes log-probabilities through its fused LM head, whose gradients differ from
    these by ~4e-4: this is the reference zero's gradient norms and later losses are held to."""
    model = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(FT, "qwen2_chat"), dtype=torch.float64)
    tok = transformers.AutoTokenizer.from_pretrained(os.path.join(FT, "qwen2_chat"))
    pairs = [json.loads(line) for line in open(os.path.join(FT, "pairs.jsonl"))]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, foreach=False)

    def logps():
        out = []
        for p in pairs:
            two = []
            for c in (p["chosen"], p["rejected"]):
                n = len(tok(p["prompt"])["input_ids"])
                x = torch.tensor([tok(p["prompt"] + c + tok.eos_token)["input_ids"]])
                lp = model(input_ids=x).logits[0, :-1].log_softmax(-1).gather(1, x[0, 1:, None])[:, 0]
                two.append(lp[n - 1:].sum())
            out.append(two)
        return out

    with torch.no_grad():
        ref = [[float(a), float(b)] for a, b in logps()]
    steps = []
    for _ in range(STEPS):
        opt.zero_grad()
        lp = logps()
        z = [0.1 * ((c - rc) - (r - rr)) for (c, r), (rc, rr) in zip(lp, ref)]
        loss = sum(-torch.nn.functional.logsigmoid(v) for v in z) / len(z)
        loss.backward()
        norm = float(torch.sqrt(sum((q.grad ** 2).sum() for q in model.parameters())))
        steps.append({"loss": float(loss), "grad_norm": norm, "rewards/chosen": sum(float(0.1 * (c - rc)) for (c, _), (rc, _)
                                                                                     in zip(lp, ref)) / len(z)})
        opt.step()
    return steps


def main():
    out = {"steps": STEPS, "lr": 1e-2, "beta": 0.1, "pairs": 8,
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__}}
    for kind in ("dpo", "orpo"):
        out[kind] = run(kind)
        print(kind, [(round(h["loss"], 6)) for h in out[kind]])
    out["dpo_torch"] = torch_dpo()
    print("dpo_torch", [(round(h["loss"], 6), round(h["grad_norm"], 6)) for h in out["dpo_torch"]])
    with open(os.path.join(FT, "pref_golden.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
