"""Write the training-kernel capture plans of issue 37 (session 16), run on a lent GPU with the
capture kit (``benchmarks/captures/gpu_session.py`` runs both, sharded, with a deadline):

* ``plan_training.json``: chosen cases of the kernels a training step runs: fp32 GEMMs without
  TF32 (cuBLAS SIMT sgemm, split-K with ``splitKreduce_kernel``), TF32 GEMMs, ``addmm`` with
  alpha and beta, ``bmm`` and 3-D ``linear``; convolutions forward, backward data and backward
  weight in fp16, bf16, fp32 with TF32 (cuDNN's default) and fp32 without, NCHW and channels_last,
  over geometries other than the held-out ones (channel counts, filter sizes, strides), and the
  same 3×3 convolutions with ``cudnn.benchmark`` on, where cuDNN may take Winograd;
* ``plan_sweep.json``: a random-shape sweep as facebookexperimental/triton's ``bitequiv`` ran
  (shapes from a fixed seed; M, N, K in 1 … 8192, log-uniform; fp16, bf16, fp32, TF32; ``mm``,
  ``linear``, ``bmm``, convolutions). Outputs are kept small enough to bring back and to search on
  two CPU cores: M·N ≤ 16,384 and M·N·K ≤ 2^27 per GEMM (the shapes that break it are redrawn).

Every case draws its operands from its seed (numpy PCG64, uniform in [-1, 1)) and is saved
without them (``--omit-operands``): ``fp16emu identify`` draws them again and checks the sha256."""

import json
import math
from pathlib import Path

import numpy as np

#: the data types of the sweep: (kit dtype, allow_tf32, short name)
DTYPES = [("float16", False, "f16"), ("bfloat16", False, "bf16"), ("float32", False, "f32"), ("float32", True, "tf32")]


def conv_spec(name, op, seed, x, w, stride, pad, dtype, tf32, mf, **extra):
    n, c, h, wd = x
    k, _, r, s = w
    ho = (h + 2 * pad - (r - 1) - 1) // stride + 1
    wo = (wd + 2 * pad - (s - 1) - 1) // stride + 1
    spec = {"name": name, "op": op, "seed": seed, "dtype": dtype, "allow_tf32": tf32, "memory_format": mf}
    spec.update(stride=[stride] * 2, padding=[pad] * 2, dilation=[1, 1], groups=1)
    if op == "conv2d":
        spec["shapes"] = {"input": list(x), "weight": list(w)}
    elif op == "conv2d_bwd_data":
        spec["shapes"] = {"grad_output": [n, k, ho, wo], "weight": list(w)}
        spec["input_shape"] = list(x)
    else:
        spec["shapes"] = {"grad_output": [n, k, ho, wo], "input": list(x)}
        spec["weight_shape"] = list(w)
    spec.update(extra)
    return spec


def training_plan() -> list[dict]:
    cases = []
    seed = 5000
    # GEMMs: fp32 without TF32 (SIMT), TF32, and the transformer shapes
    for M, K, N in [(256, 2048, 256), (128, 4096, 64), (64, 8192, 64), (512, 512, 512), (100, 3000, 70),
                    (33, 1024, 17), (1024, 256, 128), (1, 4096, 512), (256, 256, 1)]:  # fmt: skip
        for dtype, tf32, short in DTYPES:
            seed += 1
            spec = {"name": f"t_mm_{M}x{K}x{N}_{short}", "op": "mm", "seed": seed, "dtype": dtype, "allow_tf32": tf32}
            spec["shapes"] = {"A": [M, K], "B": [K, N]}
            cases.append(spec)
    for dtype, tf32, short in DTYPES:
        seed += 1
        cases.append(
            {"name": f"t_addmm_128x1024x96_ab_{short}", "op": "addmm", "seed": seed, "dtype": dtype,
             "allow_tf32": tf32, "alpha": 0.5, "beta": 2.0, "shapes": {"A": [128, 1024], "B": [1024, 96], "C": [128, 96]}}
        )  # fmt: skip
        seed += 1
        cases.append(
            {"name": f"t_bmm_3x64x2048x48_{short}", "op": "bmm", "seed": seed, "dtype": dtype, "allow_tf32": tf32,
             "shapes": {"A": [3, 64, 2048], "B": [3, 2048, 48]}}
        )  # fmt: skip
        seed += 1
        cases.append(
            {"name": f"t_linear_2x50x768x64_{short}", "op": "linear", "seed": seed, "dtype": dtype,
             "allow_tf32": tf32, "shapes": {"input": [2, 50, 768], "weight": [64, 768], "bias": [64]}}
        )  # fmt: skip
    # convolutions: (x, w, stride, pad)
    geometries = [
        ((2, 96, 14, 14), (96, 96, 3, 3), 2, 1),  # 3x3 stride 2, wide channels
        ((2, 48, 15, 15), (20, 48, 3, 3), 1, 1),  # 3x3, odd channel counts and image
        ((2, 16, 12, 12), (16, 16, 5, 5), 1, 2),  # 5x5 padding 2
        ((1, 3, 32, 32), (16, 3, 7, 7), 2, 3),  # a stem: 3 channels, 7x7 stride 2
        ((2, 64, 9, 9), (32, 64, 1, 1), 1, 0),  # 1x1
        ((2, 24, 10, 10), (40, 24, 3, 3), 1, 0),  # 3x3 no padding
    ]
    for x, w, stride, pad in geometries:
        geo = f"n{x[0]}c{x[1]}k{w[0]}h{x[2]}r{w[2]}s{stride}p{pad}"
        for dtype, tf32, short in DTYPES:
            for op in ("conv2d", "conv2d_bwd_data", "conv2d_bwd_weight"):
                for mf in ("contiguous", "channels_last"):
                    seed += 1
                    name = f"t_{op}_{geo}_{mf[:5]}_{short}"
                    cases.append(conv_spec(name, op, seed, x, w, stride, pad, dtype, tf32, mf))
    # cudnn.benchmark on (the kit's gpu_session patch): cuDNN may take Winograd for 3x3
    for x, w in [((4, 64, 16, 16), (64, 64, 3, 3)), ((8, 128, 28, 28), (128, 128, 3, 3))]:
        for dtype, tf32, short in DTYPES:
            for op in ("conv2d", "conv2d_bwd_weight"):
                seed += 1
                name = f"t_bench_{op}_n{x[0]}c{x[1]}h{x[2]}_{short}"
                cases.append(conv_spec(name, op, seed, x, w, 1, 1, dtype, tf32, "contiguous", cudnn_benchmark=True))
    return cases


