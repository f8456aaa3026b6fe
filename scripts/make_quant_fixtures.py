#!/usr/bin/env python3
# scripts/make_quant_fixtures.py — bitsandbytes' blockwise quantizations and its 8-bit AdamW on fixed
# tensors, committed as tests/data/quant/golden.safetensors so that CI checks zero's formats
# (src/quant/, docs/QUANT.md) against the reference without bitsandbytes or torch.
#
# Needs PyPI torch and bitsandbytes (both run on the CPU). Run from the repository root:
#     python3 scripts/make_quant_fixtures.py            # writes tests/data/quant/golden.safetensors
#
# Tensors (all little-endian, C order):
#   dyn_signed, dyn_unsigned  F32 (256)  create_dynamic_map(signed=True / False): the 8-bit dynamic maps
#   nf4_x        F32 (N)      the input: N(0, 0.02) rounded to bf16 (a bf16 checkpoint's values), one
#                             block of 64 zeros, a few outliers; N = 64 * 300
#   nf4_packed   U8 (N/2)     quantize_4bit(nf4_x, 64, nf4): two codes a byte, the first in the high nibble
#   nf4_absmax   F32 (N/64)   the blocks' absmax (compress_statistics=False)
#   nf4_deq      F32 (N)      dequantize_4bit of that (fp32)
#   nf4_qabsmax  U8 (N/64)    with double quantization (compress_statistics=True): the absmax less their
#   nf4_offset   F32 (1)      mean (offset), quantized blockwise (256) with the signed dynamic map by the
#   nf4_absmax2  F32 (2)      reference rule (below): the codes, the offset, the second level's absmax
#   nf4_deq_dq   F32 (N)      dequantize_4bit with double quantization
#   int8_x       F32 (M)      N(0, 1) rounded to bf16, M = 64 * 40 + 17 (a partial last block)
#   int8_code    F32 (256)    create_linear_map(signed=True): k / 127, k = -127..127, and a second 0
#   int8_idx     U8 (M)       quantize_blockwise(int8_x, int8_code, 64) by the reference rule (below):
#                             indices into int8_code
#   int8_absmax  F32 (41)
#   int8_deq     F32 (M)      dequantize_blockwise of that
#   dyn_x        F32 (K)      N(0, 1) * 1e-3 with a spread of block scales, K = 256 * 12 + 100
#   dyn_idx      U8 (K), dyn_absmax F32 (13): quantize_blockwise(dyn_x, dyn_signed, 256)
#   dynu_x       F32 (K)      |dyn_x|^2 (a second moment's shape)
#   dynu_idx     U8 (K), dynu_absmax F32 (13): quantize_blockwise(dynu_x, dyn_unsigned, 256)
#   adam_p0      F32 (P)      N(0, 0.05), P = 256 * 20 + 44 (above min_8bit_size, a partial block)
#   adam_g       F32 (10, P)  each step's gradient
#   adam_p8      F32 (P)      after 10 steps of bnb.optim.AdamW8bit (lr 1e-2, betas 0.9 0.999, eps 1e-8,
#                             weight decay 0.01): its CPU backend's step, the states coded by the
#                             reference rule (below)
#   adam_m_idx, adam_v_idx U8 (P); adam_m_absmax, adam_v_absmax F32 (21): its states after them
#   adam_p32     F32 (P)      the same 10 steps of torch.optim.AdamW in fp32 (the bound's reference)
# metadata: versions.
import json
import struct
import sys

import bitsandbytes as bnb
import bitsandbytes.functional as F
import torch

OUT = "tests/data/quant/golden.safetensors"


