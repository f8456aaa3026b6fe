#!/usr/bin/env python3
# scripts/make_gguf_tokenizer_fixtures.py — two tokenizers of the families the GGUF export names,
# beside those of make_tokenizer_fixtures.py (whose corpus is Debian's fortunes package), trained on
# the committed fortunes sample and the unicode lines, each with the ids files make_tokenizer_fixtures.py
# writes for its tokenizers (tests/data/tokenizer/NAME.{fortunes,unicode,doc,pc}.ids, NAME.decode.txt):
#
# llama2_spm — a SentencePiece tokenizer as Llama 2 and Mistral v0.1 ship theirs. The other
# SentencePiece-style fixtures (llama2, mistral, metaspace) are BPE models trained by Hugging Face
# `tokenizers` in SentencePiece's layout; this one is trained by `sentencepiece` itself (BPE, byte
# fallback, identity normalization, a dummy prefix — Llama 2's settings) and converted to
# tokenizer.json by transformers (AutoTokenizer on its tokenizer.model), so its merges are what the
# conversion of a real SentencePiece vocabulary gives: every split of a piece, grouped by the piece
# they make. The converter of transformers 5 writes a Metaspace pre-tokenizer; the file is rewritten
# to the normalizer Llama 2's and Mistral v0.1's tokenizer.json have (Prepend + Replace, no
# pre-tokenizer), with Llama 2's BOS post-processor and unk_token. Checked here: the rewritten
# tokenizer gives sentencepiece's own ids for every line of the corpus and the unicode lines (but
# those that hold <s>, </s> or <unk>, which tokenizer.json matches as tokens and sentencepiece as text).
#
# tekken — a byte-level BPE with the pre-tokenizer of Mistral Nemo's tokenizer.json ("tekken" in
# llama.cpp: its split regex, then ByteLevel without its own regex), trained by `tokenizers`.
#
# Needs PyPI sentencepiece, tokenizers, transformers, protobuf (no torch). Run from the root:
#     python3 scripts/make_gguf_tokenizer_fixtures.py
import json
import os
import sys
import tempfile

import sentencepiece as spm
from tokenizers import Regex, Tokenizer, pre_tokenizers, processors

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import make_tokenizer_fixtures as mtf  # noqa: E402  (the texts and the ids files' writers)

OUT = os.path.join(ROOT, "tests", "data", "tokenizer")
META = "\u2581"
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
          r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def write_fixture(name, tok, j, cfg, sample_lines, ulines, udata):
    out = os.path.join(OUT, name)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f)
    mtf.write_ids(os.path.join(OUT, name + ".fortunes.ids"), [tok.encode(l).ids for l in sample_lines])
    mtf.write_ids(os.path.join(OUT, name + ".unicode.ids"), [tok.encode(l).ids for l in ulines])
    mtf.write_ids(os.path.join(OUT, name + ".doc.ids"),
                  [tok.encode(udata.decode("utf-8", errors="replace"), add_special_tokens=False).ids])
    with open(os.path.join(OUT, name + ".decode.txt"), "wb") as f:
        for l in ulines + sample_lines[:30]:
            f.write(tok.decode(tok.encode(l).ids, skip_special_tokens=False).encode("utf-8") + b"\n")
    rows = []
    for pc in mtf.PCS:
        text = pc["prompt"] + pc["completion"]
        e = tok.encode(text)
        m = mtf.spans_mask(e.offsets, len(pc["prompt"]), len(text))
        m = [0 if s else x for x, s in zip(m, e.special_tokens_mask)]
        rows.append(e.ids + ["|"] + m)
    mtf.write_ids(os.path.join(OUT, name + ".pc.ids"), rows)
    print("wrote", name, len(j["model"]["vocab"]), "tokens,", len(j["model"]["merges"]), "merges")


def main():
    import transformers

    sample = open(os.path.join(OUT, "fortunes.txt"), encoding="utf-8").read()
    udata = open(os.path.join(OUT, "unicode.txt"), "rb").read()
    sample_lines = sample.split("\n")[:-1]
    ulines = [l.decode("utf-8", errors="replace") for l in udata.split(b"\n")[:-1]]
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.write("\n".join(l for l in sample_lines + mtf.UNICODE_LINES * 3 if l.strip()) + "\n")
        spm.SentencePieceTrainer.train(
            input=corpus, model_prefix=os.path.join(tmp, "sp"), vocab_size=700, model_type="bpe", byte_fallback=True,
            normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=True,
            character_coverage=0.9995, split_digits=True, allow_whitespace_only_pieces=True, unk_id=0, bos_id=1,
            eos_id=2, pad_id=-1, minloglevel=2)
        d = os.path.join(tmp, "hf")
        os.makedirs(d)
        os.rename(os.path.join(tmp, "sp.model"), os.path.join(d, "tokenizer.model"))
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>",
                       "unk_token": "<unk>", "legacy": True}, f)
        transformers.AutoTokenizer.from_pretrained(d).save_pretrained(os.path.join(tmp, "out"))
        j = json.load(open(os.path.join(tmp, "out", "tokenizer.json"), encoding="utf-8"))
        sp = spm.SentencePieceProcessor(model_file=os.path.join(d, "tokenizer.model"))
        j["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": META},
            {"type": "Replace", "pattern": {"String": " "}, "content": META}]}
        j["pre_tokenizer"] = None
        j["model"]["unk_token"] = "<unk>"  # as Llama 2's tokenizer.json names it (the converter leaves it out)
        j["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
        tok = Tokenizer.from_str(json.dumps(j))
        for l in sample_lines + mtf.UNICODE_LINES:  # (tokenizer.json matches <s> and </s> in text, sentencepiece not)
            if not any(x in l for x in ("<s>", "</s>", "<unk>")):
                a, b = tok.encode(l, add_special_tokens=False).ids, sp.encode(l)
                assert a == b, (l, a, b)
    write_fixture("llama2_spm", tok, j, {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
                  sample_lines, ulines, udata)

    pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(TEKKEN), behavior="isolated", invert=False),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok = mtf.train_bytelevel(sample_lines + mtf.UNICODE_LINES * 3, 800, pre, ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    write_fixture("tekken", tok, json.loads(tok.to_str()), {"bos_token": "<s>", "eos_token": "</s>"}, sample_lines,
                  ulines, udata)


if __name__ == "__main__":
    main()
