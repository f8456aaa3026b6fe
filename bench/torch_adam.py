# The PyTorch peer of `zero bench adam` (cli/cmd_bench_adam.c runs it when torch imports): times
# torch.optim.AdamW (fused, foreach or plain, whichever this torch has) on the same sizes and dtypes,
# one interpreter for every (n, dtype); prints "n dtype seconds mode" lines.
# usage: torch_adam.py SIZES DTYPES THREADS   (SIZES and DTYPES comma-separated)
import sys, time, inspect
try:
    import torch
except Exception:
    sys.exit(3)
sizes = [int(x) for x in sys.argv[1].split(',')]
dtypes = sys.argv[2].split(',')
threads = int(sys.argv[3])
if threads > 0:
    torch.set_num_threads(threads)
params = inspect.signature(torch.optim.AdamW).parameters
half = {'bf16': torch.bfloat16, 'fp16': torch.float16}
def make(p):
    for mode in ('fused', 'foreach'):
        if mode in params:
            try:
                opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01, **{mode: True})
                opt.step()
                return opt, mode
            except Exception:
                pass
    opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01)
    opt.step()
    return opt, 'default'
for n in sizes:
    p = torch.nn.Parameter(torch.empty(n).uniform_(-0.5, 0.5))
    p.grad = torch.empty(n).uniform_(-0.005, 0.005)
    opt, mode = make(p)
    for dt in dtypes:
        w = torch.empty(n, dtype=half[dt]) if dt in half else None
        def once():
            t0 = time.perf_counter()
            opt.step()
            if w is not None:
                w.copy_(p.detach())
            return time.perf_counter() - t0
        first = once()
        reps = max(3, min(50, int(0.25 / max(first, 1e-9))))
        best = min(once() for _ in range(reps))
        print(n, dt, repr(best), mode, flush=True)
    del opt, p
