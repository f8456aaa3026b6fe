#!/usr/bin/env python3
# Writes the tokenizer exactness fixtures under tests/data/tokenizer/: small tokenizers of both BPE
# families TRAINED here with Hugging Face `tokenizers` (PyPI), their expected ids, and chat renderings.
#
# Usage: python3 scripts/make_tokenizer_fixtures.py [OUTDIR]   (needs tokenizers and transformers)
#
# For every tokenizer NAME (configs below reproduce the pre-tokenizer/normalizer/decoder/post-processor
# layouts of GPT-2, Llama 3, Qwen 2, SmolLM2, Llama 2 and Mistral with a small vocabulary, plus a
# splitting Metaspace and a ByteLevel with add_prefix_space):
#   NAME/tokenizer.json (+ tokenizer_config.json for some: bos/eos names)
#   NAME.fortunes.ids   one line per line of fortunes.txt: tok.encode(line).ids (add_special_tokens)
#   NAME.unicode.ids    the same for unicode.txt (lines split on b"\n" only; invalid UTF-8 is decoded
#                       with errors="replace", as any Python caller of tokenizers must)
#   NAME.doc.ids        the whole of unicode.txt as one string, add_special_tokens=False
#   NAME.decode.txt     tok.decode(tok.encode(line).ids) of each unicode line, then of 30 fortunes lines
#   NAME.chat.ids       for the chat tokenizers: per chat of chats.jsonl, "ids\tmask" from
#                       transformers' apply_chat_template with the built-in format's Jinja template
#                       (with {% generation %} blocks, return_assistant_tokens_mask=True)
#   NAME.pc.ids         prompt/completion examples of pc.jsonl: ids of tok.encode(prompt + completion)
#                       and the mask of tokens whose character span meets the completion
import json
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data", "tokenizer")
FORTUNES = "/usr/share/games/fortunes"

GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PAT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN2_PAT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def fortunes_text():
    """The training corpus: every regular file of Debian's fortunes package, in name order."""
    parts = []
    for name in sorted(os.listdir(FORTUNES)):
        p = os.path.join(FORTUNES, name)
        if name.startswith(".") or name.endswith(".dat") or os.path.islink(p) or not os.path.isfile(p):
            continue
        with open(p, "rb") as f:
            parts.append(f.read().decode("utf-8", errors="replace"))
    return "".join(parts)


def fortunes_sample(text):
    """About 13 KB of lines: every 199th non-empty line of the corpus, for the committed sample."""
    lines = [l for l in text.split("\n") if l.strip()]
    return "\n".join(lines[::199]) + "\n"


UNICODE_LINES = [
    "Café, naïve façade — déjà vu; Œuvre, Straße, smörgåsbord, Ångström, crème brûlée.",
    "Decomposed: e\u0301 a\u0308 o\u0302 n\u0303 A\u030a and Hangul jamo \u1100\u1161\u11a8 vs \uac01.",
    "Stacked marks: Z\u0334\u0321\u031b\u034ea\u0338l\u0337g\u0336o\u0335 and q\u0307\u0323 and \u0915\u094d\u0937.",
    "日本語のテキストと漢字、ひらがな、カタカナ。中文：你好，世界！한국어 문장입니다.",
    "Emoji: 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ 🤖🧪 ✨ (and 😀😀😀 in a row)",
    "RTL: שלום עולם and مرحبا بالعالم; Devanagari: नमस्ते दुनिया; Thai: สวัสดีชาวโลก",
    "Digits: 1234567890123 and 3.14159 and 1,000,000 and ٣٤٥ and ² ½ Ⅻ",
    "Spaces:" + " " * 40 + "end" + "\t\t\ttabs" + " " * 7,
    "   leading spaces, then \u00a0nbsp\u3000ideographic\u2003em\u202fnarrow\u205fmath",
    "Contractions: don't, I'LL, she's, they've, we'd, you're, I'm, O'Neil's 'quoted'",
    "Specials in text: <|endoftext|> <s> </s> [INST] hi [/INST] <|im_start|>user<|im_end|> <0x41>",
    "Added tokens: x <|lstrip|> y <|rstrip|>   z Zebra, aZebra Zebras (Zebra) <|lstrip|><|rstrip|>",
    "Carriage\rreturn and form\x0cfeed and \x0bvertical and \x1cfile sep",
    "Zero width: a\u200bb c\u200dd e\ufeff f \u2060g; soft\u00adhyphen",
    "Punctuation!!! ??? ... --- *** ### $$$ %%% &&& @@@ ((())) [[[]]] {{{}}} <<<>>> ~~~ ```",
    "Mixed ALLCAPS and CamelCaseWords and snake_case_names and kebab-case-names and x86_64",
    "",
    "     ",
    "Long word: " + "supercalifragilisticexpialidocious" * 3 + " and " + "ab" * 40,
    "Kelvin \u212a, long s \u017f, ligature \ufb01, fullwidth ＡＢＣ１２３, circled ①②③",
    "Math: ∀x∈ℝ, ∃y: x²+y²≥0 ⇒ √(x²)=|x| ∑∫∂∇",
]
INVALID_LINES = [
    b"Invalid bytes: \xff\xfe and \xc3( and \xe2\x82 and overlong \xc0\xaf and surrogate \xed\xa0\x80 end",
    b"More invalid: \xf4\x90\x80\x80 \x80\x80 \xf0\x9f\x98 truncated emoji, lone \xc2",
]


