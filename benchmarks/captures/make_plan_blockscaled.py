"""Write the block-scaled capture plan (plan_blockscaled.json): ``torch._scaled_mm`` with MX and
NVFP4 block scales on an NVIDIA Blackwell GPU (compute capability 10.0 or newer), for the first
block-scaled silicon captures. One command on the GPU machine (numpy and PyTorch only):

    python -m validation.captures.kit --plan benchmarks/captures/plan_blockscaled.json \\
        --out-dir captures/blockscaled --omit-operands

then, on any machine, ``fp16emu identify captures/blockscaled/NAME.npz`` for each file.

The cases: NVFP4 (fp4, e4m3 scales per 16), MXFP4 (fp4, E8M0 per 32), MXFP8 e4m3 × e4m3 and
e4m3 × e5m2 (E8M0 per 32); bfloat16 and float32 outputs (float32 shows where K is split,
bfloat16 is what training uses); operands over each format's whole range and scales over a
wide range (E8M0 exponents -8 … 8, e4m3 scales 0.02 … 448), so that partial sums carry many bits;
three shapes whose K runs from 1024 to 16384, the longest with a small M × N, where a library
tends to split K. On an AMD MI355 (gfx950) the kit runs the MX entries and skips the NVFP4
ones, saying why."""

import json
from pathlib import Path

SHAPES = [(128, 1024, 128), (64, 4096, 64), (64, 16384, 64)]
RECIPES = {
    "nvfp4": {"dtype": "e2m1", "block_scale": "nvfp4", "range": [-6.0, 6.0], "scale_range": [0.02, 448.0]},
    "mxfp4": {"dtype": "e2m1", "block_scale": "mx", "range": [-6.0, 6.0], "scale_exponents": [-8, 8]},
    "mxfp8": {"dtype": "e4m3", "block_scale": "mx", "range": [-448.0, 448.0], "scale_exponents": [-8, 8]},
    "mxfp8_e5m2": {"dtype": "e4m3", "b_dtype": "e5m2", "block_scale": "mx", "range": [-448.0, 448.0]},
}
cases = []
for i, (M, K, N) in enumerate(SHAPES):
    for j, (recipe, entry) in enumerate(RECIPES.items()):
        for out in ("bfloat16", "float32"):
            short = {"bfloat16": "bf16", "float32": "f32"}[out]
            spec = {"name": f"scaled_mm_{M}x{K}x{N}_{recipe}_{short}", "op": "scaled_mm", "seed": 700 + 10 * i + j}
            spec.update(entry, shapes={"A": [M, K], "B": [K, N]}, out_dtype=out)
            cases.append(spec)

if __name__ == "__main__":
    Path(__file__).with_name("plan_blockscaled.json").write_text(json.dumps(cases, indent=1) + "\n")
    print(len(cases), "cases")
