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
#                        "eos_token", "now", "text"} or "error" (the template's exception text) and
#                        "error_type" (TemplateError: its raise_exception; TypeError: Python's);
#                        "tokenizer" and "ids" (tok.encode(text, add_special_tokens=False), as
#                        apply_chat_template(tokenize=True) encodes) where a tokenizer fixture fits
#   masks.jsonl          one chat a line where a tokenizer fits (no generation prompt): {"template",
#                        "conv", "tokenizer", "bos_token", "eos_token", "ids", "mask"}, the assistant-turn loss mask zero trains
#                        with (turn_masks: the rule of docs/TOKENIZER.md over transformers' renders)
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
    # 15-19: what chat JSONL holds beyond role and content, as zero train passes it through (OpenAI's
    # form: arguments as a JSON string, content null beside tool_calls; a tool result's name; two
    # calls at once; reasoning_content; a key no template reads)
    {"messages": [m("system", "Use the tools."), m("user", "Weather in Oslo for 3 days?"),
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "call0oslo", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 3}"}}]},
                  {"role": "tool", "name": "get_weather", "tool_call_id": "call0oslo",
                   "content": "{\"temp\": -4, \"sky\": \"snow\"}"},
                  m("assistant", "Snow, about -4 °C.")], "tools": TOOLS},
    {"messages": [m("user", "Paris and Rome?"),
                  {"role": "assistant", "content": "Checking both.", "tool_calls": [
                      {"id": "call1pari", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                      {"id": "call2rome", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Rome", "days": 1}}}]},
                  {"role": "tool", "tool_call_id": "call1pari", "content": "sunny"},
                  {"role": "tool", "tool_call_id": "call2rome", "content": "rain"},
                  m("assistant", "Paris: sunny. Rome: rain.")], "tools": TOOLS},
    {"messages": [m("user", "2+2?"), {"role": "assistant", "content": "4", "reasoning_content": "Two and two."},
                  m("user", "And 3+3?"),
                  {"role": "assistant", "content": "6", "reasoning_content": "\nThree and three is six.\n"}]},
    {"messages": [m("user", "Weather in Lima?"),
                  {"role": "assistant", "content": "", "reasoning_content": "A tool knows.", "tool_calls": [
                      {"id": "call3lima", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Lima"}}}]},
                  {"role": "tool", "tool_call_id": "call3lima", "content": "fog"},
                  {"role": "assistant", "content": "Foggy.", "reasoning_content": "Say it."}], "tools": TOOLS},
    {"messages": [{"role": "system", "content": "Be brief.", "name": "policy"},
                  {"role": "user", "content": "Hi!", "name": "ana", "weight": 0},
                  {"role": "assistant", "content": "Hello, Ana.", "weight": 1}]},
]

# The loss mask zero trains with, computed here from transformers' renders and tokenizers' offsets
# (docs/TOKENIZER.md, "The loss mask"): each assistant message's span is the bytes that change when
# its content, reasoning_content and tool calls are replaced by a one-character sentinel (turn_variant);
# a turn with tool calls or reasoning also reaches back to the end of the chat before it rendered with
# the generation prompt, and on to the last special token of the chat rendered up to it (where those
# renders are prefixes of the whole; else on to the first special token after it); a token is trained
# when it meets a span, or is a special token starting where one ends.
SENTINELS = ["\x7f", "\x1e", "\x1f", "\x1d", "\x1c"]
TURN_KEYS = ("tool_calls", "reasoning_content")


def render(template, messages, tools, agp, special):
    return render_jinja_template(conversations=[messages], tools=tools, chat_template=template,
                                 add_generation_prompt=agp, **special)[0][0]


def holds(v, c):
    if isinstance(v, str):
        return c in v
    if isinstance(v, dict):
        return any(c in k or holds(x, c) for k, x in v.items())
    if isinstance(v, list):
        return any(holds(x, c) for x in v)
    return False


def turn_variant(msg, alt):
    o = json.loads(json.dumps(msg))
    o["content"] = alt
    if isinstance(o.get("reasoning_content"), str):
        o["reasoning_content"] = alt
    for c in o.get("tool_calls") or []:
        if isinstance(c.get("id"), str):
            c["id"] = alt * len(c["id"])
        f = c.get("function")
        if isinstance(f, dict):
            f["name"] = alt
            if "arguments" in f:
                f["arguments"] = alt if isinstance(f["arguments"], str) else {}
    return o


def prefix_len(template, messages, tools, agp, special, full):
    try:
        t = render(template, messages, tools, agp, special).encode()
    except Exception:
        return 0
    return len(t) if full.startswith(t) else 0


def turn_masks(template, conv, special, tok, text):
    full = text.encode()
    msgs, tools = conv["messages"], conv.get("tools")
    spans = []
    for k, msg in enumerate(msgs):
        if msg["role"] != "assistant":
            continue
        alt = next(c for c in SENTINELS if not holds(msg, c))
        other = msgs[:k] + [turn_variant(msg, alt)] + msgs[k + 1:]
        o = render(template, other, tools, False, special).encode()
        p = 0
        while p < len(full) and p < len(o) and full[p] == o[p]:
            p += 1
        s = 0
        while s < len(full) - p and s < len(o) - p and full[-1 - s] == o[-1 - s]:
            s += 1
        lo, hi, cap, first = p, len(full) - s, 0, False
        if any(msg.get(key) is not None for key in TURN_KEYS):
            a = prefix_len(template, msgs[:k], tools, True, special, full)
            b = prefix_len(template, msgs[:k + 1], tools, False, special, full)
            if a and a < lo:
                lo = a
            if b > hi:
                cap = b
            elif hi < len(full):  # the chat up to it renders otherwise: on to the first special token
                cap, first = len(full), True
        spans.append([lo, hi, cap, first])
    enc = tok.encode(text, add_special_tokens=False)
    # byte offsets of each token's start (tokenizers gives characters)
    char_to_byte = [0]
    for ch in text:
        char_to_byte.append(char_to_byte[-1] + len(ch.encode()))
    starts = [char_to_byte[a] for a, _ in enc.offsets]
    ends = starts[1:] + [len(full)]
    special_ids = {i for i, t in tok.get_added_tokens_decoder().items() if t.special}
    for sp in spans:  # a capped span ends with the last (first) special token that starts in [hi, cap)
        last = sp[1]
        for i, a in enumerate(starts):
            if sp[2] and sp[1] <= a < sp[2] and enc.ids[i] in special_ids:
                last = ends[i]
                if sp[3]:
                    break
        sp[2] = last
    mask = []
    for i, a in enumerate(starts):
        e = ends[i]
        v = 0
        for lo, hi, cap, _ in spans:
            end = max(hi, cap)
            meets = (lo <= a < end) if e <= a else (a < end and e > lo)
            if meets or (a == hi and enc.ids[i] in special_ids):
                v = 1
        mask.append(v)
    return enc.ids, mask


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
    n_ok = n_err = n_mask = 0
    fm = open(os.path.join(OUT, "masks.jsonl"), "w")
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
                        rendered = [render(template, conv["messages"], conv.get("tools"), agp, special)]
                        rec["text"] = rendered[0]
                        if tokname:
                            if tokname not in toks:
                                toks[tokname] = Tokenizer.from_file(os.path.join(TOKDIR, tokname, "tokenizer.json"))
                            rec["tokenizer"] = tokname
                            rec["ids"] = toks[tokname].encode(rendered[0], add_special_tokens=False).ids
                            if not agp and name != "llama-3.2":  # its date is today's in zero train
                                ids, mask = turn_masks(template, conv, special, toks[tokname], rendered[0])
                                assert ids == rec["ids"]
                                fm.write(json.dumps({"template": name, "conv": ci, "tokenizer": tokname, "bos_token": bos,
                                                     "eos_token": eos, "ids": ids, "mask": mask}) + "\n")
                                n_mask += 1
                        n_ok += 1
                    except Exception as e:  # the template's raise_exception (or a type error): recorded
                        rec["error"] = str(e)
                        rec["error_type"] = type(e).__name__  # TemplateError: raise_exception's
                        n_err += 1
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    fm.close()
    print(f"{n_ok} renders, {n_err} errors, {n_mask} masks -> {OUT}")


if __name__ == "__main__":
    main()