def unicode_bytes():
    data = b"\n".join(l.encode("utf-8") for l in UNICODE_LINES[:11])
    data += b"\n" + INVALID_LINES[0] + b"\n"
    data += b"\n".join(l.encode("utf-8") for l in UNICODE_LINES[11:])
    data += b"\n" + INVALID_LINES[1] + b"\n"
    return data


def byte_tokens_into_vocab(tok, specials):
    """SentencePiece-style: <0x00>..<0xFF> in the model vocabulary right after the specials (as
    Llama 2 has them), not as added tokens."""
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    ns = len(specials)
    new = {}
    for t, i in vocab.items():
        new[t] = i if i < ns else i + 256
    for b in range(256):
        new["<0x%02X>" % b] = ns + b
    j["model"]["vocab"] = new
    return Tokenizer.from_str(json.dumps(j))


def train_bytelevel(corpus, vocab_size, pre, specials, added=()):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre
    tr = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, tr)
    tok.decoder = decoders.ByteLevel()
    if added:
        tok.add_tokens(list(added))
    return tok


def train_sentencepiece(corpus, vocab_size, specials):
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tr = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, limit_alphabet=70,
                             show_progress=False)
    tok.train_from_iterator(corpus, tr)
    return byte_tokens_into_vocab(tok, specials)