def write_safetensors(path, tensors, meta):
    kinds = {torch.float32: "F32", torch.uint8: "U8"}
    header, blobs, off = {"__metadata__": meta}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        raw = t.numpy().tobytes()
        header[name] = {"dtype": kinds[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


# bitsandbytes' blockwise 8-bit quantization by its reference rule: each value to the code entry
# whose fp32 midpoints bracket it (torch.bucketize; a value on a midpoint to the lower entry), as
# its CUDA kernels and its PyTorch-native ("default") backend do. Its CPU extension searches the
# code approximately instead (a few indices one entry off, where the other entry is nearer: the
# script prints how many), so the fixture calls the default backend's kernel.
def quantize_blockwise_ref(A, code, blocksize):
    op = torch.ops.bitsandbytes.quantize_blockwise.default
    ks = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)
    q, absmax = op.redispatch(ks, A, code, blocksize)
    q_cpu, _ = op(A, code, blocksize)
    print("  %d of %d indices differ under the CPU extension's search" % (int((q != q_cpu).sum()), A.numel()))
    return q, absmax


def bf16(t):
    return t.to(torch.bfloat16).to(torch.float32)


def main():
    torch.manual_seed(1234)
    out = {}
    out["dyn_signed"] = F.create_dynamic_map(signed=True).float()
    out["dyn_unsigned"] = F.create_dynamic_map(signed=False).float()

    n = 64 * 300
    x = bf16(torch.randn(n) * 0.02)
    x[64 * 7 : 64 * 8] = 0  # a block of zeros: absmax 0
    x[5] = bf16(torch.tensor([0.9]))[0]  # outliers
    x[64 * 100 + 3] = bf16(torch.tensor([-1.3]))[0]
    out["nf4_x"] = x
    q, st = F.quantize_4bit(x, blocksize=64, quant_type="nf4", compress_statistics=False)
    out["nf4_packed"] = q.reshape(-1)
    out["nf4_absmax"] = st.absmax.float()
    out["nf4_deq"] = F.dequantize_4bit(q, st).float()
    q2, st2 = F.quantize_4bit(x, blocksize=64, quant_type="nf4", compress_statistics=True)
    if not torch.equal(q2, q) or not torch.equal(st2.offset, st.absmax.mean()):
        sys.exit("nf4 codes or offset differ with double quantization")
    # the absmax's second level by the reference rule (quantize_4bit calls the CPU extension's)
    qa, a2 = quantize_blockwise_ref(st.absmax - st2.offset, F.create_dynamic_map(signed=True), 256)
    st2.absmax, st2.state2.absmax = qa, a2
    out["nf4_qabsmax"] = qa.reshape(-1)
    out["nf4_offset"] = st2.offset.reshape(1).float()
    out["nf4_absmax2"] = a2.float()
    out["nf4_deq_dq"] = F.dequantize_4bit(q2, st2).float()

    m = 64 * 40 + 17
    xi = bf16(torch.randn(m))
    code = F.create_linear_map(signed=True).float()
    out["int8_x"] = xi
    out["int8_code"] = code
    idx, absmax = quantize_blockwise_ref(xi, code, 64)
    out["int8_idx"] = idx
    out["int8_absmax"] = absmax.float()
    out["int8_deq"] = F.dequantize_blockwise(idx, absmax=absmax, code=code, blocksize=64).float()

    k = 256 * 12 + 100
    scales = torch.logspace(-3, 1, 13).repeat_interleave(256)[:k]
    xd = torch.randn(k) * 1e-3 * scales
    out["dyn_x"] = xd
    idx, absmax = quantize_blockwise_ref(xd, out["dyn_signed"], 256)
    out["dyn_idx"], out["dyn_absmax"] = idx, absmax.float()
    xu = xd * xd
    out["dynu_x"] = xu
    idx, absmax = quantize_blockwise_ref(xu, out["dyn_unsigned"], 256)
    out["dynu_idx"], out["dynu_absmax"] = idx, absmax.float()

    P = 256 * 20 + 44
    p0 = torch.randn(P) * 0.05
    g = torch.randn(10, P) * 0.01
    out["adam_p0"], out["adam_g"] = p0.clone(), g
    hp = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    # the CPU backend's 8-bit step codes its states with the CPU extension's search: by the reference
    # rule instead, as the CUDA kernels do (the step itself is the CPU backend's)
    import bitsandbytes.backends.cpu.ops as cpu_ops

    def quant_ref(A, code, absmax_out, out_uint8, blocksize):
        op = torch.ops.bitsandbytes.quantize_blockwise.default
        ks = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)
        q, absmax = op.redispatch(ks, A, code, blocksize)
        out_uint8.copy_(q)
        absmax_out.copy_(absmax)

    cpu_ops._quant_blockwise_fp32_direct = quant_ref
    p8 = torch.nn.Parameter(p0.clone())
    opt = bnb.optim.AdamW8bit([p8], **hp)
    p32 = torch.nn.Parameter(p0.clone())
    ref = torch.optim.AdamW([p32], **hp)
    for s in range(10):
        p8.grad = g[s].clone()
        opt.step()
        p32.grad = g[s].clone()
        ref.step()
    st = opt.state[p8]
    if st["state1"].dtype != torch.uint8:
        sys.exit("AdamW8bit kept its states in %s, not 8-bit" % st["state1"].dtype)
    out["adam_p8"] = p8.detach().clone()
    out["adam_m_idx"], out["adam_m_absmax"] = st["state1"].reshape(-1), st["absmax1"].float()
    out["adam_v_idx"], out["adam_v_absmax"] = st["state2"].reshape(-1), st["absmax2"].float()
    out["adam_p32"] = p32.detach().clone()

    meta = {"torch": torch.__version__, "bitsandbytes": bnb.__version__, "made_by": "scripts/make_quant_fixtures.py"}
    write_safetensors(OUT, out, meta)
    print("wrote %s (%d tensors)" % (OUT, len(out)))


if __name__ == "__main__":
    main()
