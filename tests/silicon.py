"""The NVIDIA H200 captures of ``../shared/silicon`` as :class:`validation.captures.Capture`
objects (tests skip where ``../shared`` is absent).

``lib_gemm_a.npz`` holds ``torch.mm`` cases (fp16 operands, fp32 and fp16 outputs);
``lib_conv_a.npz`` ``F.conv2d`` forward (NCHW and channels_last) and its data and weight
gradients; ``capture1_gemms.npz`` the Triton GEMMs, two cuBLAS split-K GEMMs and one cuDNN
convolution. Shapes, strides and paddings follow the case names (``c3x3`` padding 1, ``c7x7s2``
stride 2 padding 3, ``c1x1`` none), as the captures' README says.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from emu.implicit_gemm import ConvShape
from validation.captures import Capture

SILICON = Path(__file__).resolve().parents[1].parent / "shared" / "silicon"
GPU = "NVIDIA H200"


def available() -> bool:
    return (SILICON / "lib_gemm_a.npz").is_file()


def _kernels(case: str) -> tuple[str, ...]:
    info = json.loads((SILICON / "kernels.json").read_text())
    return tuple(info["cases"].get(case, {}).get("kernels", ()))


def _bits(x):
    return np.asarray(x).view(np.uint16)


def gemm_cases() -> dict[str, Capture]:
    """Every torch.mm case of the silicon set, by name."""
    out = {}
    z = np.load(SILICON / "lib_gemm_a.npz")
    for key in z.files:
        if not key.endswith("_f32__A"):
            continue
        base = key[: -len("_f32__A")]
        A, B = _bits(z[key]), _bits(z[f"{base}_f32__B"])
        for tag in ("f32", "f16"):
            case = f"{base}_{tag}"
            out[case] = Capture(case, "mm", {"A": A, "B": B}, z[f"{case}__out"], gpu=GPU, kernels=_kernels(case))
    c = np.load(SILICON / "capture1_gemms.npz")
    for base in ("blas_sq", "blas_tallk"):
        A, B = _bits(c[f"{base}__A"]), _bits(c[f"{base}__B"])
        for tag in ("f32out", "f16out_reduced", "f16out_full"):
            out[f"{base}_{tag}"] = Capture(f"{base}_{tag}", "mm", {"A": A, "B": B}, c[f"{base}__{tag}"], gpu=GPU)
    for base in ("tri_r0", "tri_r3", "tri_wide"):
        A, B = _bits(c[f"{base}__A"]), _bits(c[f"{base}__B"])
        for bk in (16, 32, 64, 128):
            name = f"{base}__bk{bk}"
            out[name] = Capture(
                name, "mm", {"A": A, "B": B}, c[f"{name}__D"], gpu=GPU, kernels=("triton_matmul_kernel",)
            )
    return out


def _geometry(case: str):
    if case.startswith("c3x3"):
        return (1, 1), (1, 1)
    if case.startswith("c7x7s2"):
        return (2, 2), (3, 3)
    return (1, 1), (0, 0)


def conv_cases() -> dict[str, Capture]:
    """Every convolution case of the silicon set, by name (values NCHW, as torch's logical order)."""
    out = {}
    z = np.load(SILICON / "lib_conv_a.npz")
    bases = sorted({k.split("_nchw_")[0] for k in z.files if "_nchw_fwd__x" in k})
    for base in bases:
        x, w = _bits(z[f"{base}_nchw_fwd__x"]), _bits(z[f"{base}_nchw_fwd__w"])
        dy = _bits(z[f"{base}_nchw_bwd_data__dy"])
        stride, padding = _geometry(base)
        shape = ConvShape(*x.shape, w.shape[0], w.shape[2], w.shape[3], stride, padding)
        for layout in ("nchw", "nhwc"):
            case = f"{base}_{layout}_fwd"
            out[case] = Capture(
                case,
                "conv2d",
                {"input": x, "weight": w},
                z[f"{case}__out"],
                conv=shape,
                memory_format="contiguous" if layout == "nchw" else "channels_last",
                gpu=GPU,
                kernels=_kernels(case),
            )
        case = f"{base}_nchw_bwd_data"
        out[case] = Capture(
            case,
            "conv2d_bwd_data",
            {"grad_output": dy, "weight": w},
            z[f"{case}__out"],
            conv=shape,
            gpu=GPU,
            kernels=_kernels(case),
        )
        case = f"{base}_nchw_bwd_weight"
        out[case] = Capture(
            case,
            "conv2d_bwd_weight",
            {"grad_output": dy, "input": x},
            z[f"{case}__out"],
            conv=shape,
            gpu=GPU,
            kernels=_kernels(case),
        )
    c = np.load(SILICON / "capture1_gemms.npz")
    x, w = _bits(c["conv__x"]), _bits(c["conv__w"])
    shape = ConvShape(*x.shape, w.shape[0], w.shape[2], w.shape[3], (1, 1), (1, 1))
    for name in ("conv_nchw", "conv_nhwc", "conv_nchw_again", "conv_nhwc_again"):
        out[name] = Capture(name, "conv2d", {"input": x, "weight": w}, c[name], conv=shape, gpu=GPU)
    return out