def make_tokenizers(corpus):
    toks = {}
    # GPT-2: ByteLevel pre-tokenizer with its built-in regex; legacy "a b" merges (rewritten below).
    t = train_bytelevel(corpus, 700, pre_tokenizers.ByteLevel(add_prefix_space=False), ["<|endoftext|>"])
    t.post_processor = processors.ByteLevel(trim_offsets=False)
    toks["gpt2"] = (t, {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"})
    # Llama 3: Split(regex) + ByteLevel(use_regex=False), ignore_merges, BOS by TemplateProcessing.
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    sp = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    t = train_bytelevel(corpus, 800, pre, sp)
    j = json.loads(t.to_str())
    j["model"]["ignore_merges"] = True
    t = Tokenizer.from_str(json.dumps(j))
    t.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", 0)])])
    toks["llama3"] = (t, {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"})
    # Qwen 2: NFC, Split(regex, single digits) + ByteLevel(use_regex=False), no BOS.
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    t = train_bytelevel(corpus, 800, pre, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    t.normalizer = normalizers.NFC()
    t.post_processor = processors.ByteLevel(trim_offsets=False)
    toks["qwen2"] = (t, {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})
    # SmolLM2: Digits(individual) + ByteLevel(regex); extra added tokens with lstrip/rstrip/single_word.
    pre = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    added = [AddedToken("<|lstrip|>", lstrip=True, special=True, normalized=False),
             AddedToken("<|rstrip|>", rstrip=True, special=False, normalized=False),
             AddedToken("Zebra", single_word=True, special=False, normalized=True)]
    t = train_bytelevel(corpus, 700, pre, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], added)
    toks["smollm2"] = (t, {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"})
    # Llama 2: legacy normalizer Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer, byte fallback.
    t = train_sentencepiece(corpus, 700, ["<unk>", "<s>", "</s>"])
    t.pre_tokenizer = None
    t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    t.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                   decoders.Strip(" ", 1, 0)])
    t.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                     special_tokens=[("<s>", 1)])
    toks["llama2"] = (t, {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})
    # Mistral: Metaspace(prepend_scheme first, split false) pre-tokenizer, Metaspace decoder.
    t = train_sentencepiece(corpus, 700, ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"])
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    t.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁", prepend_scheme="first"),
                                   decoders.ByteFallback(), decoders.Fuse()])
    t.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                     special_tokens=[("<s>", 1)])
    toks["mistral"] = (t, {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})
    # Metaspace that splits (prepend_scheme always), Metaspace decoder, no post-processor.
    t = train_sentencepiece(corpus, 600, ["<unk>", "<s>", "</s>"])
    t.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True),
                                   decoders.ByteFallback(), decoders.Fuse()])
    toks["metaspace"] = (t, {"eos_token": "</s>"})
    # ByteLevel with add_prefix_space (RoBERTa-style): a space before every word that lacks one.
    t = train_bytelevel(corpus, 600, pre_tokenizers.ByteLevel(add_prefix_space=True), ["<|endoftext|>"])
    toks["gpt2_prefix"] = (t, {"eos_token": "<|endoftext|>"})
    return toks


# The built-in chat formats, written as Jinja with {% generation %} blocks (the spans whose tokens
# carry loss). zero renders the same text in C (src/data/chat.c) without executing Jinja.
CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' }}"
          "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] + '<|im_end|>' }}{% endgeneration %}"
          "{% else %}{{ m['content'] + '<|im_end|>' }}{% endif %}{{ '\n' }}{% endfor %}")
LLAMA3 = ("{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' }}"
          "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] | trim + '<|eot_id|>' }}{% endgeneration %}"
          "{% else %}{{ m['content'] | trim + '<|eot_id|>' }}{% endif %}{% endfor %}")
MISTRAL = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set sys = messages[0]['content'] + '\n\n' %}"
           "{% set msgs = messages[1:] %}{% else %}{% set sys = '' %}{% set msgs = messages %}{% endif %}"
           "{% for m in msgs %}{% if m['role'] == 'user' %}"
           "{% if loop.first %}{{ '[INST] ' + sys + m['content'] + ' [/INST]' }}{% else %}{{ '[INST] ' + m['content'] + ' [/INST]' }}{% endif %}"
           "{% else %}{% generation %}{{ m['content'] + eos_token }}{% endgeneration %}{% endif %}{% endfor %}")
CHAT_FORMATS = {"qwen2": CHATML, "smollm2": CHATML, "llama3": LLAMA3, "mistral": MISTRAL}

CHATS = [
    [{"role": "user", "content": "Hello! What is a fortune cookie?"},
     {"role": "assistant", "content": "A crisp cookie with a paper fortune inside."}],
    [{"role": "system", "content": "You are terse."},
     {"role": "user", "content": "Name a prime."},
     {"role": "assistant", "content": " 7 "},
     {"role": "user", "content": "Another, in 日本語?"},
     {"role": "assistant", "content": "十三 (13) 🎉\nDone."}],
    [{"role": "user", "content": "  spaces around  "},
     {"role": "assistant", "content": "\n\nnewlines first, café"}],
]
PCS = [
    {"prompt": "Q: What is 2+2?\nA:", "completion": " 4"},
    {"prompt": "Translate to French: cheese", "completion": " fromage, s'il vous plaît"},
    {"prompt": "Emoji for joy ", "completion": "😀 and more😀"},
]


