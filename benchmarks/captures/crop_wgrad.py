"""Crop a weight-gradient capture to its first output and input channels, keeping what the GPU
computed there, as a small capture with its operands stored.

A weight gradient's output (k, c, r, s) is the sum over (n, p, q) of grad_output[n, k, p, q] ·
input[n, c, …]: it reads only grad_output's channel k and input's channel c, so the GPU's values
for k < K' and c < C' are those of the convolution of the first K' and C' channels run by the same
kernel, with the same gemmK = N·P·Q and the same accumulation order. The kernel names, the GPU and
the flags are kept; the name gets ``_crop{K'}x{C'}``. Used for
``tests/data/captures/h200_crops/`` (too large whole for the test data).

    python benchmarks/captures/crop_wgrad.py CAPTURE.npz K' C' OUT.npz
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from validation.captures import load_capture  # noqa: E402

KEPT = (
    "op", "repeat_differs", "dtype", "stride", "padding", "dilation", "groups", "memory_format",
    "allow_fp16_reduced_precision_reduction", "allow_tf32", "cudnn_deterministic", "cudnn_benchmark",
    "kernels", "torch", "gpu", "cuda",
)  # fmt: skip


def crop(path: str, k_out: int, c_in: int, out_path: str) -> None:
    cap = load_capture(path)
    if cap.op != "conv2d_bwd_weight" or cap.conv.groups != 1:
        raise SystemExit(f"{path}: a weight gradient without groups is needed, got {cap.op}")
    with np.load(path, allow_pickle=False) as members:
        fields = {k: members[k] for k in members.files if k in KEPT}
        name = str(members["name"]) + f"_crop{k_out}x{c_in}"
    dy = np.ascontiguousarray(cap.operands["grad_output"][:, :k_out]).view(np.float32)
    x = np.ascontiguousarray(cap.operands["input"][:, :c_in]).view(np.float32)
    out = np.ascontiguousarray(cap.out[:k_out, :c_in])
    np.savez_compressed(
        out_path, **fields, grad_output=dy, input=x, out=out, weight_shape=np.array(out.shape), name=np.str_(name)
    )
    print(f"{out_path}: {name}, grad_output {dy.shape}, input {x.shape}, out {out.shape}")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    crop(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
