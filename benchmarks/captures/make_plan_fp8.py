"""Write the fp8 capture plan (plan_fp8.json): ``torch._scaled_mm`` on an NVIDIA GPU of compute
capability 8.9 or newer (Ada, H100/H200, Blackwell), for the first fp8 silicon captures. One
command on the GPU machine (numpy and PyTorch only; seconds of GPU time):

    python -m validation.capture_torch --plan benchmarks/captures/plan_fp8.json \\
        --out-dir captures/fp8 --omit-operands

then, on any machine, ``fp16emu identify captures/fp8/NAME.npz`` for each file.

The cases: e4m3 × e4m3 and the mixed pairs (e5m2 × e5m2 has no cuBLASLt kernel); per-tensor and
row-wise scales (row-wise with a bfloat16 output, the only one every PyTorch takes); fast
accumulation off and on; bfloat16, float16 (with an fp16 bias) and float32 outputs; four shapes
whose K runs from 1024 to 16384, the longest with a small M × N, where cuBLAS tends to split K.
Per-tensor scales are not powers of two (0.375, 2.5: their product 0.9375 and each on its own
round differently against an accumulator), so the epilogue's order can show; operands over
e4m3's whole range use scales that keep fp16 outputs finite."""

import json
from pathlib import Path

SHAPES = [(64, 4096, 64), (128, 2048, 256), (256, 1024, 128), (64, 16384, 64)]
cases = []


def case(M, K, N, seed, a="e4m3", b="e4m3", scaling="tensor", out="bfloat16", fast=False, bias=False, wide=False):
    short = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}[out]
    name = f"scaled_mm_{M}x{K}x{N}_{a}x{b}_{scaling}_{short}{'_bias' if bias else ''}_{'fast' if fast else 'acc'}"
    spec = {"name": name, "op": "scaled_mm", "seed": seed, "dtype": a, "b_dtype": b}
    spec["shapes"] = {"A": [M, K], "B": [K, N]}
    spec["out_dtype"] = out
    spec["use_fast_accum"] = fast
    spec["range"] = [-448.0, 448.0] if wide else [-4.0, 4.0]
    if scaling == "row":
        spec["rowwise"] = True
        spec["scale_range"] = [0.5, 2.0]
    else:
        spec["scale_a"], spec["scale_b"] = (0.375 / 64, 2.5 / 64) if wide else (0.375, 2.5)
    if bias:
        spec["bias"] = True
    cases.append(spec)


for i, (M, K, N) in enumerate(SHAPES):
    seed = 400 + 10 * i
    case(M, K, N, seed, fast=False)
    case(M, K, N, seed + 1, fast=True)
    case(M, K, N, seed + 2, b="e5m2", out="float32", fast=i % 2 == 1)
    case(M, K, N, seed + 3, scaling="row", bias=True, fast=i % 2 == 0)
case(128, 2048, 256, 450, a="e5m2", b="e4m3", out="float16", bias=True, wide=True)
case(64, 16384, 64, 451, out="float32", wide=True)
case(64, 16384, 64, 452, scaling="row", fast=False)

if __name__ == "__main__":
    Path(__file__).with_name("plan_fp8.json").write_text(json.dumps(cases, indent=1) + "\n")
    print(len(cases), "cases")