def write_ids(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(" ".join(map(str, r)) + "\n")


def spans_mask(offsets, lo, hi):
    return [1 if (s < hi and e > lo) or (s == e and lo <= s < hi) else 0 for s, e in offsets]


def main():
    import transformers
    os.makedirs(OUT, exist_ok=True)
    corpus_text = fortunes_text()
    sample = fortunes_sample(corpus_text)
    udata = unicode_bytes()
    with open(os.path.join(OUT, "fortunes.txt"), "w") as f:
        f.write(sample)
    with open(os.path.join(OUT, "unicode.txt"), "wb") as f:
        f.write(udata)
    with open(os.path.join(OUT, "chats.jsonl"), "w") as f:
        for c in CHATS:
            f.write(json.dumps({"messages": c}, ensure_ascii=False) + "\n")
    with open(os.path.join(OUT, "pc.jsonl"), "w") as f:
        for pc in PCS:
            f.write(json.dumps(pc, ensure_ascii=False) + "\n")
    # Train on the corpus plus the unicode lines (so that some non-ASCII merges exist).
    corpus = corpus_text.split("\n") + [l for l in UNICODE_LINES] * 3
    sample_lines = sample.split("\n")[:-1]
    ulines = [l.decode("utf-8", errors="replace") for l in udata.split(b"\n")[:-1]]
    for name, (tok, cfg) in make_tokenizers(corpus).items():
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        j = json.loads(tok.to_str())
        if name == "gpt2":  # the legacy serialisation of merges: "a b"
            j["model"]["merges"] = [a + " " + b for a, b in j["model"]["merges"]]
            tok = Tokenizer.from_str(json.dumps(j))
        with open(os.path.join(d, "tokenizer.json"), "w") as f:
            json.dump(j, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump(cfg, f, ensure_ascii=False)
        write_ids(os.path.join(OUT, name + ".fortunes.ids"), [tok.encode(l).ids for l in sample_lines])
        write_ids(os.path.join(OUT, name + ".unicode.ids"), [tok.encode(l).ids for l in ulines])
        write_ids(os.path.join(OUT, name + ".doc.ids"),
                  [tok.encode(udata.decode("utf-8", errors="replace"), add_special_tokens=False).ids])
        # decode checks: the decoded text of every unicode line and 30 fortunes lines (skip_special=False)
        with open(os.path.join(OUT, name + ".decode.txt"), "wb") as f:
            for l in ulines + sample_lines[:30]:
                f.write(tok.decode(tok.encode(l).ids, skip_special_tokens=False).encode("utf-8") + b"\n")
        eos = cfg["eos_token"]
        # prompt/completion: ids of prompt + completion with special tokens, mask on the completion
        rows = []
        for pc in PCS:
            text = pc["prompt"] + pc["completion"]
            e = tok.encode(text)
            m = spans_mask(e.offsets, len(pc["prompt"]), len(text))
            m = [0 if s else x for x, s in zip(m, e.special_tokens_mask)]
            rows.append(e.ids + ["|"] + m)
        write_ids(os.path.join(OUT, name + ".pc.ids"), rows)
        if name in CHAT_FORMATS:
            ht = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **cfg)
            rows = []
            for c in CHATS:
                out = ht.apply_chat_template(c, chat_template=CHAT_FORMATS[name], tokenize=True, return_dict=True,
                                             return_assistant_tokens_mask=True)
                rows.append(list(out["input_ids"]) + ["|"] + list(out["assistant_masks"]))
            write_ids(os.path.join(OUT, name + ".chat.ids"), rows)
            # the rendered text too, for the C renderer's own check
            with open(os.path.join(OUT, name + ".chat.txt"), "w") as f:
                for c in CHATS:
                    f.write(json.dumps(ht.apply_chat_template(c, chat_template=CHAT_FORMATS[name], tokenize=False),
                                       ensure_ascii=False) + "\n")
        print("wrote", name, len(j["model"]["vocab"]), "model tokens")


if __name__ == "__main__":
    main()
