"""Write the transformer-GEMM capture plan (plan_transformer.json) for the next GPU session
(issue 37.5): ``addmm`` and ``baddbmm`` with alpha and beta that are not powers of two (0.3 and
0.7 as fp32 values), so that the epilogue's order shows — CUTLASS's ``LinearCombination``
(beta·C rounded, then one FMA with alpha·acc) against alpha·acc rounded first, which session 16's
alpha 0.5 / beta 2 cannot tell apart — ``torch.matmul`` of broadcast batches and of a 4-D input
folded into one GEMM, and a 3-D ``F.linear``, in fp16, bf16, fp32 and TF32. Check it without a
GPU, then run it (numpy and PyTorch only; seconds of GPU time):

    python -m validation.captures.kit --check --plan benchmarks/captures/plan_transformer.json --gpu H200
    python -m validation.captures.kit --plan benchmarks/captures/plan_transformer.json \\
        --out-dir captures/transformer --omit-operands

and for batch invariance the same plan with ``--batch-sweep 1,8,64`` (the swept axis of each op,
docs/library.md). Then ``fp16emu identify captures/transformer/NAME.npz`` for each file."""

import json
from pathlib import Path

import numpy as np

ALPHA, BETA = float(np.float32(0.3)), float(np.float32(0.7))
FORMATS = {"f16": ("float16", False), "bf16": ("bfloat16", False), "f32": ("float32", False), "tf32": ("float32", True)}
SHAPES = {
    "addmm_64x2048x96": {"op": "addmm", "shapes": {"A": [64, 2048], "B": [2048, 96], "C": [96]}},
    "addmm_64x512x96_fullc": {"op": "addmm", "shapes": {"A": [64, 512], "B": [512, 96], "C": [64, 96]}},
    "baddbmm_64x4x256x64": {"op": "baddbmm", "shapes": {"A": [64, 4, 256], "B": [64, 256, 64], "C": [64, 4, 64]}},
    "matmul_bcast_64x1x128x512x32": {"op": "matmul", "shapes": {"A": [1, 128, 512], "B": [64, 512, 32]}},
    "matmul_fold_64x2x16x768x64": {"op": "matmul", "shapes": {"A": [64, 2, 16, 768], "B": [768, 64]}},
    "linear_64x20x768x64": {"op": "linear", "shapes": {"input": [64, 20, 768], "weight": [64, 768], "bias": [64]}},
}
cases = []
for seed, (name, base) in enumerate(SHAPES.items(), start=300):
    for short, (dtype, tf32) in FORMATS.items():
        spec = {"name": f"x_{name}_{short}", "seed": seed, "dtype": dtype, "allow_tf32": tf32, **base}
        if base["op"] in ("addmm", "baddbmm"):
            spec.update(alpha=ALPHA, beta=BETA)
        cases.append(spec)

if __name__ == "__main__":
    out = Path(__file__).resolve().parent / "plan_transformer.json"
    out.write_text(json.dumps(cases, indent=1) + "\n")
    print(f"{out}: {len(cases)} cases")
