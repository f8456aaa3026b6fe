#!/usr/bin/env python3
# bench/llama_step.py — one training step of a SmolLM2-135M-shaped Llama (random weights) in zero
# against PyTorch 2 (transformers' LlamaForCausalLM) on CPU: tokens/s and peak RSS, as ratios.
"""Training-step throughput and peak RSS of zero against PyTorch for a Llama-family model.

Usage: llama_step.py [--zero build/zero] [--model smollm2-135m] [--micro-batch 4] [--seq 256]
       [--steps 4] [--threads T] [--rounds 3] [--json]

Both sides train the same shape (the zero preset; PyTorch gets the equivalent LlamaConfig) from
random weights in fp32 on one process with T threads (default: all cores), micro-batch B of T
tokens, AdamW, the same number of steps; the first step of each run is a warm-up and is left out.
Runs alternate (zero, PyTorch, zero, ...) for --rounds rounds so that a busy machine slows both
alike; the figures are medians over rounds of each run's median step. Each run is its own process
(PyTorch's worker is this script re-executed, importing torch only there), so each peak RSS
(ru_maxrss; zero's from its --log-json end record) is that run's alone.
Prints a table, or one JSON object with --json:
  {"model", "params", "micro_batch", "seq", "threads", "torch", "zero": {"tokens_per_s", "rss_peak"},
   "pytorch": {...}, "speedup", "rss_ratio", "rounds": [...]}
"""
import argparse
import json
import os
import random
import statistics
import struct
import subprocess
import sys
import tempfile

# the presets' shapes (models/decoder/params.c) as LlamaConfig keywords
SHAPES = {
    "smollm2-135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, vocab_size=49152, max_position_embeddings=8192, rope_theta=100000.0,
                         rms_norm_eps=1e-5, tie_word_embeddings=True),
    "smollm2-1.7b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=24, num_attention_heads=32,
                         num_key_value_heads=32, vocab_size=49152, max_position_embeddings=8192, rope_theta=130000.0,
                         rms_norm_eps=1e-5, tie_word_embeddings=True),
}


def torch_worker(a):
    import resource
    import time

    import torch
    import transformers
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    cfg = transformers.LlamaConfig(**SHAPES[a.model])
    model = transformers.LlamaForCausalLM(cfg)
    model.train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}], lr=1e-3)
    V = cfg.vocab_size
    times = []
    for s in range(a.steps):
        x = torch.randint(0, V, (a.micro_batch, a.seq + 1))
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        out = model(input_ids=x[:, :-1])
        loss = torch.nn.functional.cross_entropy(out.logits.reshape(-1, V), x[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    n = sum(p.numel() for p in model.parameters())
    print(json.dumps({"step_s": times, "rss_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "params": n, "torch": torch.__version__, "transformers": transformers.__version__}))


def run_torch(a):
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "--model", a.model, "--micro-batch",
                          str(a.micro_batch), "--seq", str(a.seq), "--steps", str(a.steps), "--threads", str(a.threads)],
                         env=env, check=True, capture_output=True, text=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["tokens_per_s"] = a.micro_batch * a.seq / statistics.median(r["step_s"][1:])
    return r


def run_zero(a, tokens):
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), OPENBLAS_NUM_THREADS=str(a.threads))
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as log:
        subprocess.run([a.zero, "train", "--model", a.model, "--data", tokens, "--seq", str(a.seq), "--micro-batch",
                        str(a.micro_batch), "--steps", str(a.steps), "--val-every", "0", "--val-batches", "1",
                        "--log-json", log.name], env=env, check=True, capture_output=True, text=True)
        recs = [json.loads(l) for l in open(log.name) if l.strip()]
    steps = [r for r in recs if "step" in r and "done" not in r]
    done = recs[-1]
    return {"step_s": [r["step_ms"] / 1000 for r in steps], "rss_peak": done["rss_peak"], "params": done["params"],
            "tokens_per_s": a.micro_batch * a.seq / statistics.median([r["step_ms"] / 1000 for r in steps[1:]])}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--zero", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "zero"))
    p.add_argument("--model", default="smollm2-135m", choices=sorted(SHAPES))
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.steps < 2:
        p.error("--steps: at least 2 (the first is a warm-up)")
    if a.worker:
        return torch_worker(a)
    V = SHAPES[a.model]["vocab_size"]
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, "tokens.bin")
        rng = random.Random(1)
        n = 200000
        with open(tokens, "wb") as f:  # ZEROTOK1 (docs/MODEL.md): random ids, the step's time ignores them
            f.write(b"ZEROTOK1" + struct.pack("<IIQQ", 1, V, n, 0))
            f.write(struct.pack("<%dH" % n, *(rng.randrange(V) for _ in range(n))))
        rounds = []
        for r in range(a.rounds):
            z = run_zero(a, tokens)
            t = run_torch(a)
            rounds.append({"zero": z, "pytorch": t})
            if not a.json:
                print("round %d: zero %.0f tok/s, %.0f MiB; PyTorch %.0f tok/s, %.0f MiB" % (
                    r + 1, z["tokens_per_s"], z["rss_peak"] / 2**20, t["tokens_per_s"], t["rss_peak"] / 2**20),
                    flush=True)
    med = lambda side, key: statistics.median(x[side][key] for x in rounds)
    res = {"model": a.model, "params": rounds[0]["zero"]["params"], "micro_batch": a.micro_batch, "seq": a.seq,
           "threads": a.threads, "torch": rounds[0]["pytorch"]["torch"],
           "transformers": rounds[0]["pytorch"]["transformers"],
           "zero": {"tokens_per_s": med("zero", "tokens_per_s"), "rss_peak": med("zero", "rss_peak")},
           "pytorch": {"tokens_per_s": med("pytorch", "tokens_per_s"), "rss_peak": med("pytorch", "rss_peak")},
           "rounds": rounds}
    res["speedup"] = res["zero"]["tokens_per_s"] / res["pytorch"]["tokens_per_s"]
    res["rss_ratio"] = res["zero"]["rss_peak"] / res["pytorch"]["rss_peak"]
    if a.json:
        print(json.dumps(res))
    else:
        print("%s (%d parameters), micro-batch %d x %d tokens, fp32, %d threads, torch %s: zero %.0f tok/s, %.0f MiB; "
              "PyTorch %.0f tok/s, %.0f MiB; zero/PyTorch: %.2fx the throughput, %.2fx the memory" % (
                  a.model, res["params"], a.micro_batch, a.seq, a.threads, res["torch"], res["zero"]["tokens_per_s"],
                  res["zero"]["rss_peak"] / 2**20, res["pytorch"]["tokens_per_s"], res["pytorch"]["rss_peak"] / 2**20,
                  res["speedup"], res["rss_ratio"]))


if __name__ == "__main__":
    main()
