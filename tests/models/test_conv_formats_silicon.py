"""cuDNN's convolution kernels in fp32, TF32, bf16 and fp16 on an NVIDIA H200, reproduced bit for
bit through emu's public implicit-GEMM functions with the schedule found per kernel family (see
FINDINGS_CONV.md of the research branch; captures of session 16, tests/data/captures/README.md).

Each case names the kernel cuDNN ran (the capture's ``kernels``) and the schedule:

* ``sm80_xmma_{fprop,dgrad}_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_*_ffma`` (fp32, and the
  same kernel where TF32 was allowed): one fp32 FMA chain per output (``emu.simt``), gemmK
  (c, r, s) forward and (k, r, s) with the filter taps ascending backward;
* ``implicit_convolve_sgemm``: one fp32 FMA chain, gemmK (c, r, s), any operand format;
* ``convolve_common_engine_float_NHWC``: one fp32 FMA chain, gemmK (r, s, c);
* ``cudnn::cnn::wgrad2d_grouped_direct_kernel``: 32 lanes, lane j an FMA chain over the (n, p, q)
  positions ≡ j (mod 32), then the warp's halving tree (lane i += lane i + 16, 8, 4, 2, 1);
* (``wgrad_alg1_engine``, one FMA chain over (n, p, q), has no capture small enough for the test data);
* ``cutlass_tensorop_{f16,bf16}_s16816{fprop,dgrad}_optimized``: the H100 matrix unit, gemmK
  (r, s, c) forward, (r, s, k) with the filter taps ascending backward, each tap's channels padded
  with zero products to a multiple of 16 (``channel_tile``);
* ``sm80_xmma_fprop_implicit_gemm_indexed_wo_smem``: the H100 matrix unit, gemmK (r, s, c) unpadded;
* the k-tile rule (``sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32``, tf32 operands rounded to
  nearest even; ``cutlass_tensorop_f16_s16816fprop_optimized_*_32x10`` with 48 channels): gemmK
  (c // T, r, s, c % T) for the kernel's k tile T = 32, channels padded with zero products to a
  multiple of T (``channel_block=T, channel_tile=T``).

Skipped with the reason when the capture files are absent.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from emu.implicit_gemm import ConvShape, conv_gemm
from emu.schedule import Schedule
from models.units import unit
from validation.capture_torch import complete

DATA = Path(__file__).resolve().parents[1] / "data" / "captures"
H200 = DATA / "h200_s16"
SWEEP = DATA / "sweep_h200_s16.tar.gz"
CROPS = DATA / "h200_crops"  # benchmarks/captures/crop_wgrad.py: channels of a large capture, the GPU's outputs
PASS = {"conv2d": "fwd", "conv2d_bwd_data": "bwd_data", "conv2d_bwd_weight": "bwd_weight"}
FIRST_SECOND = {
    "fwd": ("input", "weight"),
    "bwd_data": ("grad_output", "weight"),
    "bwd_weight": ("grad_output", "input"),
}
INPUT = {"float32": "tf32", "bfloat16": "bf16", "float16": "fp16"}


def _members(name: str) -> dict:
    path = H200 / f"{name}.npz"
    if not path.is_file() and "_crop" in name:
        path = CROPS / f"{name}.npz"
    if path.is_file():
        return dict(np.load(path))
    if not SWEEP.is_file():
        pytest.skip(f"{name}: neither {path} nor {SWEEP} is present")
    with tarfile.open(SWEEP) as tar:
        try:
            raw = tar.extractfile(f"sweep_small/{name}.npz").read()
        except KeyError:
            pytest.skip(f"{name}: not in {SWEEP.name}")
    return dict(np.load(io.BytesIO(raw)))


def _case(name: str):
    """(pass, ConvShape, first, second, GPU output, kernels, operand format)."""
    m = _members(name)
    if any(k.endswith("_sha256") for k in m):  # operands omitted: drawn again from the seed
        m = complete(m)
    op = str(m["op"])
    pass_ = PASS[op]
    xs = m["input"].shape if "input" in m else tuple(int(v) for v in m["input_shape"])
    ws = m["weight"].shape if "weight" in m else tuple(int(v) for v in m["weight_shape"])
    shape = ConvShape(
        xs[0],
        xs[1],
        xs[2],
        xs[3],
        ws[0],
        ws[2],
        ws[3],
        tuple(int(v) for v in m["stride"]),
        tuple(int(v) for v in m["padding"]),
        tuple(int(v) for v in m["dilation"]),
        int(m["groups"]),
    )
    out = m["out"]
    if out.dtype.kind == "V":  # bf16 stored as raw 2-byte records
        out = out.view(ml_dtypes.bfloat16)
    a, b = FIRST_SECOND[pass_]
    dtype = str(m["dtype"])
    return pass_, shape, m[a], m[b], out, " ".join(str(k) for k in m["kernels"]), INPUT[dtype]


def _same_bits(got: np.ndarray, want: np.ndarray) -> int:
    """Outputs whose bits differ (the fp32 accumulator rounded to the capture's output format)."""
    got = got.astype(want.dtype) if want.dtype != np.float32 else got
    g = np.ascontiguousarray(got).view(f"u{want.dtype.itemsize}").reshape(-1)
    w = np.ascontiguousarray(want).view(f"u{want.dtype.itemsize}").reshape(-1)
    return int(np.count_nonzero(g != w))


WARP_HALVING = Schedule(splits=32, split_rule="strided", reduction="halving")

# (capture, kernel named in it, unit name, k_order, order, channel_tile); a negative channel_tile
# -T is the k-tile rule: gemmK (c // T, r, s, c % T), the channels padded to a multiple of T
CASES = [
    ("t_conv2d_n2c16k16h12r5s1p2_conti_f32", "sm80_xmma_fprop_implicit_gemm_f32f32", "fma32", "crs", None, 0),
    ("t_conv2d_n2c24k40h10r3s1p0_conti_tf32", "sm80_xmma_fprop_implicit_gemm_f32f32", "fma32", "crs", None, 0),
    ("t_conv2d_bwd_data_n2c24k40h10r3s1p0_conti_f32", "sm80_xmma_dgrad_implicit_gemm_f32f32", "fma32", "krs", None, 0),
    ("t_conv2d_bwd_data_n2c16k16h12r5s1p2_chann_f32", "sm80_xmma_dgrad_implicit_gemm_f32f32", "fma32", "krs", None, 0),
    ("t_conv2d_n1c3k16h32r7s2p3_conti_f16", "implicit_convolve_sgemm", "fma32", "crs", None, 0),
    ("t_conv2d_n1c3k16h32r7s2p3_conti_bf16", "implicit_convolve_sgemm", "fma32", "crs", None, 0),
    ("t_conv2d_n2c64k32h9r1s1p0_conti_f32", "implicit_convolve_sgemm", "fma32", "crs", None, 0),
    ("t_conv2d_n1c3k16h32r7s2p3_chann_bf16", "convolve_common_engine_float_NHWC", "fma32", "rsc", None, 0),
    ("t_conv2d_n2c24k40h10r3s1p0_chann_tf32", "convolve_common_engine_float_NHWC", "fma32", "rsc", None, 0),
    ("t_conv2d_bwd_weight_n1c3k16h32r7s2p3_conti_f32", "wgrad2d_grouped_direct_kernel", "fma32", None, WARP_HALVING, 0),
    ("t_conv2d_bwd_weight_n1c3k16h32r7s2p3_chann_f16", "wgrad2d_grouped_direct_kernel", "fma32", None, WARP_HALVING, 0),
    (
        "t_conv2d_bwd_weight_n2c64k32h9r1s1p0_chann_bf16",
        "wgrad2d_grouped_direct_kernel",
        "fma32",
        None,
        WARP_HALVING,
        0,
    ),
    (
        "t_conv2d_bwd_weight_n2c24k40h10r3s1p0_conti_tf32",
        "wgrad2d_grouped_direct_kernel",
        "fma32",
        None,
        WARP_HALVING,
        0,
    ),
    ("s0070_conv2d_n4c21k9h9r5s1p0_chann_f16", "cutlass_tensorop_f16_s16816fprop", "h100", "rsc", None, 16),
    ("s0978_conv2d_n2c46k10h8r3s1p0_conti_f16", "cutlass_tensorop_f16_s16816fprop", "h100", "rsc", None, 16),
    ("s0388_conv2d_n2c23k4h8r5s1p0_chann_f16", "cutlass_tensorop_f16_s16816fprop", "h100", "rsc", None, 16),
    ("s0116_conv2d_bwd_data_n4c4k3h6r3s1p1_conti_f16", "cutlass_tensorop_f16_s16816dgrad", "h100", "rsk", None, 16),
    ("s0004_conv2d_bwd_data_n1c1k13h26r7s1p3_conti_f16", "cutlass_tensorop_f16_s16816dgrad", "h100", "rsk", None, 16),
    ("t_conv2d_bwd_data_n2c48k20h15r3s1p1_chann_bf16", "cutlass_tensorop_bf16_s16816dgrad", "h100", "rsk", None, 16),
    ("t_conv2d_n1c3k16h32r7s2p3_chann_f16", "sm80_xmma_fprop_implicit_gemm_indexed_wo_smem", "h100", "rsc", None, 0),
    ("t_conv2d_n2c48k20h15r3s1p1_chann_f16", "cutlass_tensorop_f16_s16816fprop", "h100", "rsc", None, -32),
    (
        "s0005_conv2d_n2c58k13h8r3s2p0_chann_tf32",
        "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32",
        "h100",
        "rsc",
        None,
        -32,
    ),
    (
        "s1003_conv2d_n1c125k110h7r3s1p0_chann_tf32",
        "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32",
        "h100",
        "rsc",
        None,
        -32,
    ),
]


@pytest.mark.parametrize("name,kernel,unit_name,k_order,order,tile", CASES, ids=[c[0] for c in CASES])
def test_cudnn_conv_bit_exact(name, kernel, unit_name, k_order, order, tile):
    pass_, shape, first, second, out, kernels, fmt = _case(name)
    assert kernel in kernels, f"{name}: ran {kernels}"
    block = -tile if tile < 0 else 0
    u = unit(unit_name, input=fmt)
    got = conv_gemm(pass_, shape, first, second, u, order, k_order, channel_block=block, channel_tile=abs(tile))
    assert _same_bits(got, out) == 0


@pytest.mark.parametrize(
    "name", ["t_conv2d_bwd_data_n2c24k40h10r3s1p0_chann_tf32", "t_conv2d_bwd_data_n2c24k40h10r3s1p0_chann_f16"]
)
def test_sm90_dgrad_rotated_filter(name):
    """``sm90_xmma_dgrad_implicit_gemm`` (Hopper): the k-tile rule over (k // 32, r, s, k % 32)
    with the filter rotated (taps descending), unlike the sm80 / CUTLASS dgrad kernels; and the
    unrotated order differs."""
    pass_, shape, first, second, out, kernels, fmt = _case(name)
    assert "sm90_xmma_dgrad_implicit_gemm" in kernels
    u = unit("h100", input=fmt)
    got = conv_gemm(pass_, shape, first, second, u, None, "rsk", flip=True, channel_block=32, channel_tile=32)
    assert _same_bits(got, out) == 0
    plain = conv_gemm(pass_, shape, first, second, u, None, "rsk", channel_block=32, channel_tile=32)
    assert _same_bits(plain, out) > 0


def test_k_tile_blocks_are_needed():
    """The 58-channel TF32 forward pass needs the channel blocks of the k tile, not only padding."""
    pass_, shape, first, second, out, _, fmt = _case("s0005_conv2d_n2c58k13h8r3s2p0_chann_tf32")
    got = conv_gemm(pass_, shape, first, second, unit("h100", input=fmt), None, "rsc", channel_tile=32)
    assert _same_bits(got, out) > 0


def test_channel_tile_is_needed():
    """Without the per-tap padding the 21-channel fprop differs: the rule is not vacuous."""
    pass_, shape, first, second, out, _, fmt = _case("s0070_conv2d_n4c21k9h9r5s1p0_chann_f16")
    got = conv_gemm(pass_, shape, first, second, unit("h100", input=fmt), None, "rsc")
    assert _same_bits(got, out) > 0


def test_warp_halving_is_needed():
    """A single FMA chain over (n, p, q) does not give the grouped-direct weight gradient."""
    pass_, shape, first, second, out, _, fmt = _case("t_conv2d_bwd_weight_n1c3k16h32r7s2p3_conti_f32")
    got = conv_gemm(pass_, shape, first, second, unit("fma32", input=fmt))
    assert _same_bits(got, out) > 0


# (capture, kernel named in it, pass order, k tile T of the k-tile rule (0: plain order), splits of
# T-wide k tiles): cuDNN's sm80 tf32 tensor-core convolutions on the H200, whose operands hold ties
SM80_TF32 = [
    ("s0351_conv2d_n1c44k48h23r5s2p2_conti_tf32", "sm80_xmma_fprop_implicit_gemm_tf32f32", "rsc", 64, 1),
    ("s0292_conv2d_n4c58k5h14r5s1p0_conti_tf32", "sm80_xmma_fprop_implicit_gemm_tf32f32", "rsc", 64, 1),
    ("s0644_conv2d_n1c243k14h10r3s1p1_conti_tf32", "sm80_xmma_fprop_implicit_gemm_tf32f32", "rsc", 64, 4),
    ("t_conv2d_n2c96k96h14r3s2p1_conti_tf32", "sm80_xmma_fprop_implicit_gemm_tf32f32", "rsc", 64, 1),
    ("t_conv2d_bwd_data_n2c24k40h10r3s1p0_conti_tf32", "sm80_xmma_dgrad_implicit_gemm_tf32f32", "rsk", 64, 1),
    ("s0162_conv2d_n4c133k62h11r7s2p2_chann_tf32", "s1688fprop_optimized_tf32", "rsc", 16, 1),
    ("s0334_conv2d_n2c44k5h10r7s1p1_chann_tf32", "s1688fprop_optimized_tf32", "rsc", 16, 1),
    ("s1174_conv2d_n2c12k2h21r7s2p1_conti_tf32", "sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_tf32", "rsc", 0, 1),
]


@pytest.mark.parametrize("name,kernel,k_order,T,splits", SM80_TF32, ids=[c[0] for c in SM80_TF32])
def test_sm80_tf32_kernels_round_operands_to_nearest_ties_away(name, kernel, k_order, T, splits):
    """Code built for sm_80 makes tf32 with PTX ``cvt.rna.tf32.f32`` (ties away from zero; sm_80 has
    no ``cvt.rn`` to tf32): with ties away every output is the GPU's, with ties to even (the rule
    of the GEMMs and the sm90 kernels) some are not."""
    pass_, shape, first, second, out, kernels, fmt = _case(name)
    assert kernel in kernels, f"{name}: ran {kernels}"
    u = unit("h100", input=fmt)
    order = Schedule(k_tile=T, splits=splits) if splits > 1 else None
    runs = {
        r: conv_gemm(pass_, shape, first, second, u, order, k_order, channel_block=T, channel_tile=T, tf32_rounding=r)
        for r in ("rna", "rne")
    }
    assert _same_bits(runs["rna"], out) == 0
    assert _same_bits(runs["rne"], out) > 0


def test_sm90_wgrad_hands_the_raw_fp32_bits_to_the_unit():
    """``sm90_xmma_wgrad_indexed_implicit_gemm_f32f32_tf32f32`` rounds neither operand: one chain
    over (n, p, q) of the raw bits (the unit dropping the 13 low ones) is the GPU's weight gradient;
    rounded first, to nearest even or away, every output differs."""
    pass_, shape, first, second, out, kernels, fmt = _case("s0570_conv2d_bwd_weight_n1c12k2h27r3s1p1_chann_tf32")
    assert "sm90_xmma_wgrad_indexed_implicit_gemm_f32f32_tf32f32" in kernels
    u = unit("h100", input=fmt)
    assert _same_bits(conv_gemm(pass_, shape, first, second, u, tf32_rounding=""), out) == 0
    for r in ("rne", "rna"):
        assert _same_bits(conv_gemm(pass_, shape, first, second, u, tf32_rounding=r), out) == out.size


SEGMENT_K = "t_bench_conv2d_bwd_weight_n8c128h28_tf32_crop4x4"


def test_sm90_segment_k_wgrad_adds_its_segments_as_a_tree_of_halves():
    """``sm90_xmma_wgrad_indexed_…_tilesize128x64x32_…_segment_k_on`` (a 147,456-output weight
    gradient on the H200; here its first 4 output and 4 input channels, which read nothing else):
    gemmK (n, p, q) = 6,272 cut into 7 segments of 28 k tiles of 32, each a chain of the unit over
    the raw fp32 bits from +0, the 7 partials added as (p0 + (p1+p2)) + ((p3+p4) + (p5+p6))."""
    pass_, shape, first, second, out, kernels, fmt = _case(SEGMENT_K)
    assert "segment_k_on" in kernels and shape.N * shape.H * shape.W == 6272
    u = unit("h100", input=fmt)

    def run(splits=7, reduction="bisection", rounding=""):
        order = Schedule(k_tile=32, splits=splits, reduction=reduction)
        return conv_gemm(pass_, shape, first, second, u, order, "npq", tf32_rounding=rounding)

    assert _same_bits(run(), out) == 0
    # every part of the rule is needed: the tree, the count, the raw bits
    for other in (
        run(reduction="tree"),
        run(reduction="sequential"),
        run(splits=6),
        run(splits=8),
        run(rounding="rne"),
    ):
        assert _same_bits(other, out) > 0
