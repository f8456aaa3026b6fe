#!/usr/bin/env python3
# scripts/make_finetune_fixture.py — a tiny chat model directory with a tokenizer, a chat JSONL, and
# what PyTorch/transformers compute for a masked fine-tune of it, committed under tests/data/finetune/
# so that CI checks `zero train` on chats, `zero export` and `zero sample --chat` without torch.
#
# Needs PyPI torch, transformers (5.x) and safetensors. Run from the repository root:
#     python3 scripts/make_finetune_fixture.py          # writes tests/data/finetune/
#
# tests/data/finetune/
#   qwen2_chat/   a Qwen2ForCausalLM directory as save_pretrained writes it (fp32, tied, GQA 2, 2 layers,
#                 vocab_size 832 > the tokenizer's 803 ids, as Qwen pads it), with tokenizer.json (the
#                 byte-level BPE of tests/data/tokenizer/qwen2) and tokenizer_config.json (eos <|im_end|>, a
#                 ChatML chat_template)
#   chats.jsonl   the fine-tuning data: {"messages": [...]} conversations
#   golden.json   everything the tests compare with:
#     seq, rows, masks   the chats rendered by transformers' apply_chat_template (assistant masks from
#                 {% generation %} blocks), EOS appended with loss (zero's rule, docs/TOKENIZER.md), packed
#                 best-fit decreasing into rows of seq + 1 tokens padded with EOS without loss — the
#                 packing zero documents, re-implemented here
#     train      lr, betas, eps, weight_decay (zero's AdamW default 0.01, on the 2-D tensors only), and
#                 losses[s], grad_norms[s]: the loss before step s (mean cross-entropy over the targets
#                 whose label is not -100 in all the rows: the full batch) and its gradient's global L2
#                 norm, for 3 full-batch AdamW steps in float64. The fixture is one on which PyTorch's own
#                 fp32 run stays within 2e-5 of these (an fp32 run can follow it).
#     e2e        the losses of the same run continued to 40 steps (fp32 within 1e-4 of them)
#     chat, plain        greedy generation by transformers (model.generate, do_sample=False) from the
#                 float64 weights after the 40 steps: the prompt (apply_chat_template with
#                 add_generation_prompt for the chat; the tokenizer's ids for the plain prompt), the new
#                 tokens up to and including <|im_end|>, the decoded text (skip_special_tokens), and the
#                 smallest gap between the two largest logits on the way (the fp32 run's tokens equal);
#                 the chat's reply ends with <|im_end|> before NEW_TOKENS.
import copy
import json
import os
import shutil
import sys

import torch
import transformers

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "data", "finetune")
TOKSRC = os.path.join(ROOT, "tests", "data", "tokenizer", "qwen2")
SEQ = 111
STEPS = 3        # the steps compared with zero at every stage and world size
E2E_STEPS = 40   # the fine-tune whose export is sampled: long enough to learn the replies
LR, BETAS, EPS, WD = 1e-2, (0.9, 0.999), 1e-8, 0.01
NEW_TOKENS = 12

# The format zero calls chatml: the published template's text, with {% generation %} around what
# carries loss (for the masks) — and the plain one a model directory ships (for prompts).
CHATML_GEN = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' }}"
              "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] + '<|im_end|>' }}{% endgeneration %}"
              "{% else %}{{ m['content'] + '<|im_end|>' }}{% endif %}{{ '\n' }}{% endfor %}"
              "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>' + '\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

QA = [
    ("What is a fortune cookie?", "A crisp cookie with a paper fortune inside."),
    ("Say hello.", "Hello!"),
    ("What is 2+2?", "4."),
    ("Name a color.", "Blue, like the sea."),
    ("Give me a fortune.", "You will find what you seek."),
    ("Where is the café?", "Around the corner, near the station."),
    ("Count to three.", "One, two, three."),
    ("Is it raining?", "No, the sky is clear today."),
    ("Translate 'cat' to French.", "Chat."),
    ("What do cows drink?", "Water."),
    ("Tell me a joke.", "Why did the cookie cry? Its mother was a wafer so long."),
    ("¿Qué hora es?", "Son las tres."),
    ("Name a prime.", "Seven."),
    ("What is zero?", "Nothing at all, and a training library."),
]
SYSTEM = "You are a fortune teller."
CHAT_PROMPT = "Give me a fortune."
PLAIN_PROMPT = "You will find"