def _log_uniform(rng, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def sweep_plan(n_cases: int = 1200, seed: int = 2026_11_27) -> list[dict]:
    rng = np.random.default_rng(seed)
    cases = []
    ops = ["mm", "mm", "linear", "bmm", "conv2d", "conv2d_bwd_data", "conv2d_bwd_weight"]
    while len(cases) < n_cases:
        i = len(cases)
        op = ops[int(rng.integers(len(ops)))]
        dtype, tf32, short = DTYPES[int(rng.integers(len(DTYPES)))]
        spec = {"op": op, "seed": 100_000 + i, "dtype": dtype, "allow_tf32": tf32}
        if op in ("mm", "linear", "bmm"):
            M, N, K = (_log_uniform(rng, 1, 8192) for _ in range(3))
            batch = int(rng.integers(2, 9)) if op == "bmm" else 1
            if M * N * batch > 16384 or M * N * K * batch > 2**27:
                continue
            if op == "mm":
                spec["shapes"] = {"A": [M, K], "B": [K, N]}
            elif op == "bmm":
                spec["shapes"] = {"A": [batch, M, K], "B": [batch, K, N]}
            else:
                spec["shapes"] = {"input": [M, K], "weight": [N, K]}
                if rng.random() < 0.5:
                    spec["shapes"]["bias"] = [N]
            spec["name"] = (
                f"s{i:04d}_{op}_{batch}x{M}x{K}x{N}_{short}" if op == "bmm" else f"s{i:04d}_{op}_{M}x{K}x{N}_{short}"
            )
        else:
            n = int(rng.choice([1, 2, 4]))
            c = _log_uniform(rng, 1, 256)
            k = _log_uniform(rng, 1, 256)
            h = int(rng.integers(3, 33))
            r = int(rng.choice([1, 3, 3, 5, 7]))
            stride = int(rng.choice([1, 1, 2]))
            pad = int(rng.integers(0, r // 2 + 1))
            if h + 2 * pad < r:
                continue
            ho = (h + 2 * pad - r) // stride + 1
            if n * k * ho * ho > 16384 or n * k * ho * ho * c * r * r > 2**27 or n * c * h * h > 65536:
                continue
            mf = str(rng.choice(["contiguous", "channels_last"]))
            name = f"s{i:04d}_{op}_n{n}c{c}k{k}h{h}r{r}s{stride}p{pad}_{mf[:5]}_{short}"
            spec = conv_spec(name, op, 100_000 + i, (n, c, h, h), (k, c, r, r), stride, pad, dtype, tf32, mf)
        cases.append(spec)
    return cases


if __name__ == "__main__":
    here = Path(__file__).parent
    for name, plan in (("plan_training.json", training_plan()), ("plan_sweep.json", sweep_plan())):
        (here / name).write_text(json.dumps(plan, indent=0) + "\n")
        print(name, len(plan), "cases")
