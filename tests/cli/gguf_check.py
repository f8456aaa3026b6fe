#!/usr/bin/env python3
# tests/cli/gguf_check.py — checks a GGUF file `zero export --format gguf` wrote against the
# safetensors export of the same checkpoint and the model directory's own files (test_gguf.sh).
# Standard library only: the file is parsed here from the format's definition; the optional
# `gguf` package (llama.cpp's reader) and `llama_cpp` (llama.cpp itself) are the independent
# checks run by `gguf_check.py package` and `gguf_check.py generate` when they are installed.
#
#   gguf_check.py values FILE.gguf EXPORT.safetensors MODEL_DIR TYPE
#       every tensor: the parameter it comes from, in llama.cpp's layout (q/k rows of the llama
#       architecture interleaved per head, GPT-2's Conv1D weights transposed), f32 exactly, f16/bf16
#       the round-to-nearest-even of the fp32 value, q8_0 bitwise ggml's reference blocks (and
#       within half a step of the value); the metadata: hyperparameters from config.json, the
#       tokens, types, merges, special ids and chat template from tokenizer.json and
#       tokenizer_config.json; for a SentencePiece tokenizer llama.cpp's "llama" model: no merges,
#       each piece's score minus the rank of the first merge that makes it, byte and unknown types
#   gguf_check.py fixture FILE.gguf FIXTURE.json
#       an f32 file's metadata and tensor list against what llama.cpp's converter wrote for the same
#       model (tests/data/gguf/, scripts/make_gguf_fixtures.py), key by key
#   gguf_check.py package FILE.gguf EXPORT.safetensors     (needs `gguf`: exit 77 without it)
#   gguf_check.py adapter ADAPTER.gguf PEFT_DIR MODEL_DIR
#       a GGUF LoRA adapter against PEFT's export of the same adapters
#   gguf_check.py generate FILE.gguf PROMPT_IDS NEW_TOKENS [ADAPTER.gguf]  (needs `llama_cpp`: exit 77)
#   gguf_check.py tokenize_ids FILE.gguf TEXT IDS [--skip-marks]  llama.cpp's ids of each line = IDS's (`llama_cpp`)
#       prints llama.cpp's greedy tokens after the prompt ids (with the LoRA adapter applied)
import array
import json
import math
import os
import re
import struct
import sys
import unicodedata

VTYPES = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
TNAMES = {0: "f32", 1: "f16", 8: "q8_0", 30: "bf16"}


