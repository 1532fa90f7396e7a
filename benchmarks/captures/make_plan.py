"""Write the development capture plan (plan_dev.json) run on a lent H200 with the capture kit:
``python validation/capture_torch.py --plan benchmarks/captures/plan_dev.json --omit-operands``.
Shapes other than ../shared/silicon's, so the library search is not tuned to those cases alone."""

import json
from pathlib import Path

cases = []


def gemm(M, K, N, seed, **extra):
    for out in ("f32", "f16"):
        spec = {"name": f"mm_{M}x{K}x{N}_s{seed}_{out}", "op": "mm", "seed": seed}
        spec["shapes"] = {"A": [M, K], "B": [K, N]}
        if out == "f32":
            spec["out_dtype"] = "float32"
        spec.update(extra)
        cases.append(spec)


for i, (M, K, N) in enumerate(
    [
        (64, 4096, 64),
        (64, 8192, 64),
        (128, 2048, 128),
        (128, 8192, 128),
        (256, 1024, 256),
        (256, 8192, 256),
        (96, 3000, 80),
        (17, 2048, 33),
        (100, 1000, 100),
        (48, 12288, 48),
        (512, 2048, 64),
        (64, 2048, 512),
        (1, 4096, 256),
        (200, 777, 300),
        (640, 64, 640),
        (32, 65536, 32),
        (1024, 512, 128),
    ]
):
    gemm(M, K, N, 100 + i)
cases.append(
    {
        "name": "mm_256x4096x256_s150_f16_full",
        "op": "mm",
        "seed": 150,
        "shapes": {"A": [256, 4096], "B": [4096, 256]},
        "allow_fp16_reduced_precision_reduction": False,
    }
)
cases.append(
    {"name": "bmm_4x128x512x128_s160", "op": "bmm", "seed": 160, "shapes": {"A": [4, 128, 512], "B": [4, 512, 128]}}
)
cases.append(
    {"name": "bmm_8x64x4096x64_s161", "op": "bmm", "seed": 161, "shapes": {"A": [8, 64, 4096], "B": [8, 4096, 64]}}
)
cases.append(
    {
        "name": "addmm_128x1024x256_s170",
        "op": "addmm",
        "seed": 170,
        "shapes": {"A": [128, 1024], "B": [1024, 256], "C": [256]},
    }
)
cases.append(
    {
        "name": "addmm_64x8192x64_s171_beta",
        "op": "addmm",
        "seed": 171,
        "alpha": 0.5,
        "beta": 2.0,
        "shapes": {"A": [64, 8192], "B": [8192, 64], "C": [64, 64]},
    }
)
cases.append(
    {
        "name": "linear_256x512x128_s180",
        "op": "linear",
        "seed": 180,
        "shapes": {"input": [256, 512], "weight": [128, 512], "bias": [128]},
    }
)
cases.append(
    {
        "name": "linear_64x4096x64_s181",
        "op": "linear",
        "seed": 181,
        "shapes": {"input": [64, 4096], "weight": [64, 4096], "bias": [64]},
    }
)
cases.append(
    {
        "name": "linear_32x1024x256_s182_nobias",
        "op": "linear",
        "seed": 182,
        "shapes": {"input": [32, 1024], "weight": [256, 1024]},
    }
)
for i, (M, K, N) in enumerate([(128, 2048, 128), (64, 8192, 64), (256, 1024, 256)]):
    cases.append(
        {
            "name": f"mm_{M}x{K}x{N}_s{190 + i}_bf16",
            "op": "mm",
            "seed": 190 + i,
            "dtype": "bfloat16",
            "shapes": {"A": [M, K], "B": [K, N]},
        }
    )
    cases.append(
        {
            "name": f"mm_{M}x{K}x{N}_s{195 + i}_tf32",
            "op": "mm",
            "seed": 195 + i,
            "dtype": "float32",
            "allow_tf32": True,
            "shapes": {"A": [M, K], "B": [K, N]},
        }
    )


def conv(name, n, c, h, k, r, stride=1, pad=0, dil=1, groups=1, seed=0):
    x = [n, c, h, h]
    w = [k, c // groups, r, r]
    ho = (h + 2 * pad - dil * (r - 1) - 1) // stride + 1
    y = [n, k, ho, ho]
    common = {"stride": [stride] * 2, "padding": [pad] * 2, "dilation": [dil] * 2, "groups": groups}
    for mf in ("contiguous", "channels_last"):
        tag = "nchw" if mf == "contiguous" else "nhwc"
        cases.append(
            {
                "name": f"{name}_{tag}_fwd",
                "op": "conv2d",
                "seed": seed,
                "memory_format": mf,
                "shapes": {"input": x, "weight": w},
                **common,
            }
        )
    cases.append(
        {
            "name": f"{name}_nchw_bwd_data",
            "op": "conv2d_bwd_data",
            "seed": seed + 1,
            "shapes": {"grad_output": y, "weight": w},
            "input_shape": x,
            **common,
        }
    )
    cases.append(
        {
            "name": f"{name}_nchw_bwd_weight",
            "op": "conv2d_bwd_weight",
            "seed": seed + 2,
            "shapes": {"grad_output": y, "input": x},
            "weight_shape": w,
            **common,
        }
    )


conv("c3x3_c32_k32_h16", 2, 32, 16, 32, 3, pad=1, seed=300)
conv("c3x3_c128_k64_h8", 4, 128, 8, 64, 3, pad=1, seed=310)
conv("c3x3s2_c64_k64_h16", 2, 64, 16, 64, 3, stride=2, pad=1, seed=320)
conv("c1x1_c64_k128_h14", 2, 64, 14, 128, 1, seed=330)
conv("c5x5_c16_k32_h20", 2, 16, 20, 32, 5, pad=2, seed=340)
conv("c3x3_c3_k16_h32", 2, 3, 32, 16, 3, pad=1, seed=350)
conv("c3x3g2_c64_k64_h12", 2, 64, 12, 64, 3, pad=1, groups=2, seed=360)
conv("c3x3d2_c32_k32_h16", 2, 32, 16, 32, 3, pad=2, dil=2, seed=370)
conv("c7x7s2_c3_k32_h32", 2, 3, 32, 32, 7, stride=2, pad=3, seed=380)
conv("c3x3_c256_k256_h7", 2, 256, 7, 256, 3, pad=1, seed=390)

Path(__file__).with_name("plan_dev.json").write_text(json.dumps(cases, indent=1) + "\n")
print(len(cases), "cases")
