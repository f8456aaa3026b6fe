#!/usr/bin/env python3
"""bench/gemm_torch.py — the PyTorch 2 peer of bench_gemm: torch.mm GFLOP/s on the same products
(512 rows: forward x·W, backward-data dy·Wᵀ, backward-weight xᵀ·dy of each linear layer of small,
gpt2 and SmolLM2-135M), in bench_gemm's output format, so that bench/gemm.sh tabulates it next to
the BLAS libraries. Threads: OMP_NUM_THREADS (torch.set_num_threads is set from it).
Usage: gemm_torch.py [seconds-per-shape]"""
import os
import sys
import time

import torch

LAYERS = [("small", "qkv", 512, 1536), ("small", "proj", 512, 512), ("small", "fc", 512, 2048),
          ("small", "fc_proj", 2048, 512), ("gpt2", "qkv", 768, 2304), ("gpt2", "proj", 768, 768),
          ("gpt2", "fc", 768, 3072), ("gpt2", "fc_proj", 3072, 768), ("smollm", "qkv", 576, 960),
          ("smollm", "o_proj", 576, 576), ("smollm", "gate_up", 576, 3072), ("smollm", "down", 1536, 576)]
ROWS = 512


def main():
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 0.3
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    torch.manual_seed(0)
    for model, name, ic, oc in LAYERS:
        x = torch.rand(ROWS, ic) - 0.5
        w = torch.rand(ic, oc) - 0.5
        dy = torch.rand(ROWS, oc) - 0.5
        # the operands laid out as bench_gemm's row-major calls see them: (M, K) x (K, N)
        ops = [("fwd", x, w, ROWS, oc, ic), ("bwd_data", dy, w.t(), ROWS, ic, oc),
               ("bwd_weight", x.t(), dy, ic, oc, ROWS)]
        for op, a, b, m, n, k in ops:
            out = torch.empty(m, n)
            torch.mm(a, b, out=out)
            torch.mm(a, b, out=out)
            best, spent, reps = 1e30, 0.0, 0
            while spent < secs or reps < 3:
                t0 = time.perf_counter()
                torch.mm(a, b, out=out)
                t = time.perf_counter() - t0
                best, spent, reps = min(best, t), spent + t, reps + 1
            print("torch %s_%s %s %d %d %d %.2f %.4f" % (model, name, op, m, n, k, 2.0 * m * n * k / best * 1e-9,
                                                         best * 1e3))


if __name__ == "__main__":
    main()
