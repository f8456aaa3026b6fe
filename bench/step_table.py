#!/usr/bin/env python3
# bench/step_table.py — renders `zero bench step --json` output as the Markdown tables of
# docs/BENCHMARKS.md ("Training step" and "GPT-2 small: tokens/s and memory").
"""Usage: zero bench step --json ... > step.json; python3 bench/step_table.py step.json [more.json ...]

Several files (separate runs of the same configurations) are shown side by side as one column
per run for the step time, so the spread between runs is visible; ratios come from the first.
"""
import json
import sys

MIB = 1024.0 * 1024.0


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def load(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    ours = {(r["ranks"], r["stage"]): r for r in rows if r["run"] == "zero"}
    peers = {(r["ranks"], r["run"]): r for r in rows if r["run"] != "zero"}
    return ours, peers


def main(paths):
    runs = [load(p) for p in paths]
    ours, peers = runs[0]
    if not ours:
        print("step_table.py: no \"run\": \"zero\" rows in %s" % paths[0], file=sys.stderr)
        return 1
    any_row = next(iter(ours.values()))
    print("Model %s (%d parameters), fp32 AdamW, micro-batch %d per rank, seq %d, %d steps a run "
          "(first %d dropped), %d repeat(s); load average %.2f before, %.2f after.\n"
          % (any_row["model"], any_row["params"], any_row["micro_batch"], any_row["seq"], any_row["steps"],
             any_row["warmup"], any_row["repeats"], any_row["load_before"], any_row["load_after"]))
    print("### Step time and ratios\n")
    extra = "".join(" run %d ms |" % (i + 2) for i in range(len(runs) - 1))
    print("| ranks | run | step ms (min-max) |%s x stage 0 | ms/DDP | RSS/DDP | ms/ZeRO-torch | RSS/ZeRO-torch | stage target | torch target |" % extra)
    print("| --- | --- | --- |%s --- | --- | --- | --- | --- | --- | --- |" % (" --- |" * (len(runs) - 1)))
    for R in sorted({k[0] for k in ours}):
        for S in sorted(s for (r, s) in ours if r == R):
            o = ours[(R, S)]
            others = "".join(" %s |" % fmt(run[0].get((R, S), {}).get("step_ms"), ".0f") for run in runs[1:])
            met = {True: "met", False: "**missed**", None: "-"}
            print("| %d | stage %d | %.0f (%.0f-%.0f) |%s %s | %s | %s | %s | %s | %s | %s |"
                  % (R, S, o["step_ms"], o["step_ms_min"], o["step_ms_max"], others, fmt(o["stage_ratio"], ".2f"),
                     fmt(o["ratio_ddp_ms"], ".2f"), fmt(o["ratio_ddp_rss"], ".2f"), fmt(o["ratio_zero_ms"], ".2f"),
                     fmt(o["ratio_zero_rss"], ".2f"), met[o["meets_stage_target"]], met[o["meets_torch_target"]]))
        for name in ("torch_ddp", "torch_zero"):
            t = peers.get((R, name))
            if not t:
                continue
            others = "".join(" %s |" % fmt(run[1].get((R, name), {}).get("step_ms"), ".0f") for run in runs[1:])
            label = "torch DDP" if name == "torch_ddp" else "torch DDP+ZeRO"
            print("| %d | %s | %.0f (%.0f-%.0f) |%s | | | | | | |"
                  % (R, label, t["step_ms"], t["step_ms_min"], t["step_ms_max"], others))
    print("\n### Tokens/s and memory per rank\n")
    print("| ranks | run | tokens/s (all ranks) | peak RSS MiB (largest rank) | model states MiB | engine total MiB | stage 0 would need MiB | exposed comm ms/step |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for R in sorted({k[0] for k in ours}):
        for S in sorted(s for (r, s) in ours if r == R):
            o = ours[(R, S)]
            print("| %d | stage %d | %.0f | %.0f | %.1f | %.1f | %.1f | %.0f |"
                  % (R, S, o["tokens_per_s"], o["rss_peak"] / MIB, o["model_states"] / MIB, o["mem_total"] / MIB,
                     o["stage0_model_states"] / MIB, o["comm_wait_ms"]))
        for name in ("torch_ddp", "torch_zero"):
            t = peers.get((R, name))
            if t:
                label = "torch DDP" if name == "torch_ddp" else "torch DDP+ZeRO"
                print("| %d | %s | %.0f | %.0f | | | | |" % (R, label, t["tokens_per_s"], t["rss_peak"] / MIB))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
