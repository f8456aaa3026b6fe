#!/usr/bin/env python3
# Writes the chat-template fixtures of tests/data/chat_template/: what transformers'
# apply_chat_template renders for a corpus of conversations with the published chat templates
# committed beside them (NAME.jinja: the model publishers' templates, from llama.cpp's
# models/templates and other public copies; SOURCES says which), and the ids of that text through
# the tokenizer fixtures of tests/data/tokenizer where the template's special tokens fit one.
#
# Usage: python3 scripts/make_chat_template_fixtures.py [OUTDIR]
#        (needs transformers and jinja2 from PyPI; no torch, no network)
#
# Output:
#   conversations.jsonl  one context a line: {"messages": [...], "tools"?: [...]}
#   expected.jsonl       one render a line: {"template", "conv", "add_generation_prompt", "bos_token",
#                        "eos_token", "now", "text"} or "error" (the template's exception text);
#                        "tokenizer" and "ids" (tok.encode(text, add_special_tokens=False), as
#                        apply_chat_template(tokenize=True) encodes) where a tokenizer fixture fits
import datetime as dt
import json
import os
import sys

import transformers.utils.chat_template_utils as ctu
from tokenizers import Tokenizer
from transformers.utils.chat_template_utils import render_jinja_template

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data", "chat_template")
TOKDIR = os.path.join(ROOT, "tests", "data", "tokenizer")

# strftime_now() (Llama 3.2) reads the clock: a fixed day, which the C test passes as opts.now (UTC).
NOW = dt.datetime(2026, 12, 1, 9, 30, 0)
NOW_UNIX = int(NOW.replace(tzinfo=dt.timezone.utc).timestamp())


class FixedClock(dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW


ctu.datetime = FixedClock

# name: (bos_token, eos_token, tokenizer fixture or None) — the tokens of the published
# tokenizer_config.json of each model
TEMPLATES = {
    "llama-3.1": ("<|begin_of_text|>", "<|eot_id|>", "llama3"),
    "llama-3.2": ("<|begin_of_text|>", "<|eot_id|>", "llama3"),
    "qwen2.5": (None, "<|im_end|>", "qwen2"),
    "qwen3": (None, "<|im_end|>", "qwen2"),
    "mistral-v0.3": ("<s>", "</s>", "mistral"),
    "mistral-nemo": ("<s>", "</s>", "mistral"),
    "smollm2": ("<|im_start|>", "<|im_end|>", "smollm2"),
    "gemma-2": ("<bos>", "<eos>", None),
    "gemma-3": ("<bos>", "<eos>", None),
    "phi-3.5": ("<s>", "<|endoftext|>", None),
}

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather — 天気 — for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "e.g. \"Paris\""},
                                                    "days": {"type": "integer"}},
                   "required": ["city"]}}}]


def m(role, content):
    return {"role": role, "content": content}


CONVERSATIONS = [
    {"messages": [m("system", "You are terse."), m("user", "Name a prime."), m("assistant", "Seven.")]},
    {"messages": [m("user", "Hello! What is a fortune cookie?"), m("assistant", "A crisp cookie with a paper fortune inside.")]},
    {"messages": [m("system", "Answer in one word."), m("user", "Sky colour?"), m("assistant", "Blue"),
                  m("user", "Grass?"), m("assistant", "Green")]},
    {"messages": [m("user", "日本語で挨拶して 🙂"), m("assistant", "こんにちは！😀 Ça va? 👨‍👩‍👧‍👦")]},
    {"messages": [m("user", "Say nothing."), m("assistant", "")]},
    {"messages": [m("user", "Only a question, no answer yet?")]},
    {"messages": [m("user", "  spaces around  "), m("assistant", "\n\nnewlines first, café\n")]},
    {"messages": [m("user", "One"), m("assistant", "Two"), m("user", "Three")]},
    {"messages": [m("user", "Think first."), m("assistant", "<think>\nLet me see.\n</think>\n\nThe answer is 4.")]},
    {"messages": [m("system", "Be kind."), m("user", "Hi")]},
    {"messages": [m("user", "Quote: {{ not a tag }} {% neither %} \"double\" 'single' \\back\\slash\ttab"),
                  m("assistant", "Done: {# comment? #}")]},
    {"messages": [m("system", ""), m("user", ""), m("assistant", "Empty system and user.")]},
    {"messages": [m("user", "Weather in Paris?")], "tools": TOOLS},
    {"messages": [m("user", "Weather in Paris?"),
                  {"role": "assistant", "content": "", "tool_calls": [
                      {"id": "abc123def", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
                  {"role": "tool", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}", "tool_call_id": "abc123def"},
                  m("assistant", "It is 21.5 °C and clear.")], "tools": TOOLS},
    {"messages": [m("assistant", "I speak first."), m("user", "Odd order.")]},
]


def main():
    os.makedirs(OUT, exist_ok=True)
    # the built-in formats written with {% generation %} blocks (make_tokenizer_fixtures.py made
    # tests/data/tokenizer/NAME.chat.ids with them: transformers' ids and assistant masks)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from make_tokenizer_fixtures import CHATML, LLAMA3, MISTRAL
    for name, src in (("gen-chatml", CHATML), ("gen-llama3", LLAMA3), ("gen-mistral", MISTRAL)):
        with open(os.path.join(OUT, name + ".jinja"), "w") as f:
            f.write(src)
    toks = {}
    with open(os.path.join(OUT, "conversations.jsonl"), "w") as f:
        for c in CONVERSATIONS:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    n_ok = n_err = 0
    with open(os.path.join(OUT, "expected.jsonl"), "w") as f:
        for name, (bos, eos, tokname) in TEMPLATES.items():
            with open(os.path.join(OUT, name + ".jinja")) as tf:
                template = tf.read()
            for ci, conv in enumerate(CONVERSATIONS):
                for agp in (False, True):
                    rec = {"template": name, "conv": ci, "add_generation_prompt": agp, "bos_token": bos,
                           "eos_token": eos, "now": NOW_UNIX}
                    special = {}
                    if bos is not None:
                        special["bos_token"] = bos
                    if eos is not None:
                        special["eos_token"] = eos
                    try:
                        rendered, _ = render_jinja_template(
                            conversations=[conv["messages"]], tools=conv.get("tools"), chat_template=template,
                            add_generation_prompt=agp, **special)
                        rec["text"] = rendered[0]
                        if tokname:
                            if tokname not in toks:
                                toks[tokname] = Tokenizer.from_file(os.path.join(TOKDIR, tokname, "tokenizer.json"))
                            rec["tokenizer"] = tokname
                            rec["ids"] = toks[tokname].encode(rendered[0], add_special_tokens=False).ids
                        n_ok += 1
                    except Exception as e:  # the template's raise_exception (or a type error): recorded
                        rec["error"] = str(e)
                        n_err += 1
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(f"{n_ok} renders, {n_err} errors -> {OUT}")


if __name__ == "__main__":
    main()