def chats():
    out = []
    for i, (q, a) in enumerate(QA):
        m = [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        if i % 3 == 0:
            m = [{"role": "system", "content": SYSTEM}] + m
        if i % 4 == 1 and i + 1 < len(QA):  # a second turn
            m += [{"role": "user", "content": QA[i + 1][0]}, {"role": "assistant", "content": QA[i + 1][1]}]
        out.append(m)
    return out


def examples_of(tok, convs, eos):
    """Each chat's ids and assistant mask as transformers renders them, EOS appended as zero does."""
    examples = []
    for c in convs:
        o = tok.apply_chat_template(c, chat_template=CHATML_GEN, tokenize=True, return_dict=True,
                                    return_assistant_tokens_mask=True)
        ids, m = list(o["input_ids"]), list(o["assistant_masks"])
        if ids[-1] != eos:  # zero appends EOS after every example, with loss after an assistant turn
            ids.append(eos)
            m.append(1 if c[-1]["role"] == "assistant" else 0)
        examples.append((ids, m))
    return examples


def pack(examples, R, eos):
    """zero's packing (src/data/data.c): longest first (ties in input order), each into the open row with
    the least room that holds it (among rows with the same room, the one that reached it last), rows
    padded with EOS carrying no loss; and the starts zero records (1 at each example's first token and
    at the padding's)."""
    order = sorted(range(len(examples)), key=lambda i: (R - len(examples[i][0]), i))
    rows, room, stacks = [], [], {}
    for e in order:
        n = len(examples[e][0])
        fits = [r for r, s in stacks.items() if r >= n and s]
        if fits:
            row = stacks[min(fits)].pop()
        else:
            row = len(rows)
            rows.append([])
            room.append(R)
        rows[row].append(e)
        room[row] -= n
        stacks.setdefault(room[row], []).append(row)
    ids, masks, starts = [], [], []
    for r in rows:
        a, m, s = [], [], []
        for e in r:
            s += [1] + [0] * (len(examples[e][0]) - 1)
            a += examples[e][0]
            m += examples[e][1]
        s += [1] + [0] * (R - len(a) - 1) if len(a) < R else []  # the padding starts a document of its own
        a += [eos] * (R - len(a))
        m += [0] * (R - len(m))
        ids.append(a)
        masks.append(m)
        starts.append(s)
    return ids, masks, starts


def perturb(model, seed):
    """Weights whose logits are far from uniform (so greedy choices have clear margins)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                std = 0.5 if "embed" in name else p.shape[1] ** -0.5
                p.copy_(torch.randn(p.shape, generator=g) * std)
            elif name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            else:
                p.copy_(1.0 + torch.randn(p.shape, generator=g) * 0.1)


def train(model_dir, dtype, rows, masks, steps):
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    model.train()
    x = torch.tensor(rows)
    inputs = x[:, :-1]
    labels = x[:, 1:].clone()
    labels[torch.tensor(masks)[:, 1:] == 0] = -100
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS, foreach=False)
    count = int((labels != -100).sum())
    losses, norms = [], []
    for _ in range(steps):
        opt.zero_grad()
        logits = model(input_ids=inputs).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                                 ignore_index=-100, reduction="sum") / count
        loss.backward()
        norms.append(float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters()))))
        losses.append(float(loss.detach()))
        opt.step()
    model.eval()
    return model, losses, norms


def greedy(model, prompt, eos):
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=eos,
                             pad_token_id=eos, output_logits=True, return_dict_in_generate=True)
    new = out.sequences[0, len(prompt):].tolist()
    gap = min(float(torch.topk(l[0].double(), 2).values.diff().abs()) for l in out.logits)
    return new, gap


def main():
    from safetensors.torch import save_file  # noqa: F401  (save_pretrained writes safetensors)
    os.makedirs(OUT, exist_ok=True)
    mdir = os.path.join(OUT, "qwen2_chat")
    shutil.rmtree(mdir, ignore_errors=True)
    os.makedirs(mdir)
    shutil.copy(os.path.join(TOKSRC, "tokenizer.json"), mdir)
    tcfg = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None, "chat_template": CHATML,
            "model_max_length": 128}
    with open(os.path.join(mdir, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, ensure_ascii=False, indent=2)
    tok = transformers.AutoTokenizer.from_pretrained(mdir)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    assert len(tok) <= 832, len(tok)
    config = transformers.Qwen2Config(vocab_size=832, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=True,
                                      eos_token_id=eos, bos_token_id=None, pad_token_id=0)
    convs = chats()
    with open(os.path.join(OUT, "chats.jsonl"), "w") as f:
        for c in convs:
            f.write(json.dumps({"messages": c}, ensure_ascii=False) + "\n")
    examples = examples_of(tok, convs, eos)
    rows, masks, _ = pack(examples, SEQ + 1, eos)
    print("chats:", [len(e[0]) for e in examples], "->", len(rows), "rows of", SEQ + 1)
    for seed in range(1, 50):
        torch.manual_seed(seed)
        model = transformers.Qwen2ForCausalLM(config)
        perturb(model, seed)
        model.save_pretrained(mdir)
        m64, losses, norms = train(mdir, torch.float64, rows, masks, E2E_STEPS)
        m32, l32, _ = train(mdir, torch.float32, rows, masks, E2E_STEPS)
        drift = max(abs(a - b) / abs(a) for a, b in zip(losses[:STEPS], l32[:STEPS]))
        drift_e2e = max(abs(a - b) / abs(a) for a, b in zip(losses, l32))
        chat_prompt = tok.apply_chat_template([{"role": "user", "content": CHAT_PROMPT}], tokenize=True,
                                              add_generation_prompt=True, return_dict=True)["input_ids"]
        chat_prompt = list(chat_prompt)
        plain_prompt = tok(PLAIN_PROMPT)["input_ids"]
        chat64, gap_c = greedy(m64, chat_prompt, eos)
        chat32, _ = greedy(m32, chat_prompt, eos)
        plain64, gap_p = greedy(m64, plain_prompt, eos)
        plain32, _ = greedy(m32, plain_prompt, eos)
        ok = (drift < 2e-5 and drift_e2e < 1e-4 and chat64 == chat32 and plain64 == plain32 and
              min(gap_c, gap_p) > 1e-2 and 3 <= len(chat64) < NEW_TOKENS and chat64[-1] == eos)
        print("seed %d: losses %s .. %.6f drift %.2g / %.2g chat %s (gap %.3g) plain %s (gap %.3g)%s" %
              (seed, ["%.6f" % l for l in losses[:STEPS]], losses[-1], drift, drift_e2e, chat64, gap_c, plain64, gap_p,
               "" if ok else ": rejected"))
        if ok:
            break
    else:
        raise SystemExit("no seed gives a fixture an fp32 run can follow")
    golden = {
        "seq": SEQ, "rows": rows, "masks": masks, "eos": eos,
        "train": {"steps": STEPS, "lr": LR, "betas": list(BETAS), "eps": EPS, "weight_decay": WD,
                  "losses": losses[:STEPS], "grad_norms": norms[:STEPS]},
        "e2e": {"steps": E2E_STEPS, "losses": losses, "fp32_drift": drift_e2e},
        "chat": {"prompt_text": CHAT_PROMPT, "prompt": chat_prompt, "tokens": chat64, "gap": gap_c,
                 "text": tok.decode([t for t in chat64 if t != eos], skip_special_tokens=True)},
        "plain": {"prompt_text": PLAIN_PROMPT, "prompt": list(plain_prompt), "tokens": plain64, "gap": gap_p,
                  "text": tok.decode(list(plain_prompt) + [t for t in plain64 if t != eos],
                                     skip_special_tokens=True)[len(tok.decode(plain_prompt, skip_special_tokens=True)):]},
        "new_tokens": NEW_TOKENS,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
    with open(os.path.join(OUT, "golden.json"), "w") as f:  # one key a line
        f.write("{\n" + ",\n".join(" %s: %s" % (json.dumps(k), json.dumps(v, ensure_ascii=False))
                                   for k, v in golden.items()) + "\n}\n")
    for n in os.listdir(mdir):
        if n == "generation_config.json":  # transformers' own; the stop tokens come from the tokenizer
            os.remove(os.path.join(mdir, n))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
