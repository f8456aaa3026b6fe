#!/usr/bin/env bash
# The GPU kernels' resources per architecture: compiles src/cuda/kernels.cu with the build's flags
# and `-Xptxas -v` for each of sm_80/86/89/90/120 that this nvcc has, prints one line per kernel
# and architecture (registers, stack, spill stores and loads, shared memory) and exits 1 when any
# kernel spills or uses a stack frame (the build itself fails on it too: -warn-spills
# -warn-lmem-usage -Werror, CMakeLists.txt). Needs nvcc, no GPU.
# usage: scripts/cuda_resources.sh [ARCH...]     (ARCH such as 90; default: the five)
set -uo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "zero: error: cuda_resources: nvcc not found (set NVCC)" >&2; exit 1; }
have=$("$NVCC" --list-gpu-arch 2>/dev/null)
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(80 86 89 90 120)
# "(anonymous namespace)::sumsq(int, ...)" -> "sumsq" (the mangled name where c++filt is missing)
demangle() {
    if command -v c++filt >/dev/null; then
        c++filt | sed -E 's/^[^\t]*::([A-Za-z_0-9]+)\([^\t]*/\1/'
    else
        cat
    fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
n=0
printf '%-6s %-12s %5s %6s %7s %7s %6s\n' arch kernel regs stack spill_st spill_ld smem
for a in "${archs[@]}"; do
    if ! grep -q "compute_$a\$" <<<"$have"; then
        echo "sm_$a: this nvcc ($("$NVCC" --version | tail -1)) does not compile it: left out"
        continue
    fi
    if ! "$NVCC" -c src/cuda/kernels.cu -o "$tmp/k.o" -Iinclude -Isrc --fmad=false -Werror=all-warnings \
        -Xptxas=-v -gencode "arch=compute_$a,code=sm_$a" 2>"$tmp/log"; then
        echo "zero: error: cuda_resources: kernels.cu does not compile for sm_$a:" >&2
        cat "$tmp/log" >&2
        exit 1
    fi
    # ptxas prints, per kernel: "Compiling entry function 'NAME'", "N bytes stack frame, S bytes
    # spill stores, L bytes spill loads", "Used R registers, ... [M bytes smem]"
    while IFS=$'\t' read -r k regs stack st ld smem; do
        printf '%-6s %-12s %5s %6s %7s %7s %6s\n' "sm_$a" "$k" "$regs" "$stack" "$st" "$ld" "$smem"
        n=$((n + 1))
        if [ "$st" != 0 ] || [ "$ld" != 0 ] || [ "$stack" != 0 ]; then bad=$((bad + 1)); fi
    done < <(awk '
        /Compiling entry function/ { k = $0; sub(/.*function .\047?/, "", k); sub(/\047 for .*/, "", k) }
        /bytes stack frame/ { stack = $1; st = $5; ld = $9 }
        /Used [0-9]+ registers/ { regs = $5; smem = 0; if (match($0, /[0-9]+ bytes smem/)) smem = substr($0, RSTART, RLENGTH - 11)
                                  printf "%s\t%s\t%s\t%s\t%s\t%s\n", k, regs, stack, st, ld, smem }' "$tmp/log" |
        demangle)
done
echo "kernels x architectures: $n, with spills or a stack frame: $bad"
[ $bad -eq 0 ] && [ $n -gt 0 ]
