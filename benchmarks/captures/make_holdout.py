"""Write a held-out capture plan (plan_holdout.json): shapes drawn at random from a fixed seed, so
the library search is judged on cases chosen by nobody. Run on a lent GPU with the capture kit:
``python -m validation.capture_torch --plan benchmarks/captures/plan_holdout.json --omit-operands``."""

import json
from pathlib import Path

import numpy as np

rng = np.random.default_rng(2026_11_26)
cases = []
for i in range(30):
    M, N = (int(x) for x in rng.choice([1, 7, 16, 33, 64, 96, 128, 200, 256, 384, 512], 2))
    K = int(rng.choice([64, 100, 256, 500, 777, 1024, 1536, 2048, 3000, 4096, 6000, 8192, 12000, 16384, 24576]))
    spec = {"name": f"h_mm_{M}x{K}x{N}_{i}", "op": "mm", "seed": 1000 + i, "shapes": {"A": [M, K], "B": [K, N]}}
    if rng.random() < 0.5:
        spec["out_dtype"] = "float32"
    cases.append(spec)
for i in range(6):
    M, N, K = int(rng.choice([32, 64, 128, 256])), int(rng.choice([32, 64, 256])), int(rng.choice([512, 2048, 8192]))
    cases.append(
        {
            "name": f"h_linear_{M}x{K}x{N}_{i}",
            "op": "linear",
            "seed": 1100 + i,
            "shapes": {"input": [M, K], "weight": [N, K], "bias": [N]},
        }
    )
for i in range(24):
    n = int(rng.choice([1, 2, 4]))
    c = int(rng.choice([3, 8, 16, 32, 64, 96, 128]))
    k = int(rng.choice([8, 16, 32, 64, 128]))
    h = int(rng.choice([7, 12, 16, 24, 32]))
    r = int(rng.choice([1, 3, 3, 5]))
    stride = int(rng.choice([1, 1, 2]))
    pad = r // 2
    x, w = [n, c, h, h], [k, c, r, r]
    ho = (h + 2 * pad - (r - 1) - 1) // stride + 1
    common = {"stride": [stride] * 2, "padding": [pad] * 2, "dilation": [1, 1], "groups": 1}
    op = str(rng.choice(["conv2d", "conv2d", "conv2d_bwd_data", "conv2d_bwd_weight"]))
    mf = str(rng.choice(["contiguous", "channels_last"])) if op == "conv2d" else "contiguous"
    name = f"h_{op}_n{n}c{c}k{k}h{h}r{r}s{stride}_{mf[:5]}_{i}"
    spec = {"name": name, "op": op, "seed": 1200 + i, "memory_format": mf, **common}
    if op == "conv2d":
        spec["shapes"] = {"input": x, "weight": w}
    elif op == "conv2d_bwd_data":
        spec["shapes"] = {"grad_output": [n, k, ho, ho], "weight": w}
        spec["input_shape"] = x
    else:
        spec["shapes"] = {"grad_output": [n, k, ho, ho], "input": x}
        spec["weight_shape"] = w
    cases.append(spec)
Path(__file__).with_name("plan_holdout.json").write_text(json.dumps(cases, indent=1) + "\n")
print(len(cases), "cases")
