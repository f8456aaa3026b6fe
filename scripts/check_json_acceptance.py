#!/usr/bin/env python3
# Runs every JSON case below through the tool that reads that file in the Hugging Face stack and
# records what it did, so that tests/unit/test_json_accept.c can hold zero to it without Python:
#   tokenizer.json          tokenizers' Tokenizer.from_file (serde_json), then encode(TEXT) -> ids
#   tokenizer_config.json   transformers' PreTrainedTokenizerFast.from_pretrained (Python's json),
#                           beside the base tokenizer.json -> bos_token_id, eos_token_id
#   config.json             transformers' AutoConfig.from_pretrained (Python's json, then its typed
#                           config classes) -> n_layer n_embd n_head vocab_size n_positions
#
# Usage: python3 scripts/check_json_acceptance.py [OUTDIR]   (needs tokenizers and transformers;
#        default OUTDIR tests/data/json_accept)
#
# OUTDIR/CASE.json   the case's file, byte for byte
# OUTDIR/cases.tsv   one line a case: name, kind (tokenizer | tokenizer_config | config), what the
#                    tool did (accept | refuse), its values (ids, or the fields above; "-" when it
#                    refused), and zero's difference where there is one, as a decision recorded here
#                    (ZERO below; docs/TOKENIZER.md, "JSON: what is read as the tools read it"):
#                      same                    zero does what the tool does (values included)
#                      unsupported:TEXT        the tool accepts, zero refuses with a message holding
#                                              TEXT and "not supported"
#                      lenient:REASON          the tool refuses, zero reads it (values as the base's)
import json
import os
import shutil
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoConfig, PreTrainedTokenizerFast  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data", "json_accept")

# The test string every accepted tokenizer encodes (add_special_tokens=True): unknown characters, an
# added token after a space, a character written with a surrogate pair when escaped.
TEXT = "hello world <s> \u00e9\U0001F600x \u65e5\u672c\u8a9e\U0001F642"

# ---------------------------------------------------------------- tokenizer.json
VOCAB = ["<unk>", "<s>", "</s>", "\u2581", "h", "e", "l", "o", "w", "r", "d", "\u00e9", "\U0001F600",
         "he", "ll", "hell", "hello", "\u2581hello", "\u2581w", "or", "\u2581wor", "ld", "\u2581world"]
MERGES = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("\u2581", "hello"), ("\u2581", "w"),
          ("o", "r"), ("\u2581w", "or"), ("l", "d"), ("\u2581wor", "ld")]


def added(i, content, special=True, **kw):
    a = {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": special}
    a.update(kw)
    return a


def tokenizer(**top):
    t = {"version": "1.0", "truncation": None, "padding": None,
         "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
         "normalizer": None,
         "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
         "post_processor": {"type": "TemplateProcessing",
                            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                     {"Sequence": {"id": "B", "type_id": 1}}],
                            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
         "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
         "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                   "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                   "vocab": {v: i for i, v in enumerate(VOCAB)}, "merges": [a + " " + b for a, b in MERGES]}}
    for k, v in top.items():
        if k.startswith("model_"):
            t["model"][k[6:]] = v
        else:
            t[k] = v
    return t


def dump(obj, ascii=False):
    """One top-level field a line (so that line breaks and CRLF mean something), compact inside."""
    parts = [json.dumps(k) + ": " + json.dumps(v, ensure_ascii=ascii, separators=(", ", ": ")) for k, v in obj.items()]
    return "{\n" + ",\n".join(parts) + "\n}\n"


BASE = dump(tokenizer())


def sub(text, old, new, count=1):
    assert old in text, old
    return text.replace(old, new, count)


def deep(n):
    """A value n arrays deep."""
    return "[" * n + "]" * n


