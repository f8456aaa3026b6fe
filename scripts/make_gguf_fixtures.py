#!/usr/bin/env python3
# scripts/make_gguf_fixtures.py — what llama.cpp's own converter (convert_hf_to_gguf.py) writes for
# the tiny models of tests/data/gguf/models.json and the Qwen2 chat fixture, kept as
# tests/data/gguf/<model>.json so that tests/cli/test_gguf.sh compares zero's GGUF metadata and
# tensor list with it key by key, in CI, without llama.cpp.
#
# Each model directory is made here by transformers (random weights, save_pretrained) with the
# tokenizer files of tests/data/tokenizer/<name>; the converter runs on it with --outtype f32 and
# the file it writes is read back with its own gguf-py. Recorded: every metadata key and value (the
# token, type and merge lists in full) and every tensor's type and dimensions.
#
# One step is not the converter's own: it names a tokenizer's pre-tokenizer by hashing the ids of a
# text it encodes, and refuses a hash it does not know — which every tiny test tokenizer is (800
# tokens). Its get_vocab_base_pre is replaced by the family's name ("pre" in models.json: Llama 3's
# "llama-bpe", Qwen2's "qwen2", GPT-2's "gpt-2", SmolLM's "smollm"); tokenizer.ggml.pre is thus the
# one key of the fixtures this script decides.
#
# Needs PyPI torch, transformers, numpy, and a llama.cpp source tree (its convert_hf_to_gguf.py and
# gguf-py: a checkout, or the vendor/llama.cpp of the llama-cpp-python sdist). Run from the root:
#     python3 scripts/make_gguf_fixtures.py --llama-cpp /path/to/llama.cpp
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "data", "gguf")


def value(field):
    v = field.contents()
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", required=True, help="a llama.cpp source tree")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.llama_cpp, "gguf-py"))
    import gguf
    import torch
    import transformers

    models = json.load(open(os.path.join(OUT, "models.json")))
    work = tempfile.mkdtemp()
    dirs = {}
    for name, m in models.items():
        d = os.path.join(work, name)
        torch.manual_seed(0)
        cfg = transformers.AutoConfig.for_model(m["config"]["model_type"], **{k: v for k, v in m["config"].items()
                                                                              if k != "model_type"})
        transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(d)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(ROOT, "tests", "data", "tokenizer", m["tokenizer"], f), d)
        dirs[name] = d
    dirs["qwen2"] = os.path.join(ROOT, "tests", "data", "finetune", "qwen2_chat")
    pre = {name: m["pre"] for name, m in models.items()}
    pre["qwen2"] = "qwen2"
    for name, d in dirs.items():
        out = os.path.join(work, name + ".gguf")
        env = dict(os.environ, PYTHONPATH=os.path.join(args.llama_cpp, "gguf-py"))
        run = ("import sys; sys.path.insert(0, %r); sys.argv = ['convert_hf_to_gguf.py', %r, '--outfile', %r, "
               "'--outtype', 'f32']; import conversion.base as b; b.TextModel.get_vocab_base_pre = lambda self, t: %r; "
               "import convert_hf_to_gguf as c; c.main()" % (args.llama_cpp, d, out, pre[name]))
        subprocess.run([sys.executable, "-c", run], check=True, env=env, stdout=subprocess.DEVNULL)
        r = gguf.GGUFReader(out)
        kv = {k: value(f) for k, f in r.fields.items() if not k.startswith("GGUF.")}
        tensors = {t.name: [t.tensor_type.name, [int(x) for x in t.shape]] for t in r.tensors}
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump({"converter": "llama.cpp convert_hf_to_gguf.py --outtype f32", "kv": kv, "tensors": tensors}, f,
                      ensure_ascii=False, indent=0, sort_keys=True)
            f.write("\n")
        print(name, len(kv), "keys", len(tensors), "tensors")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
