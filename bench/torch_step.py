#!/usr/bin/env python3
# bench/torch_step.py — the PyTorch peer of `zero bench step`: the reference GPT-2 trained with
# DDP (~ zero stage 0) or DDP + ZeroRedundancyOptimizer (~ stage 1) on CPU ranks over gloo.
"""Step time and per-rank peak RSS of PyTorch training the same GPT-2 as `zero train`.

Usage: torch_step.py --mode ddp|zero --ranks N [--layers 6 --dim 512 --heads 8 --vocab 256
       --n-ctx 512 --micro-batch 4 --seq 128 --steps 6 --threads T --lr 1e-3]

The launcher imports nothing heavy (so a worker's ru_maxrss, which an exec inherits from the
forked launcher, starts from a few MB): it starts N copies of this script in worker mode, as
torchrun would, and prints one JSON object on stdout:
  {"mode", "ranks", "threads", "torch", "params", "step_ms": [rank 0's time of every step],
   "rss_peak": max over ranks of ru_maxrss in bytes, "rss_per_rank": [...], "loss": [...]}
Each rank runs micro-batch B of T tokens per step (DDP semantics: the global batch is N*B), fp32,
AdamW (weight decay 0.01 on 2-D tensors only, as zero's GPT-2 registers them), loss averaged over
ranks at the end of each step (zero train does the same for its progress line). The tokens are
random bytes: the time of a step does not depend on their values.
"""
import argparse
import json
import os
import socket
import subprocess
import sys


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("ddp", "zero"), required=True)
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--n-ctx", type=int, default=512)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--threads", type=int, default=0, help="threads per rank (0: cores / ranks, at least 1)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1)
    # worker mode (set by the launcher)
    p.add_argument("--worker-rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.ranks < 1 or a.steps < 1 or a.micro_batch < 1 or a.seq < 1 or a.seq > a.n_ctx or a.dim % a.heads:
        p.error("expected ranks, steps, micro-batch, seq >= 1, seq <= n-ctx and dim divisible by heads")
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


def worker(a):
    import resource
    import time

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % a.port, rank=a.worker_rank,
                            world_size=a.ranks)
    rank = dist.get_rank()
    torch.manual_seed(a.seed)
    C, H = a.dim, a.heads

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C, eps=1e-5)
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)
            self.ln_2 = nn.LayerNorm(C, eps=1e-5)
            self.c_fc = nn.Linear(C, 4 * C)
            self.mlp_proj = nn.Linear(4 * C, C)

        def forward(self, x, mask):
            B, T, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q = q.view(B, T, H, C // H).transpose(1, 2)
            k = k.view(B, T, H, C // H).transpose(1, 2)
            v = v.view(B, T, H, C // H).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / (C // H) ** 0.5)
            att = F.softmax(att.masked_fill(mask[:T, :T], float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.c_proj(y)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(a.vocab, C)
            self.wpe = nn.Embedding(a.n_ctx, C)
            self.h = nn.ModuleList(Block() for _ in range(a.layers))
            self.ln_f = nn.LayerNorm(C, eps=1e-5)
            # a plain attribute, not a buffer: DDP's initial broadcast over gloo rejects bool tensors
            self.mask = torch.ones(a.n_ctx, a.n_ctx, dtype=torch.bool).triu(1)
            for name, p in self.named_parameters():  # GPT-2's initialization
                if p.dim() == 2:
                    std = 0.02 / (2 * a.layers) ** 0.5 if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, idx, targets):
            T = idx.shape[1]
            x = self.wte(idx) + self.wpe(torch.arange(T))
            for blk in self.h:
                x = blk(x, self.mask)
            logits = self.ln_f(x) @ self.wte.weight.t()  # the LM head tied to the token embedding
            return F.cross_entropy(logits.view(-1, a.vocab), targets.view(-1))

    model = DDP(GPT2())
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    if a.mode == "zero":
        opt = ZeroRedundancyOptimizer(groups, optimizer_class=torch.optim.AdamW, lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    else:
        opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    params = sum(p.numel() for p in model.parameters())

    g = torch.Generator().manual_seed(a.seed * 1000 + rank)
    step_ms, losses = [], []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        tok = torch.randint(0, a.vocab, (a.micro_batch, a.seq + 1), generator=g)
        loss = model(tok[:, :-1].contiguous(), tok[:, 1:].contiguous())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        step_ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(mean.item() / a.ranks)

    # ru_maxrss is in KiB on Linux
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024], dtype=torch.float64)
    every = [torch.zeros_like(rss) for _ in range(a.ranks)]
    dist.all_gather(every, rss)
    if rank == 0:
        per_rank = [int(t.item()) for t in every]
        print(json.dumps({"mode": a.mode, "ranks": a.ranks, "threads": a.threads, "torch": torch.__version__,
                          "params": params, "micro_batch": a.micro_batch, "seq": a.seq, "step_ms": step_ms,
                          "rss_peak": max(per_rank), "rss_per_rank": per_rank, "loss": losses}), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def main():
    argv = sys.argv[1:]
    a = parse(argv)
    return worker(a) if a.worker_rank >= 0 else launch(a, argv)


if __name__ == "__main__":
    sys.exit(main())
