#!/usr/bin/env python3
# Writes tests/data/mk_rope_golden.txt: the cos/sin tables of transformers' Llama rotary embedding
# (LlamaRotaryEmbedding, fp32) for plain, linear and Llama 3 frequencies at a few positions, the
# golden values test_mkernels checks mk_rope_table against. Needs torch and transformers (PyPI).
# Usage: python3 scripts/mk_rope_golden.py [OUT]
import sys

import torch
import transformers
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

# (name, mk_rope_scaling value, rope_parameters, head_dim)
CASES = [
    ("default", 0, dict(rope_type="default", rope_theta=10000.0), 64),
    ("qwen2", 0, dict(rope_type="default", rope_theta=1000000.0), 128),
    ("linear", 1, dict(rope_type="linear", rope_theta=10000.0, factor=4.0), 64),
    ("llama3", 2, dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                       high_freq_factor=4.0, original_max_position_embeddings=8192), 128),
]
POSITIONS = [0, 1, 2, 3, 100, 1000, 4095, 8191, 32767]

out = open(sys.argv[1] if len(sys.argv) > 1 else "tests/data/mk_rope_golden.txt", "w")
out.write("# mk_rope_golden: cos and sin (rot_dim/2 values each, the first half of transformers'\n")
out.write("# duplicated table) per position. Written by scripts/mk_rope_golden.py with transformers %s,\n"
          "# torch %s.\n" % (transformers.__version__, torch.__version__))
out.write("# case NAME SCALING THETA FACTOR LOW_FREQ HIGH_FREQ ORIGINAL_MAX_POS ROT_DIM NPOS\n")
out.write("# pos P cos... sin...\n")
for name, scaling, rp, hd in CASES:
    cfg = LlamaConfig(hidden_size=hd * 4, num_attention_heads=4, head_dim=hd,
                      max_position_embeddings=131072, rope_parameters=rp)
    emb = LlamaRotaryEmbedding(cfg)
    assert emb.attention_scaling == 1.0
    cos, sin = emb(torch.zeros(1, dtype=torch.float32), torch.tensor([POSITIONS]))
    out.write("case %s %d %r %r %r %r %d %d %d\n" % (
        name, scaling, rp["rope_theta"], rp.get("factor", 1.0), rp.get("low_freq_factor", 1.0),
        rp.get("high_freq_factor", 4.0), rp.get("original_max_position_embeddings", 8192), hd,
        len(POSITIONS)))
    for i, p in enumerate(POSITIONS):
        vals = cos[0, i, : hd // 2].tolist() + sin[0, i, : hd // 2].tolist()
        out.write("pos %d %s\n" % (p, " ".join("%.9g" % v for v in vals)))
