#!/usr/bin/env python3
# bench/load_rss.py — the peak RSS of loading a Hugging Face model directory with
# `zero train --init-from DIR --steps 0` at stage 3 on N ranks, against the model's size.
"""Peak RSS per rank of loading a model directory at stage 3 (each rank reads only its shards).

Usage: load_rss.py [--zero build/zero] [--model llama-3.2-1b] [--ranks 2] [--dir DIR] [--keep]
       [--shard-gb 1] [--offload DIR] [--precision bf16] [--json]

Writes a directory of random bf16 weights in the preset's shape (default llama-3.2-1b: 1.24B
parameters, 2.47 GB) as transformers lays it out (config.json, model-0000k-of-0000n.safetensors
of --shard-gb GB, model.safetensors.index.json), one tensor at a time, unless --dir names one that
exists. Then runs `zero train --init-from DIR --ranks N --stage 3 --steps 0` (initialize, load,
report) and reads its --log-json end record: the largest per-rank peak RSS after the load
(init_rss_peak), the engine's own accounted bytes per rank (mem.total: the shards the stage keeps),
and the load's time. With --offload DIR the optimizer states and the parameter shards live in files
under DIR (ZeRO-Infinity), so that the rank's RAM holds little besides what the load itself needs.
The figure to read: RSS - engine bytes, the loader's and the process's own memory, against the
model's size: loading never holds the model (or a whole tensor) in one rank's memory.
"""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_step import SHAPES  # noqa: E402

SHAPES = dict(SHAPES)
SHAPES["llama-3.2-1b"] = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                              num_key_value_heads=8, head_dim=64, vocab_size=128256, max_position_embeddings=131072,
                              rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
                              rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})


def tensors(c):
    """Hugging Face's tensor names and shapes of a Llama config, in file order."""
    C, F, L, V = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    D = c.get("head_dim") or C // c["num_attention_heads"]
    Q, KV = c["num_attention_heads"] * D, c["num_key_value_heads"] * D
    out = [("model.embed_tokens.weight", (V, C))]
    for l in range(L):
        p = "model.layers.%d." % l
        out += [(p + "input_layernorm.weight", (C,)), (p + "self_attn.q_proj.weight", (Q, C)),
                (p + "self_attn.k_proj.weight", (KV, C)), (p + "self_attn.v_proj.weight", (KV, C)),
                (p + "self_attn.o_proj.weight", (C, Q)), (p + "post_attention_layernorm.weight", (C,)),
                (p + "mlp.gate_proj.weight", (F, C)), (p + "mlp.up_proj.weight", (F, C)),
                (p + "mlp.down_proj.weight", (C, F))]
    out.append(("model.norm.weight", (C,)))
    if not c["tie_word_embeddings"]:
        out.append(("lm_head.weight", (V, C)))
    return out


def write_dir(path, model, shard_bytes):
    """Random bf16 weights, streamed: the header first, then one tensor's bytes at a time."""
    c = dict(SHAPES[model], architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu",
             torch_dtype="bfloat16")
    os.makedirs(path, exist_ok=True)
    json.dump(c, open(os.path.join(path, "config.json"), "w"), indent=2)
    ts = tensors(c)
    shards, cur, size = [], [], 0
    for name, shape in ts:
        n = 2
        for d in shape:
            n *= d
        if cur and size + n > shard_bytes:
            shards.append(cur)
            cur, size = [], 0
        cur.append((name, shape, n))
        size += n
    shards.append(cur)
    rng = random.Random(1)
    block = bytes(rng.getrandbits(8) & 0x3F if i % 2 else rng.getrandbits(8) for i in range(1 << 20))  # small bf16s
    wmap = {}
    for k, sh in enumerate(shards):
        fname = "model-%05d-of-%05d.safetensors" % (k + 1, len(shards))
        hdr, at = {"__metadata__": {"format": "pt"}}, 0
        for name, shape, n in sh:
            hdr[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [at, at + n]}
            at += n
            wmap[name] = fname
        h = json.dumps(hdr).encode()
        h += b" " * (-len(h) % 8)
        with open(os.path.join(path, fname), "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            for name, shape, n in sh:
                left = n
                while left:
                    m = min(left, len(block))
                    f.write(block[:m])
                    left -= m
    total = sum(n for s in shards for _, _, n in s)
    json.dump({"metadata": {"total_size": total}, "weight_map": wmap},
              open(os.path.join(path, "model.safetensors.index.json"), "w"), indent=2)
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--zero", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "zero"))
    p.add_argument("--model", default="llama-3.2-1b", choices=sorted(SHAPES))
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--dir", help="the model directory (written when it does not exist)")
    p.add_argument("--keep", action="store_true", help="keep the directory written")
    p.add_argument("--shard-gb", type=float, default=1.0)
    p.add_argument("--offload", help="NVMe offload of the optimizer states and the parameter shards into DIR")
    p.add_argument("--precision", default="bf16")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="zero_load_")
    d = a.dir or os.path.join(tmp, a.model)
    try:
        if not os.path.exists(os.path.join(d, "config.json")):
            write_dir(d, a.model, int(a.shard_gb * 1e9))
        weights = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".safetensors"))
        V = SHAPES[a.model]["vocab_size"]
        tok = os.path.join(tmp, "tokens.bin")
        with open(tok, "wb") as f:
            f.write(b"ZEROTOK1" + struct.pack("<IIQQ", 1, min(V, 65536), 4096, 0) + bytes(8192))
        log = os.path.join(tmp, "log.jsonl")
        cmd = [a.zero, "train", "--init-from", d, "--ranks", str(a.ranks), "--stage", "3", "--steps", "0",
               "--precision", a.precision, "--data", tok, "--seq", "16", "--micro-batch", "1", "--log-json", log]
        if a.offload:
            cmd += ["--offload-optimizer", "nvme:" + a.offload, "--offload-param", "nvme:" + a.offload]
            # DeepSpeed's default offload_param.buffer_size (1e8 elements) is below a large vocabulary's
            # embedding shard (llama-3.2-1b: 131M on 2 ranks), which zero refuses: one buffer holds it
            shard = -(-V * SHAPES[a.model]["hidden_size"] // a.ranks)
            conf = os.path.join(tmp, "offload.json")
            with open(conf, "w") as f:
                json.dump({"zero_optimization": {"offload_param": {"buffer_size": shard + 4096}}}, f)
            cmd += ["--config", conf]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
        done = [json.loads(l) for l in open(log) if l.strip()][-1]
        res = {"model": a.model, "params": done["params"], "weights_bytes": weights, "ranks": a.ranks, "stage": 3,
               "precision": a.precision, "offload": bool(a.offload), "init_s": done["init_s"],
               "rss_peak_per_rank": done["init_rss_peak"], "engine_bytes_per_rank": done["mem"]["total"],
               "command": " ".join(cmd)}
        res["rss_minus_engine"] = res["rss_peak_per_rank"] - res["engine_bytes_per_rank"]
        if a.json:
            print(json.dumps(res))
        else:
            print(out.stdout.strip().splitlines()[0])
            print("%s (%d parameters, %.2f GB of bf16 weights) at stage 3 on %d ranks, %s%s: loaded in %.1f s; peak RSS "
                  "per rank %.0f MiB, of which the engine's shards %.0f MiB: %.0f MiB for the loader and the process" % (
                      a.model, res["params"], weights / 1e9, a.ranks, a.precision, ", NVMe offload" if a.offload else "",
                      res["init_s"], res["rss_peak_per_rank"] / 2**20, res["engine_bytes_per_rank"] / 2**20,
                      res["rss_minus_engine"] / 2**20))
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
