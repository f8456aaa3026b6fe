#!/usr/bin/env python3
# Writes the golden ids of ShareGPT and Alpaca examples under tests/data/tokenizer/, computed in
# Python from the committed fixture tokenizers (tests/data/tokenizer/NAME/tokenizer.json), without zero.
#
# Usage: python3 scripts/make_data_shape_fixtures.py [DIR]   (needs tokenizers and transformers)
#
#   sharegpt.jsonl / sharegpt.json  the ShareGPT conversations below, one a line / one JSON array
#                                   (indented, as FastChat writes it)
#   alpaca.jsonl / alpaca.json      the Alpaca examples below, the same two ways
#   NAME.sharegpt.ids               for the chat tokenizers: per conversation, "ids | mask" from
#                                   transformers' apply_chat_template(return_assistant_tokens_mask=True)
#                                   on the messages axolotl's chat_template maps it to (its default
#                                   roles, plus chatgpt and model; a "system" field becomes a first
#                                   system turn when the first turn is not one)
#   NAME.alpaca.ids                 for every tokenizer: per example, "ids | mask": the ids of
#                                   tok.encode(prompt + output) with the Alpaca prompt, the mask on
#                                   the tokens that meet the output; checked here against Stanford
#                                   Alpaca's own rule (the first len(encode(prompt)) tokens carry no
#                                   loss) and axolotl's (prompt and output tokenized apart) where
#                                   those agree with one another
import importlib.util
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data", "tokenizer")
spec = importlib.util.spec_from_file_location("mtf", os.path.join(ROOT, "scripts", "make_tokenizer_fixtures.py"))
mtf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mtf)  # CHAT_FORMATS (the built-in formats in Jinja), spans_mask, write_ids

SHAREGPT = [
    {"conversations": [{"from": "human", "value": "Hello! What is a fortune cookie?"},
                       {"from": "gpt", "value": "A crisp cookie with a paper fortune inside."}]},
    {"id": "identity_7", "system": "You are terse.",
     "conversations": [{"from": "human", "value": "Name a prime."},
                       {"from": "gpt", "value": " 7 "},
                       {"from": "user", "value": "Another, in 日本語?"},
                       {"from": "assistant", "value": "十三 (13) 🎉\nDone."}]},
    {"conversations": [{"from": "system", "value": "Be brief."},
                       {"from": "human", "value": "Hi"},
                       {"from": "chatgpt", "value": "Hello."},
                       {"from": "user", "value": "  spaces around  "},
                       {"from": "model", "value": "\n\nnewlines first, café"}]},
]
ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant",
         "model": "assistant", "system": "system"}

ALPACA = [
    {"instruction": "Give three tips for staying healthy.", "input": "",
     "output": "1. Eat well.\n2. Move every day.\n3. Sleep."},
    {"instruction": "Translate to French.", "input": "cheese, please", "output": "fromage, s'il vous plaît"},
    {"instruction": "Réponds en 日本語?", "output": "はい 🎉"},
    {"instruction": "Add the numbers.", "input": None, "output": " 4"},
    {"instruction": "Summarize.", "input": "Fortune cookies\nare crisp.", "output": "Crisp cookies.",
     "text": None},
]
# tatsu-lab/stanford_alpaca train.py PROMPT_DICT, with the "\n" after "### Response:" that
# axolotl's AlpacaPrompter (type: alpaca) and alpaca-lora add
PROMPT_INPUT = ("Below is an instruction that describes a task, paired with an input that provides further context. "
                "Write a response that appropriately completes the request.\n\n"
                "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n")
PROMPT_NO_INPUT = ("Below is an instruction that describes a task. "
                   "Write a response that appropriately completes the request.\n\n"
                   "### Instruction:\n{instruction}\n\n### Response:\n")


def sharegpt_messages(ex):
    msgs = [{"role": ROLES[t["from"]], "content": t["value"]} for t in ex["conversations"]]
    if "system" in ex and msgs[0]["role"] != "system":
        msgs.insert(0, {"role": "system", "content": ex["system"]})
    return msgs


def alpaca_prompt(ex):
    return PROMPT_INPUT.format_map(ex) if ex.get("input") else PROMPT_NO_INPUT.format_map(ex)


def main():
    import transformers
    from tokenizers import Tokenizer
    # "text": null beside the Alpaca fields: what HF datasets writes for a column another row has
    alpaca_out = [dict(ex) for ex in ALPACA]
    for name, rows in (("sharegpt", SHAREGPT), ("alpaca", alpaca_out)):
        with open(os.path.join(OUT, name + ".jsonl"), "w") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(rows, f, ensure_ascii=False, indent=2)
            f.write("\n")
    names = ["gpt2", "llama3", "qwen2", "smollm2", "llama2", "mistral", "metaspace", "gpt2_prefix"]
    for name in names:
        d = os.path.join(OUT, name)
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        with open(os.path.join(d, "tokenizer_config.json")) as f:
            cfg = json.load(f)
        rows = []
        for ex in ALPACA:
            prompt = alpaca_prompt(ex)
            text = prompt + ex["output"]
            e = tok.encode(text)
            m = mtf.spans_mask(e.offsets, len(prompt), len(text))
            m = [0 if s else x for x, s in zip(m, e.special_tokens_mask)]
            # Stanford's rule: the prompt's own token count carries no loss
            n_prompt = len(tok.encode(prompt).ids)
            assert m == [0] * n_prompt + [1] * (len(e.ids) - n_prompt), (name, ex)
            # axolotl's: prompt (with BOS) and output (without) tokenized apart and joined; the
            # byte-level tokenizers without a prefix space give the same ids, the others put a space
            # ("▁", "Ġ") before the output alone
            apart = tok.encode(prompt).ids + tok.encode(ex["output"], add_special_tokens=False).ids
            if name in ("gpt2", "llama3", "qwen2", "smollm2"):
                assert apart == e.ids, (name, ex)
            rows.append(e.ids + ["|"] + m)
        mtf.write_ids(os.path.join(OUT, name + ".alpaca.ids"), rows)
        if name in mtf.CHAT_FORMATS:
            ht = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **cfg)
            rows = []
            for ex in SHAREGPT:
                out = ht.apply_chat_template(sharegpt_messages(ex), chat_template=mtf.CHAT_FORMATS[name],
                                             tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
                rows.append(list(out["input_ids"]) + ["|"] + list(out["assistant_masks"]))
            mtf.write_ids(os.path.join(OUT, name + ".sharegpt.ids"), rows)
        print("wrote", name)


if __name__ == "__main__":
    main()
