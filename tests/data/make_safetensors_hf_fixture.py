#!/usr/bin/env python3
# Writes tests/data/safetensors_hf.safetensors with the reference implementation
# (pip package `safetensors`, its numpy API): tests/unit/test_safetensors.c reads it back and
# knows the values by formula. Made with safetensors 0.8.0 and numpy 1.24.
import sys
import numpy as np
from safetensors.numpy import save_file

tensors = {
    "wpe": (np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.125 - 1).astype(np.float32),
    "ln.g": np.array([1.0, -0.5, 2.0], dtype=np.float16),
    "tokens": np.array([7, -7, 1 << 33], dtype=np.int64),
    "flags": np.array([3, 0, 255, 128, 1], dtype=np.uint8),
    "step": np.array(12.0, dtype=np.float64),
    "none": np.zeros((0, 5), dtype=np.float32),
}
save_file(tensors, sys.argv[1] if len(sys.argv) > 1 else "safetensors_hf.safetensors",
          metadata={"format": "np", "source": "huggingface safetensors"})
