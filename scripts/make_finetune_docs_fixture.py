#!/usr/bin/env python3
# scripts/make_finetune_docs_fixture.py — what PyTorch/transformers compute for the fine-tune of
# tests/data/finetune/ (scripts/make_finetune_fixture.py) with each example on its own: the reference
# for zero's document-masked packing (docs/MODEL.md, "Packed examples"), written to
# tests/data/finetune/golden_docs.json. The committed model directory and chats are read, not made.
#
# The reference shares nothing with zero's mask: every chat is a row of its own (padded with EOS that
# carries no loss), so no example can see another, and its positions start at 0 by construction. Its
# loss over all the counted targets and its AdamW steps are what zero's packed rows with the document
# mask must give.
#
# Needs PyPI torch, transformers (5.x). Run from the repository root:
#     python3 scripts/make_finetune_docs_fixture.py
#
# golden_docs.json:
#   starts     the packed rows' starts (1 at each example's first token and at a row's padding), as
#              zero_data records them: the packing of make_finetune_fixture.py's pack()
#   train      losses[s], grad_norms[s] of the 3 full-batch float64 AdamW steps (the hyperparameters
#              of golden.json's train), and fp32_drift: PyTorch's own fp32 run against them
import json
import os
import sys

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_finetune_fixture as ft  # noqa: E402


def main():
    mdir = os.path.join(ft.OUT, "qwen2_chat")
    golden = json.load(open(os.path.join(ft.OUT, "golden.json")))
    tok = transformers.AutoTokenizer.from_pretrained(mdir)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    convs = [json.loads(l)["messages"] for l in open(os.path.join(ft.OUT, "chats.jsonl"))]
    examples = ft.examples_of(tok, convs, eos)
    rows, masks, starts = ft.pack(examples, ft.SEQ + 1, eos)
    assert rows == golden["rows"] and masks == golden["masks"], "the committed rows are not this packing"
    # one example a row: inputs and labels as the packed rows have them inside each example
    width = max(len(e[0]) for e in examples)
    alone = [e[0] + [eos] * (width - len(e[0])) for e in examples]
    amask = [e[1] + [0] * (width - len(e[1])) for e in examples]
    _, losses, norms = ft.train(mdir, torch.float64, alone, amask, ft.STEPS)
    _, l32, _ = ft.train(mdir, torch.float32, alone, amask, ft.STEPS)
    drift = max(abs(a - b) / abs(a) for a, b in zip(losses, l32))
    out = {
        "starts": starts,
        "train": {"steps": ft.STEPS, "losses": losses, "grad_norms": norms, "fp32_drift": drift},
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
    with open(os.path.join(ft.OUT, "golden_docs.json"), "w") as f:
        f.write("{\n" + ",\n".join(" %s: %s" % (json.dumps(k), json.dumps(v)) for k, v in out.items()) + "\n}\n")
    print("losses", losses, "drift %.2g" % drift, "cross-attending (golden.json):", golden["train"]["losses"])


if __name__ == "__main__":
    main()
