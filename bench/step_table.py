#!/usr/bin/env python3
# bench/step_table.py — renders `zero bench step --json` output as the Markdown tables of
# docs/BENCHMARKS.md (step time, MFU, thread scaling and ratios to PyTorch; tokens/s and memory).
"""Usage: zero bench step --json ... > step.json; python3 bench/step_table.py step.json [more.json ...]

Several files (separate runs of the same configurations) are shown side by side as one column
per run for the step time, so the spread between runs is visible; ratios come from the first.
"""
import json
import sys

MIB = 1024.0 * 1024.0
PEERS = ("plain", "ddp", "zero", "fsdp")
LABEL = {"plain": "torch", "ddp": "torch DDP", "zero": "torch DDP+ZeRO", "fsdp": "torch FSDP2"}
MET = {True: "met", False: "**missed**", None: "-"}


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def load(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    ours = {(r["ranks"], r.get("threads", 0), r["stage"]): r for r in rows if r["run"] == "zero"}
    peers = {(r["ranks"], r.get("threads", 0), r["run"]): r for r in rows if r["run"] != "zero"}
    return ours, peers


def main(paths):
    runs = [load(p) for p in paths]
    ours, peers = runs[0]
    if not ours:
        print("step_table.py: no \"run\": \"zero\" rows in %s" % paths[0], file=sys.stderr)
        return 1
    r0 = next(iter(ours.values()))
    print("Model %s (%d parameters), fp32 AdamW, micro-batch %d per rank, seq %d, %d steps a run "
          "(first %d dropped), %d repeat(s); load average %.2f before, %.2f after; model FLOPs per rank and "
          "step %.4g.\n" % (r0["model"], r0["params"], r0["micro_batch"], r0["seq"], r0["steps"], r0["warmup"],
                            r0["repeats"], r0["load_before"], r0["load_after"], r0.get("step_flops") or 0))
    print("### Step time and ratios\n")
    extra = "".join(" run %d ms |" % (i + 2) for i in range(len(runs) - 1))
    ratio_cols = "".join(" ms/%s | RSS/%s |" % (LABEL[p], LABEL[p]) for p in PEERS)
    print("| ranks | threads | run | step ms (min-max) |%s GEMM GFLOP/s | MFU | x 1 thread | x stage 0 |%s stage target | "
          "MFU target | thread target | torch target |" % (extra, ratio_cols))
    print("| --- " * (4 + len(runs) - 1 + 4 + 2 * len(PEERS) + 4) + "|")
    keys = sorted({(R, T) for (R, T, _) in ours})
    for R, T in keys:
        for S in sorted(s for (r, t, s) in ours if (r, t) == (R, T)):
            o = ours[(R, T, S)]
            others = "".join(" %s |" % fmt(run[0].get((R, T, S), {}).get("step_ms"), ".0f") for run in runs[1:])
            ratios = "".join(" %s | %s |" % (fmt(o.get("ratio_%s_ms" % p), ".2f"), fmt(o.get("ratio_%s_rss" % p), ".2f"))
                             for p in PEERS)
            gf = o.get("gemm_flops")
            print("| %d | %d | stage %d | %.0f (%.0f-%.0f) |%s %s | %s | %s | %s |%s %s | %s | %s | %s |"
                  % (R, T, S, o["step_ms"], o["step_ms_min"], o["step_ms_max"], others,
                     fmt(gf and gf * 1e-9, ".1f"), fmt(o.get("mfu"), ".2f"), fmt(o.get("thread_speedup"), ".2f"),
                     fmt(o["stage_ratio"], ".2f"), ratios, MET[o["meets_stage_target"]],
                     MET[o.get("meets_mfu_target")], MET[o.get("meets_thread_target")], MET[o["meets_torch_target"]]))
        for p in PEERS:
            t = peers.get((R, T, "torch_" + p))
            if not t:
                continue
            others = "".join(" %s |" % fmt(run[1].get((R, T, "torch_" + p), {}).get("step_ms"), ".0f") for run in runs[1:])
            print("| %d | %d | %s %s | %.0f (%.0f-%.0f) |%s | %s | | |%s | | | |"
                  % (R, T, LABEL[p], t.get("torch", ""), t["step_ms"], t["step_ms_min"], t["step_ms_max"], others,
                     fmt(t.get("mfu"), ".2f"), " |" * (2 * len(PEERS))))
    print("\n### Tokens/s and memory per rank\n")
    print("| ranks | threads | run | tokens/s (all ranks) | peak RSS MiB (largest rank) | model states MiB | engine total MiB | "
          "stage 0 would need MiB | exposed comm ms/step |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for R, T in keys:
        for S in sorted(s for (r, t, s) in ours if (r, t) == (R, T)):
            o = ours[(R, T, S)]
            print("| %d | %d | stage %d | %.0f | %.0f | %.1f | %.1f | %.1f | %.0f |"
                  % (R, T, S, o["tokens_per_s"], o["rss_peak"] / MIB, o["model_states"] / MIB, o["mem_total"] / MIB,
                     o["stage0_model_states"] / MIB, o["comm_wait_ms"]))
        for p in PEERS:
            t = peers.get((R, T, "torch_" + p))
            if t:
                print("| %d | %d | %s | %.0f | %.0f | | | | |" % (R, T, LABEL[p], t["tokens_per_s"], t["rss_peak"] / MIB))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