MODEL_AT = '"model": {'
TOK_CASES = [
    # (name, text, zero's difference)
    ("base", BASE, "same"),
    ("crlf", BASE.replace("\n", "\r\n"), "same"),
    ("surrounding_ws", " \t\r\n" + BASE + "\n\n \t\r\n", "same"),
    ("bom", "\ufeff" + BASE, "same"),
    ("ascii_escapes", dump(tokenizer(), ascii=True), "same"),  # every non-ASCII character as \uXXXX, pairs too
    ("escaped_solidus", BASE.replace('"</s>"', '"<\\/s>"'), "same"),
    ("escaped_keys", sub(sub(BASE, '"vocab"', '"\\u0076ocab"'), '"model"', '"mod\\u0065l"'), "same"),
    ("lone_high_surrogate", sub(BASE, '"\u2581w": 18', '"\\ud83d": 18'), "same"),
    ("lone_low_surrogate", sub(BASE, '"\u2581w": 18', '"\\ude00": 18'), "same"),
    ("high_surrogate_then_text", sub(BASE, '"\u2581w": 18', '"\\ud83dw": 18'), "same"),
    ("nul_escape", dump(tokenizer(added_tokens=[added(0, "<unk>"), added(1, "<s>"), added(2, "</s>"),
                                                added(23, "<\u0000>")])),
     "unsupported:\\u0000 (a NUL character) inside a string is not supported"),
    ("long_strings", dump(tokenizer(added_tokens=[added(0, "<unk>"), added(1, "<s>"), added(2, "</s>"),
                                                  added(23, "\u65e5" * 3000, special=False)],
                                    model_vocab={**{v: i for i, v in enumerate(VOCAB)}, "l" * 5000: 24})),
     "same"),
    ("unicode_added", dump(tokenizer(added_tokens=[added(0, "<unk>"), added(1, "<s>"), added(2, "</s>"),
                                                   added(23, "\u65e5\u672c\u8a9e\U0001F642", special=False)])), "same"),
    ("added_flags", dump(tokenizer(added_tokens=[added(0, "<unk>"), added(1, "<s>", lstrip=True, rstrip=True),
                                                 added(2, "</s>", single_word=True, normalized=True)])), "same"),
    ("nulls", dump(tokenizer(pre_tokenizer=None, post_processor=None, decoder=None)), "same"),
    ("added_tokens_null", dump(tokenizer(added_tokens=None)), "same"),
    ("added_tokens_absent", BASE.replace(BASE.split("\n")[4] + "\n", ""), "same"),
    ("truncation_padding", dump(tokenizer(
        truncation={"direction": "Right", "max_length": 512, "strategy": "LongestFirst", "stride": 0},
        padding={"strategy": "BatchLongest", "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                 "pad_type_id": 0, "pad_token": "<unk>"})), "same"),
    ("model_fields_absent", BASE.replace('"dropout": null, ', "").replace('"continuing_subword_prefix": null, ', "")
     .replace('"end_of_word_suffix": null, ', "").replace('"fuse_unk": false, ', "").replace('"byte_fallback": false, ', "")
     .replace('"ignore_merges": false, ', ""), "same"),
    ("fuse_unk", dump(tokenizer(model_fuse_unk=True)), "same"),
    ("ignore_merges", dump(tokenizer(model_ignore_merges=True)), "same"),
    ("dropout_zero", dump(tokenizer(model_dropout=0.0)), "same"),
    ("unknown_model_field", sub(BASE, MODEL_AT, MODEL_AT + '"future_field": {"a": [1, 2.5e3, null]}, '), "same"),
    ("merges_pairs", dump(tokenizer(model_merges=[[a, b] for a, b in MERGES])), "same"),
    ("merges_mixed", dump(tokenizer(model_merges=[a + " " + b for a, b in MERGES[:5]] + [[a, b] for a, b in MERGES[5:]])),
     "same"),
    ("dup_top_last_null", sub(BASE, '"normalizer": null', '"normalizer": {"type": "Prepend", "prepend": "h"}, "normalizer": null'),
     "same"),
    ("dup_top_last_set", sub(BASE, '"normalizer": null', '"normalizer": null, "normalizer": {"type": "Prepend", "prepend": "h"}'),
     "same"),
    ("dup_model_field", sub(BASE, '"fuse_unk": false', '"fuse_unk": true, "fuse_unk": false'), "same"),
    ("dup_vocab_entry", sub(BASE, '"<s>": 1', '"<s>": 7, "<s>": 1'), "same"),
    ("dup_pretokenizer_field", sub(BASE, '"prepend_scheme": "always"', '"prepend_scheme": "never", "prepend_scheme": "always"'),
     "same"),
    ("dup_added_field", sub(BASE, '"special": true', '"special": false, "special": true'),
     "lenient:tokenizers refuses a field twice in an AddedToken (serde's derived struct); zero reads the last"),
    ("unknown_top_field", sub(BASE, '"version": "1.0"', '"version": "1.0", "created_by": "a newer tool"'),
     "lenient:tokenizers refuses a top-level field it does not know; zero reads the fields it knows"),
    ("id_float", sub(BASE, '"<s>": 1', '"<s>": 1.0'),
     "lenient:serde_json refuses 1.0 for a u32; zero reads a whole number written as a float as the integer"),
    ("id_exponent", sub(BASE, '"<s>": 1', '"<s>": 1E0'),
     "lenient:serde_json refuses 1E0 for a u32; zero reads a whole number written as a float as the integer"),
    ("id_negative_zero", sub(BASE, '"<unk>": 0', '"<unk>": -0'),
     "lenient:serde_json reads -0 as the float -0.0 and refuses it for a u32; zero reads it as 0"),
    ("nan", sub(BASE, '"dropout": null', '"dropout": NaN'), "same"),
    ("trailing_comma", BASE[:-3] + ",\n}\n", "same"),
    ("deep_127", sub(BASE, MODEL_AT, MODEL_AT + '"nest": ' + deep(125) + ", "), "same"),
    ("deep_128", sub(BASE, MODEL_AT, MODEL_AT + '"nest": ' + deep(126) + ", "), "same"),
]

# ---------------------------------------------------------------- tokenizer_config.json
CFG = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
       "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}", "clean_up_tokenization_spaces": False,
       "model_max_length": 1000000000000000019884624838656, "tokenizer_class": "PreTrainedTokenizerFast",
       "unk_token": "<unk>"}
CBASE = dump(CFG)
TC_CASES = [
    ("tc_base", CBASE, "same"),
    ("tc_crlf", CBASE.replace("\n", "\r\n"), "same"),
    ("tc_bom", "\ufeff" + CBASE, "same"),
    ("tc_escaped_solidus", sub(CBASE, '"eos_token": "</s>"', '"eos_token": "<\\/s>"'), "same"),
    ("tc_dup_eos", sub(CBASE, '"eos_token": "</s>"', '"eos_token": "<s>", "eos_token": "</s>"'), "same"),
    ("tc_added_token_object", sub(CBASE, '"eos_token": "</s>"', '"eos_token": {"__type": "AddedToken", "content": "</s>", '
                                  '"lstrip": false, "normalized": false, "rstrip": false, "single_word": false, "special": true}'),
     "same"),
    ("tc_null_tokens", sub(sub(CBASE, '"eos_token": "</s>"', '"eos_token": null'), '"bos_token": "<s>"', '"bos_token": null'),
     "same"),
    ("tc_lone_surrogate", sub(CBASE, '"unk_token": "<unk>"', '"unk_token": "<unk>", "x": "\\udc00"'),
     "unsupported:a UTF-16 low surrogate without its high one, is not supported"),
    ("tc_nul_in_template", sub(CBASE, "{{ m['content'] }}", "{{ m['content'] }}\\u0000"),
     "unsupported:\\u0000 (a NUL character) inside a string is not supported"),
    ("tc_deep_200", sub(CBASE, '"unk_token": "<unk>"', '"unk_token": "<unk>", "x": ' + deep(200)),
     "unsupported:nested more than 127 levels deep (at byte"),
    ("tc_nan", sub(CBASE, "1000000000000000019884624838656", "NaN"), "unsupported:NaN is not JSON"),
    ("tc_infinity", sub(CBASE, "1000000000000000019884624838656", "-Infinity"), "unsupported:-Infinity is not JSON"),
]

# ---------------------------------------------------------------- config.json
CONF = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.0, "bos_token_id": 1,
        "embd_pdrop": 0.0, "eos_token_id": 2, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
        "model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_inner": None, "n_layer": 2, "n_positions": 128,
        "resid_pdrop": 0.0, "_name_or_path": "tiny", "tie_word_embeddings": True, "vocab_size": 300}
KBASE = dump(CONF)
CF_CASES = [
    ("cf_base", KBASE, "same"),
    ("cf_crlf_ws", " \r\n" + KBASE.replace("\n", "\r\n") + "\r\n\t ", "same"),
    ("cf_bom", "\ufeff" + KBASE, "same"),
    ("cf_escapes", sub(sub(KBASE, '"gpt2"', '"\\u0067pt2"'), '"tiny"', '"a\\/b \\ud83d\\ude00"'), "same"),
    ("cf_exponent_float", sub(KBASE, "1e-05", "1E-5"), "same"),
    ("cf_negative_zero", sub(KBASE, '"resid_pdrop": 0.0', '"resid_pdrop": -0'), "same"),
    ("cf_dup_key", sub(KBASE, '"n_embd": 64', '"n_embd": 32, "n_embd": 64'), "same"),
    ("cf_deep_100", sub(KBASE, '"tiny"', deep(100)), "same"),
    ("cf_int_as_float", sub(KBASE, '"n_embd": 64', '"n_embd": 64.0'),
     "lenient:transformers 5 refuses a float for an int field; zero reads a whole number written as a float as the integer"),
    ("cf_int_as_exponent", sub(KBASE, '"n_positions": 128', '"n_positions": 1.28E2'),
     "lenient:transformers 5 refuses a float for an int field; zero reads a whole number written as a float as the integer"),
    ("cf_lone_surrogate", sub(KBASE, '"tiny"', '"\\ud800"'),
     "unsupported:a UTF-16 high surrogate without its low one, is not supported"),
    ("cf_nul", sub(KBASE, '"tiny"', '"a\\u0000b"'), "unsupported:\\u0000 (a NUL character) inside a string is not supported"),
    ("cf_deep_200", sub(KBASE, '"tiny"', deep(200)), "unsupported:nested more than 127 levels deep (at byte"),
    ("cf_nan", sub(KBASE, '"resid_pdrop": 0.0', '"resid_pdrop": NaN'), "unsupported:NaN is not JSON"),
    ("cf_trailing_comma", sub(KBASE, '"vocab_size": 300', '"vocab_size": 300,'), "same"),
]


def run_tokenizer(path):
    tok = Tokenizer.from_file(path)
    return " ".join(str(i) for i in tok.encode(TEXT, add_special_tokens=True).ids)


def run_tokenizer_config(path, tmp):
    shutil.copy(os.path.join(OUT, "base.json"), os.path.join(tmp, "tokenizer.json"))
    shutil.copy(path, os.path.join(tmp, "tokenizer_config.json"))
    tok = PreTrainedTokenizerFast.from_pretrained(tmp)
    ids = [tok.bos_token_id, tok.eos_token_id]
    return " ".join("-1" if i is None else str(i) for i in ids)


def run_config(path, tmp):
    shutil.copy(path, os.path.join(tmp, "config.json"))
    c = AutoConfig.from_pretrained(tmp)
    vals = [c.n_layer, c.n_embd, c.n_head, c.vocab_size, c.n_positions]
    if not all(type(v) is int for v in vals):  # what the typed config would hand a model
        raise TypeError("a field is not an int: %r" % (vals,))
    return " ".join(str(v) for v in vals)


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".json") or f == "cases.tsv":
            os.remove(os.path.join(OUT, f))
    lines = []
    for kind, cases in (("tokenizer", TOK_CASES), ("tokenizer_config", TC_CASES), ("config", CF_CASES)):
        for name, text, zero in cases:
            path = os.path.join(OUT, name + ".json")
            with open(path, "wb") as f:
                f.write(text.encode("utf-8", "surrogatepass"))
            tmp = tempfile.mkdtemp()
            try:
                vals = (run_tokenizer(path) if kind == "tokenizer" else
                        run_tokenizer_config(path, tmp) if kind == "tokenizer_config" else run_config(path, tmp))
                did = "accept"
            except Exception as e:  # noqa: BLE001 - any refusal, whatever the tool raises
                did, vals = "refuse", "-"
                why = str(e).replace("\n", " ")[:100]
            finally:
                shutil.rmtree(tmp)
            if zero.startswith("unsupported:") and did != "accept":
                sys.exit("%s: recorded as unsupported by zero, but the tool refuses it too" % name)
            if zero.startswith("lenient:") and did != "refuse":
                sys.exit("%s: recorded as zero being lenient, but the tool accepts it" % name)
            print("%-26s %-16s %-6s %s" % (name, kind, did, vals if did == "accept" else why))
            lines.append("\t".join((name, kind, did, vals, zero)))
    with open(os.path.join(OUT, "cases.tsv"), "w") as f:
        f.write("# written by scripts/check_json_acceptance.py: name, kind, what the tool did, its values, zero's "
                "difference\n")
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
