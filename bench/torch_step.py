#!/usr/bin/env python3
# bench/torch_step.py — the PyTorch 2 peer of `zero bench step`: zero's GPT-2 or Llama-family model
# trained plainly, with DDP, DDP + ZeroRedundancyOptimizer or FSDP2 (fully_shard) on CPU over gloo.
"""Step time and per-rank peak RSS of PyTorch training the same model as `zero train`.

Usage: torch_step.py --mode plain|ddp|zero|fsdp --ranks N [--arch gpt2|llama --layers 6 --dim 512
       --heads 8 --kv-heads 8 --head-dim 64 --inner 2048 --vocab 256 --n-ctx 512 --rope-theta 1e4
       --eps 1e-5 --untied --micro-batch 4 --seq 128 --steps 6 --threads T --lr 1e-3
       --precision fp32|bf16]

Modes: plain (one process, no wrapper: PyTorch as a single-process user runs it), ddp
(DistributedDataParallel, ~ zero stage 0), zero (DDP + ZeroRedundancyOptimizer, ~ stage 1), fsdp
(FSDP2's fully_shard on every block and the root, ~ stage 3: FSDP1 refuses to run without an
accelerator). The launcher imports nothing heavy (so a worker's ru_maxrss, which an exec inherits
from the forked launcher, starts from a few MB): it starts N copies of this script in worker mode,
as torchrun would, and prints one JSON object on stdout:
  {"mode", "ranks", "threads", "torch", "params", "step_ms": [rank 0's time of every step],
   "rss_peak": max over ranks of ru_maxrss in bytes, "rss_per_rank": [...], "loss": [...]}
The model is zero's: GPT-2 (LayerNorm, fused qkv with biases, tanh GELU, learned positions) or
Llama (RMSNorm, fused q/k/v and gate/up projections without biases, RoPE in transformers'
rotate-half convention, grouped key/value heads, SwiGLU), the LM head tied to the token embedding
unless --untied; attention by F.scaled_dot_product_attention (causal, PyTorch 2's fused kernel).
Each rank runs micro-batch B of T tokens per step, fp32 (or the forward under bf16 autocast,
PyTorch's mixed precision on CPU: --precision bf16), AdamW (weight decay 0.01 on 2-D tensors
only, as zero registers them), loss averaged over ranks at the end of each step (zero train does
the same for its progress line). The tokens are random: a step's time does not depend on them.
"""
import argparse
import json
import os
import socket
import subprocess
import sys


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("plain", "ddp", "zero", "fsdp"), required=True)
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--arch", choices=("gpt2", "llama"), default="gpt2")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=0, help="key/value heads (0: --heads)")
    p.add_argument("--head-dim", type=int, default=0, help="0: dim / heads")
    p.add_argument("--inner", type=int, default=0, help="MLP width (0: 4 dim)")
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--n-ctx", type=int, default=512)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--eps", type=float, default=1e-5)
    p.add_argument("--untied", action="store_true", help="an LM head of its own")
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--threads", type=int, default=0, help="threads per rank (0: cores / ranks, at least 1)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="bf16: the forward under torch.autocast('cpu', torch.bfloat16), fp32 weights and AdamW")
    # worker mode (set by the launcher)
    p.add_argument("--worker-rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.kv_heads = a.kv_heads or a.heads
    a.head_dim = a.head_dim or (a.dim // a.heads if a.heads else 0)
    a.inner = a.inner or 4 * a.dim
    if (a.ranks < 1 or a.steps < 1 or a.micro_batch < 1 or a.seq < 1 or a.seq > a.n_ctx or a.heads < 1
            or a.heads % a.kv_heads or (a.arch == "gpt2" and a.dim != a.heads * a.head_dim)
            or (a.arch == "llama" and a.head_dim % 2)):
        p.error("expected ranks, steps, micro-batch, seq >= 1, seq <= n-ctx, kv-heads dividing heads, "
                "dim = heads * head-dim (gpt2), an even head-dim (llama)")
    if a.mode == "plain" and a.ranks != 1:
        p.error("--mode plain runs one process: expected --ranks 1")
    if a.threads <= 0:
        a.threads = max(1, (os.cpu_count() or 1) // a.ranks)
    return a


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(a, argv):
    import signal
    import time

    port = free_port()
    env = dict(os.environ)
    # the same rule as `zero train --ranks`: each rank gets its share of the cores
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(a.threads)
    # a SIGTERM (the bench's timeout) ends the workers too, through the finally below
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    procs = []
    try:
        for r in range(a.ranks):
            cmd = [sys.executable, os.path.abspath(__file__)] + argv + ["--worker-rank", str(r), "--port", str(port)]
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL))
        # rank 0 prints one line at its end; a failed rank would leave the others waiting in gloo
        while any(p.poll() is None for p in procs):
            if any(p.poll() not in (None, 0) for p in procs):
                break
            time.sleep(0.05)
        rcs = [p.poll() for p in procs]
        if any(rc != 0 for rc in rcs):
            print("torch_step: worker exit statuses %s" % rcs, file=sys.stderr)
            return 1
        sys.stdout.write(procs[0].stdout.read().decode())
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def build(a):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    C, H, G, D, I, V = a.dim, a.heads, a.kv_heads, a.head_dim, a.inner, a.vocab

    class GPT2Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C, eps=a.eps)
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)
            self.ln_2 = nn.LayerNorm(C, eps=a.eps)
            self.c_fc = nn.Linear(C, I)
            self.mlp_proj = nn.Linear(I, C)

        def forward(self, x, rope):
            B, T, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, C))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    def rotate(x, cos, sin):  # transformers' rotate-half convention
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    class LlamaBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.RMSNorm(C, eps=a.eps)
            self.qkv = nn.Linear(C, (H + 2 * G) * D, bias=False)
            self.o = nn.Linear(H * D, C, bias=False)
            self.ln_2 = nn.RMSNorm(C, eps=a.eps)
            self.gate_up = nn.Linear(C, 2 * I, bias=False)
            self.down = nn.Linear(I, C, bias=False)

        def forward(self, x, rope):
            B, T, _ = x.shape
            cos, sin = rope
            q, k, v = self.qkv(self.ln_1(x)).split((H * D, G * D, G * D), dim=2)
            q = rotate(q.view(B, T, H, D).transpose(1, 2), cos, sin)
            k = rotate(k.view(B, T, G, D).transpose(1, 2), cos, sin)
            v = v.view(B, T, G, D).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=G != H)
            x = x + self.o(y.transpose(1, 2).reshape(B, T, H * D))
            g, u = self.gate_up(self.ln_2(x)).split(I, dim=2)
            return x + self.down(F.silu(g) * u)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(a.n_ctx, C) if a.arch == "gpt2" else None
            self.h = nn.ModuleList((GPT2Block if a.arch == "gpt2" else LlamaBlock)() for _ in range(a.layers))
            self.ln_f = nn.LayerNorm(C, eps=a.eps) if a.arch == "gpt2" else nn.RMSNorm(C, eps=a.eps)
            self.lm_head = nn.Linear(C, V, bias=False) if a.untied else None
            for name, p in self.named_parameters():  # GPT-2's initialization (the time ignores it)
                if p.dim() == 2:
                    nn.init.normal_(p, 0.0, 0.02)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)
            if a.arch == "llama":
                inv = 1.0 / (a.rope_theta ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
                ang = torch.outer(torch.arange(a.n_ctx, dtype=torch.float32), inv)
                emb = torch.cat((ang, ang), dim=-1)
                self.cos, self.sin = emb.cos(), emb.sin()  # plain attributes: DDP broadcasts buffers

        def forward(self, idx, targets):
            T = idx.shape[1]
            x = self.wte(idx)
            rope = None
            if self.wpe is not None:
                x = x + self.wpe(torch.arange(T))
            else:
                rope = (self.cos[:T], self.sin[:T])
            for blk in self.h:
                x = blk(x, rope)
            x = self.ln_f(x)
            logits = self.lm_head(x) if self.lm_head is not None else x @ self.wte.weight.t()
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

    return Model()


def worker(a):
    import resource
    import time

    import torch
    import torch.distributed as dist

    torch.set_num_threads(a.threads)
    dist_on = a.mode != "plain"
    if dist_on:
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % a.port, rank=a.worker_rank,
                                world_size=a.ranks)
    rank = a.worker_rank
    torch.manual_seed(a.seed)
    model = build(a)
    params = sum(p.numel() for p in model.parameters())
    if a.mode in ("ddp", "zero"):
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model)
    elif a.mode == "fsdp":
        from torch.distributed.fsdp import fully_shard
        for blk in model.h:
            fully_shard(blk)
        fully_shard(model)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    if a.mode == "zero":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(groups, optimizer_class=torch.optim.AdamW, lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    else:
        opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.999), eps=1e-8)

    g = torch.Generator().manual_seed(a.seed * 1000 + rank)
    step_ms, losses = [], []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        tok = torch.randint(0, a.vocab, (a.micro_batch, a.seq + 1), generator=g)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = model(tok[:, :-1].contiguous(), tok[:, 1:].contiguous())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        mean = loss.detach().clone()
        if dist_on:
            dist.all_reduce(mean)
        step_ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(mean.item() / a.ranks)

    # ru_maxrss is in KiB on Linux
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024], dtype=torch.float64)
    every = [rss]
    if dist_on:
        every = [torch.zeros_like(rss) for _ in range(a.ranks)]
        dist.all_gather(every, rss)
    if rank == 0:
        per_rank = [int(t.item()) for t in every]
        print(json.dumps({"mode": a.mode, "ranks": a.ranks, "threads": a.threads, "torch": torch.__version__,
                          "arch": a.arch, "params": params, "micro_batch": a.micro_batch, "seq": a.seq,
                          "step_ms": step_ms, "rss_peak": max(per_rank), "rss_per_rank": per_rank,
                          "loss": losses}), flush=True)
    if dist_on:
        dist.barrier()
        dist.destroy_process_group()
        # Ends the worker here: at interpreter exit, one in a few dozen runs of a 2-rank FSDP (torch
        # 2.15, gloo) aborted in a C++ destructor ("terminate called without an active exception",
        # after destroy_process_group returned), failing a run whose results were all out.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def main():
    argv = sys.argv[1:]
    a = parse(argv)
    return worker(a) if a.worker_rank >= 0 else launch(a, argv)


if __name__ == "__main__":
    sys.exit(main())