def read_gguf(path):
    b = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, b, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("<Q")
        s = b[pos:pos + n]
        pos += n
        return s

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            it, n = take("<I"), take("<Q")
            return [value(it) for _ in range(n)]
        return take(VTYPES[t])

    assert take("<I") == 0x46554747, "magic"
    assert take("<I") == 3, "version"
    nt, nkv = take("<Q"), take("<Q")
    kv = {}
    for _ in range(nkv):
        k = string().decode()
        assert k not in kv, "duplicate key " + k
        kv[k] = value(take("<I"))
    infos = []
    for _ in range(nt):
        name = string().decode()
        nd = take("<I")
        ne = [take("<Q") for _ in range(nd)]
        infos.append((name, ne, take("<I"), take("<Q")))
    align = kv.get("general.alignment", 32)
    start = (pos + align - 1) // align * align
    assert not b[pos:start].strip(b"\0"), "header padding not zero"
    tensors, end = {}, start
    for name, ne, t, off in infos:
        assert off % align == 0, (name, off)
        n = math.prod(ne)
        nbytes = {0: 4 * n, 1: 2 * n, 30: 2 * n, 8: n // 32 * 34}[t]
        assert start + off >= end, "overlapping tensor data at " + name
        tensors[name] = (TNAMES[t], ne, b[start + off:start + off + nbytes])
        end = start + off + nbytes
    assert end == len(b), ("file length", end, len(b))
    return kv, tensors


def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack_from("<Q", b)[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", (k, v["dtype"])
        s, e = v["data_offsets"]
        a = array.array("f")
        a.frombytes(b[8 + n + s:8 + n + e])
        out[k] = (v["shape"], a)
    return out


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bf16_bits(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    return (u + 0x7FFF + ((u >> 16) & 1)) >> 16


def roundf(x):  # C's roundf: halves away from zero
    return math.copysign(math.floor(abs(x) + 0.5), x)


def q8_0(vals):
    out = bytearray()
    for i in range(0, len(vals), 32):
        blk = vals[i:i + 32]
        d = f32(max(abs(v) for v in blk) / 127)
        inv = f32(1 / d) if d else 0.0
        out += struct.pack("<e", d)
        out += struct.pack("<32b", *[int(roundf(f32(v * inv))) for v in blk])
    return bytes(out)


def expected(cfg, st):
    """GGUF name -> (values in llama.cpp's row order, shape outermost first), from the fp32 export."""
    arch = cfg["architectures"][0]
    out = {}
    if arch == "GPT2LMHeadModel":
        def conv(name):  # Conv1D (in, out) -> (out, in)
            (i, o), a = st[name]
            return [a[r * o + c] for c in range(o) for r in range(i)], [o, i]
        out["token_embd.weight"] = (st["wte.weight"][1], st["wte.weight"][0])
        out["position_embd.weight"] = (st["wpe.weight"][1], st["wpe.weight"][0])
        for l in range(cfg["n_layer"]):
            p = "h.%d." % l
            m = {"attn_norm": "ln_1", "ffn_norm": "ln_2"}
            for g, h in m.items():
                for s in ("weight", "bias"):
                    out["blk.%d.%s.%s" % (l, g, s)] = (st[p + h + "." + s][1], st[p + h + "." + s][0])
            for g, h in {"attn_qkv": "attn.c_attn", "attn_output": "attn.c_proj", "ffn_up": "mlp.c_fc",
                         "ffn_down": "mlp.c_proj"}.items():
                out["blk.%d.%s.weight" % (l, g)] = conv(p + h + ".weight")
                out["blk.%d.%s.bias" % (l, g)] = (st[p + h + ".bias"][1], st[p + h + ".bias"][0])
        out["output_norm.weight"] = (st["ln_f.weight"][1], st["ln_f.weight"][0])
        out["output_norm.bias"] = (st["ln_f.bias"][1], st["ln_f.bias"][0])
        return out
    heads, kv_heads = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    interleave = arch in ("LlamaForCausalLM", "MistralForCausalLM")

    def perm(name, n_head):  # llama.cpp's reshape(n_head, 2, hd/2, ...).swapaxes(1, 2)
        shape, a = st[name]
        rows = shape[0]
        cols = shape[1] if len(shape) > 1 else 1
        hd = rows // n_head
        order = [h * hd + i * (hd // 2) + j for h in range(n_head) for j in range(hd // 2) for i in range(2)]
        return [a[r * cols + c] for r in order for c in range(cols)], shape

    def same(name):
        return st[name][1], st[name][0]

    out["token_embd.weight"] = same("model.embed_tokens.weight")
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        names = {"attn_norm.weight": "input_layernorm.weight", "attn_v.weight": "self_attn.v_proj.weight",
                 "attn_v.bias": "self_attn.v_proj.bias", "attn_output.weight": "self_attn.o_proj.weight",
                 "attn_output.bias": "self_attn.o_proj.bias", "attn_q_norm.weight": "self_attn.q_norm.weight",
                 "attn_k_norm.weight": "self_attn.k_norm.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
                 "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
                 "ffn_down.weight": "mlp.down_proj.weight"}
        for g, h in names.items():
            if p + h in st:
                out["blk.%d.%s" % (l, g)] = same(p + h)
        for g, h, n in (("attn_q", "q_proj", heads), ("attn_k", "k_proj", kv_heads)):
            for s in ("weight", "bias"):
                if p + "self_attn.%s.%s" % (h, s) in st:
                    name = p + "self_attn.%s.%s" % (h, s)
                    out["blk.%d.%s.%s" % (l, g, s)] = perm(name, n) if interleave else same(name)
    out["output_norm.weight"] = same("model.norm.weight")
    if "lm_head.weight" in st:
        out["output.weight"] = same("lm_head.weight")
    return out


def check_values(path, st_path, model_dir, want_type):
    kv, tensors = read_gguf(path)
    st = read_safetensors(st_path)
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    exp = expected(cfg, st)
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type") == "llama3":
        exp["rope_freqs.weight"] = None
    assert set(tensors) == set(exp), ("tensors", sorted(set(tensors) ^ set(exp)))
    worst = 0.0
    for name, (t, ne, raw) in tensors.items():
        if exp[name] is None:
            continue
        vals, shape = exp[name]
        assert list(reversed(ne)) == [int(s) for s in shape] or (len(shape) == 1 and ne == [shape[0]]), (name, ne, shape)
        one_d = len(shape) == 1
        want = "f32" if one_d else want_type
        if want == "q8_0" and shape[-1] % 32:
            want = "f16"  # as llama.cpp's converter falls back
        assert t == want, (name, t, want)
        if t == "f32":
            assert raw == array.array("f", vals).tobytes(), name
        elif t == "f16":
            assert raw == b"".join(struct.pack("<e", v) for v in vals), name
        elif t == "bf16":
            assert raw == struct.pack("<%dH" % len(vals), *[bf16_bits(v) for v in vals]), name
        else:
            assert raw == q8_0(vals), name
            for i in range(0, len(vals), 32):  # and within half a step of each value
                d = struct.unpack_from("<e", raw, i // 32 * 34)[0]
                codes = struct.unpack_from("<32b", raw, i // 32 * 34 + 2)
                for v, q in zip(vals[i:i + 32], codes):
                    worst = max(worst, abs(d * q - v) / (d if d else 1))
    # half a step of the fp32 scale, plus the fp16 rounding of the scale over 127 steps
    assert worst <= 0.5 + 127 / 2048 + 1e-3, ("q8_0 error in steps", worst)
    check_metadata(kv, cfg, model_dir, want_type)
    print("    %d tensors, metadata %d keys; q8_0 worst error %.3f of a step" % (len(tensors), len(kv), worst))


def check_metadata(kv, cfg, model_dir, want_type):
    arch = {"GPT2LMHeadModel": "gpt2", "LlamaForCausalLM": "llama", "MistralForCausalLM": "llama",
            "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}[cfg["architectures"][0]]
    assert kv["general.architecture"] == arch.encode(), kv["general.architecture"]
    assert kv["general.file_type"] == {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}[want_type]
    g = lambda k: kv[arch + "." + k]  # noqa: E731
    if arch == "gpt2":
        assert g("block_count") == cfg["n_layer"] and g("embedding_length") == cfg["n_embd"]
        assert g("context_length") == cfg["n_positions"] and g("attention.head_count") == cfg["n_head"]
        assert g("feed_forward_length") == (cfg.get("n_inner") or 4 * cfg["n_embd"])
        assert g("attention.layer_norm_epsilon") == f32(cfg["layer_norm_epsilon"])
    else:
        H, C = cfg["num_attention_heads"], cfg["hidden_size"]
        D = cfg.get("head_dim") or C // H
        assert g("block_count") == cfg["num_hidden_layers"] and g("embedding_length") == C
        assert g("context_length") == cfg["max_position_embeddings"] and g("attention.head_count") == H
        assert g("attention.head_count_kv") == cfg.get("num_key_value_heads", H)
        assert g("feed_forward_length") == cfg["intermediate_size"]
        assert g("rope.freq_base") == f32(cfg.get("rope_theta", 10000.0))
        assert g("attention.layer_norm_rms_epsilon") == f32(cfg["rms_norm_eps"])
        if D * H != C:
            assert g("attention.key_length") == D and g("attention.value_length") == D
        if arch == "llama":
            assert g("rope.dimension_count") == D and g("vocab_size") == cfg["vocab_size"]
    # the tokenizer: every id's token as tokenizer.json spells it, [PAD<id>] past it
    tj = json.load(open(os.path.join(model_dir, "tokenizer.json")))
    tc = json.load(open(os.path.join(model_dir, "tokenizer_config.json")))
    by_id = {i: t for t, i in tj["model"]["vocab"].items()}
    added = {a["id"]: a for a in tj.get("added_tokens", [])}
    for i, a in added.items():
        by_id[i] = a["content"]
    V = cfg.get("vocab_size") or cfg.get("n_vocab")
    toks = [t.decode() for t in kv["tokenizer.ggml.tokens"]]
    assert len(toks) == V, (len(toks), V)
    for i in range(V):
        assert toks[i] == by_id.get(i, "[PAD%d]" % i), (i, toks[i], by_id.get(i))
    types = kv["tokenizer.ggml.token_type"]
    spm = bool(tj["model"].get("byte_fallback"))  # SentencePiece BPE: llama.cpp's "llama" tokenizer
    unk = tj["model"]["vocab"].get(tj["model"].get("unk_token"), -1)
    for i in range(V):
        want = 5 if i not in by_id else 1 if i not in added else 3 if added[i].get("special") or (
            by_id[i].startswith("<|") and by_id[i].endswith("|>")) else 4
        if spm and i == unk:
            want = 2
        elif spm and i not in added and re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", by_id.get(i, "")):
            want = 6
        assert types[i] == want, (i, by_id.get(i), types[i], want)
    merges = [m if isinstance(m, str) else " ".join(p.replace(" ", "\u0120") for p in m) for m in tj["model"]["merges"]]
    if spm:
        # no merges: each piece's score, minus the rank of the first merge that makes it (0 for the rest)
        assert "tokenizer.ggml.merges" not in kv and kv["tokenizer.ggml.model"] == b"llama"
        assert kv["tokenizer.ggml.pre"] == b"default" and kv["tokenizer.ggml.add_space_prefix"] is True
        first = {}
        for r, m in enumerate(tj["model"]["merges"]):
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            first.setdefault(tj["model"]["vocab"][a + b], r)
        scores = kv["tokenizer.ggml.scores"]
        assert len(scores) == V and all(scores[i] == -float(first.get(i, 0)) for i in range(V))
        assert kv.get("tokenizer.ggml.unknown_token_id", -1) == unk
    else:
        assert [m.decode() for m in kv["tokenizer.ggml.merges"]] == merges
        assert kv["tokenizer.ggml.model"] == b"gpt2"
        pre = kv["tokenizer.ggml.pre"].decode()
        assert pre in ("llama-bpe", "qwen2", "smollm", "gpt-2", "tekken"), pre

    def content(x):
        return x["content"] if isinstance(x, dict) else x
    ids = {a["content"]: a["id"] for a in tj.get("added_tokens", [])}
    if tc.get("eos_token"):
        assert kv["tokenizer.ggml.eos_token_id"] == ids[content(tc["eos_token"])]
    if tc.get("bos_token"):
        assert kv["tokenizer.ggml.bos_token_id"] == ids[content(tc["bos_token"])]
    if tc.get("chat_template"):
        assert kv["tokenizer.chat_template"] == tc["chat_template"].encode()
    else:
        assert "tokenizer.chat_template" not in kv
    pp = tj.get("post_processor") or {}
    adds_bos = False
    for proc in pp.get("processors", [pp]):  # a Sequence of processors, or one
        single = proc.get("single", []) if proc.get("type") == "TemplateProcessing" else []
        adds_bos |= bool(single) and "SpecialToken" in single[0]
    assert kv["tokenizer.ggml.add_bos_token"] == adds_bos, (kv["tokenizer.ggml.add_bos_token"], adds_bos)


# Keys llama.cpp's converter writes that describe the file rather than the model, and keys whose
# absence means the value llama.cpp assumes: (key suffix, the assumed value or None: any).
CONVERTER_ONLY = {"general.name": None, "general.size_label": None, "general.type": None, "general.basename": None,
                  "general.finetune": None, "tokenizer.ggml.add_sep_token": False}


def check_fixture(path, fixture):
    """zero's f32 GGUF against what llama.cpp's converter wrote for the same model, key by key."""
    kv, tensors = read_gguf(path)
    fx = json.load(open(fixture))
    assert {n: [t.upper(), ne] for n, (t, ne, _) in tensors.items()} == fx["tensors"], "tensor names, types or shapes"
    arch = kv["general.architecture"].decode()
    heads = kv[arch + ".attention.head_count"]
    width = kv[arch + ".embedding_length"]
    same = 0
    for k, want in fx["kv"].items():
        if k in CONVERTER_ONLY:
            assert k not in kv or CONVERTER_ONLY[k] is None or kv[k] == CONVERTER_ONLY[k], k
            continue
        if k not in kv:  # written by the converter with the value llama.cpp assumes without it
            assert k.endswith((".key_length", ".value_length")) and want == width // heads, (k, want)
            continue
        got = kv[k]
        if isinstance(got, bytes):
            got = got.decode()
        elif isinstance(got, list):
            got = [x.decode() if isinstance(x, bytes) else x for x in got]
        if isinstance(want, float):
            assert got == f32(want), (k, got, want)
        else:
            assert got == want, (k, str(got)[:200], str(want)[:200])
        same += 1
    extra = set(kv) - set(fx["kv"])
    assert extra <= {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"}, extra
    for k in extra:  # what the converter leaves out, llama.cpp reads as false
        assert kv[k] is False, (k, kv[k])
    print("    %d keys equal to llama.cpp's converter's; %d tensors alike" % (same, len(tensors)))


def check_adapter(path, peft_dir, model_dir):
    """A GGUF LoRA adapter against PEFT's export of the same adapters: NAME.lora_a = A, NAME.lora_b = B
    with the base weight's row order (q/k interleaved per head for the llama architecture), f32;
    adapter.lora.alpha / r = PEFT's scale."""
    kv, tensors = read_gguf(path)
    st = read_safetensors(os.path.join(peft_dir, "adapter_model.safetensors"))
    ac = json.load(open(os.path.join(peft_dir, "adapter_config.json")))
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    assert kv["general.type"] == b"adapter" and kv["adapter.type"] == b"lora", kv
    r = ac["r"]
    scale = ac["lora_alpha"] / (math.sqrt(r) if ac.get("use_rslora") else r)
    assert abs(kv["adapter.lora.alpha"] / r - scale) <= 1e-6 * scale, (kv["adapter.lora.alpha"], scale)
    heads = cfg["num_attention_heads"]
    kvh = cfg.get("num_key_value_heads", heads)
    interleave = cfg["architectures"][0] in ("LlamaForCausalLM", "MistralForCausalLM")
    site = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output", "gate_proj": "ffn_gate",
            "up_proj": "ffn_up", "down_proj": "ffn_down"}
    seen = 0
    for key, (shape, a) in st.items():  # base_model.model.model.layers.L.self_attn.q_proj.lora_A.weight
        parts = key.split(".")
        l, mod, ab = int(parts[4]), parts[6], parts[7]
        name = "blk.%d.%s.weight.lora_%s" % (l, site[mod], ab[-1].lower())
        t, ne, raw = tensors[name]
        assert t == "f32" and list(reversed(ne)) == shape, (name, t, ne, shape)
        vals = list(a)
        if ab == "lora_B" and interleave and mod in ("q_proj", "k_proj"):
            rows, cols, n = shape[0], shape[1], heads if mod == "q_proj" else kvh
            hd = rows // n
            order = [h * hd + i * (hd // 2) + j for h in range(n) for j in range(hd // 2) for i in range(2)]
            vals = [a[rr * cols + c] for rr in order for c in range(cols)]
        assert raw == array.array("f", vals).tobytes(), name
        seen += 1
    assert seen == len(tensors), (seen, len(tensors))
    print("    %d adapter tensors equal PEFT's export; alpha %g (scale %g)" % (seen, kv["adapter.lora.alpha"], scale))


def check_package(path, st_path):
    try:
        import gguf
        import numpy as np
    except ImportError:
        print("SKIP: the gguf package is not installed (pip install gguf)")
        sys.exit(77)
    r = gguf.GGUFReader(path)
    names = {t.name for t in r.tensors}
    _, ours = read_gguf(path)
    assert names == set(ours), sorted(names ^ set(ours))
    for t in r.tensors:
        vals = gguf.quants.dequantize(t.data, t.tensor_type).reshape(-1).astype(np.float64)
        typ, ne, raw = ours[t.name]
        if typ == "q8_0":
            mine = []
            for i in range(0, len(raw), 34):
                d = struct.unpack_from("<e", raw, i)[0]
                mine += [d * q for q in struct.unpack_from("<32b", raw, i + 2)]
        elif typ == "f32":
            mine = array.array("f", raw).tolist()
        elif typ == "f16":
            mine = [struct.unpack_from("<e", raw, i)[0] for i in range(0, len(raw), 2)]
        else:
            mine = [struct.unpack("<f", struct.pack("<I", u << 16))[0] for u in struct.unpack("<%dH" % (len(raw) // 2), raw)]
        assert list(t.shape) == ne, (t.name, list(t.shape), ne)
        assert np.array_equal(vals, np.array(mine, dtype=np.float64)), t.name
    print("    gguf %s read %d tensors and %d fields" % (getattr(gguf, "__version__", ""), len(r.tensors), len(r.fields)))


def generate(path, prompt_ids, n_new, lora=None):
    try:
        import llama_cpp
    except ImportError:
        print("SKIP: llama_cpp is not installed (pip install llama-cpp-python)")
        sys.exit(77)
    llm = llama_cpp.Llama(model_path=path, n_ctx=128, n_threads=1, verbose=False, logits_all=False, lora_path=lora)
    ids = [int(x) for x in prompt_ids.split()]
    out = []
    for tok in llm.generate(ids, top_k=1, top_p=1.0, temp=0.0, repeat_penalty=1.0, reset=True):
        out.append(tok)
        if len(out) == n_new:
            break
    print(" ".join(str(t) for t in out))


def tokenize_ids(path, text_path, ids_path, skip_marks=False):
    """llama.cpp's ids of every line of a text (BOS first, special tokens matched) against tokenizers'.
    skip_marks: lines with a combining mark (Unicode category M) are counted, not compared —
    llama.cpp's "tekken" splits letters with an ASCII approximation of the regex's letter classes,
    which leaves the marks out."""
    try:
        import llama_cpp
    except ImportError:
        print("SKIP: llama_cpp is not installed (pip install llama-cpp-python)")
        sys.exit(77)
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    lines = open(text_path, "rb").read().split(b"\n")[:-1]
    want = [[int(x) for x in l.split()] for l in open(ids_path).read().split("\n")[:-1]]
    assert len(lines) == len(want), (len(lines), len(want))
    bad, skipped, differ = [], 0, 0
    for i, (line, ids) in enumerate(zip(lines, want)):
        text = line.decode("utf-8", "replace")
        got = llm.tokenize(text.encode(), add_bos=True, special=True)
        if skip_marks and any(unicodedata.category(ch).startswith("M") for ch in text):
            skipped, differ = skipped + 1, differ + (got != ids)
        elif got != ids:
            bad.append((i, got[:20], ids[:20]))
    print("    llama.cpp tokenizes %d of %d lines of %s to tokenizers' ids%s" % (
        len(lines) - skipped - len(bad), len(lines) - skipped, os.path.basename(text_path),
        " (%d lines with combining marks not compared: %d of them differ)" % (skipped, differ) if skipped else ""))
    assert not bad, bad[:3]


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "values":
        check_values(*sys.argv[2:6])
    elif what == "tokenize_ids":
        tokenize_ids(*sys.argv[2:5], skip_marks=len(sys.argv) > 5 and sys.argv[5] == "--skip-marks")
    elif what == "fixture":
        check_fixture(sys.argv[2], sys.argv[3])
    elif what == "package":
        check_package(sys.argv[2], sys.argv[3])
    elif what == "generate":
        generate(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else None)
    elif what == "adapter":
        check_adapter(*sys.argv[2:5])
    elif what == "tokenize":
        import llama_cpp
        llm = llama_cpp.Llama(model_path=sys.argv[2], n_ctx=128, verbose=False)
        print(" ".join(str(t) for t in llm.tokenize(sys.argv[3].encode(), add_bos=True, special=False)))
    else:
        raise SystemExit("unknown check " + what)
