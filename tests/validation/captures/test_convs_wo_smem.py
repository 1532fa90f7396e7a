"""cuDNN's fp16 fprop kernel without shared memory (``sm80_xmma_fprop_implicit_gemm_indexed_wo_smem``,
issue 37), judged by the H200's bits.

Each thread of a quad loads 8 consecutive gemmK elements (16 bytes) straight into its
``mma.m16n8k16`` fragments, so each 32 of gemmK (r, s, c) reach the unit as two groups of 16:
elements 0-3, 8-11, 16-19, 24-27, then the rest; the last 32 zero-padded. The captures are the
held-out and session-16 sweep files (tests/data/captures, README there).
"""

import tarfile
from pathlib import Path

import numpy as np
import pytest
from capture_data import differing_bits

import emu
from emu.schedule import Schedule
from models.units import unit
from validation.captures.capture import load_capture
from validation.captures.convs import quad_load_order, quad_load_width
from validation.captures.gemms import Candidate, Variant, run_candidate
from validation.captures.search import search
from validation.captures.space import conv_variants

DATA = Path(__file__).resolve().parents[2] / "data" / "captures"
WO_SMEM = "sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize{}_stage1_warpsize4x1x1_g1_tensor16x8x16_{}execute_kernel__5x_cudnn"


def _cap(name, tmp_path_factory=None):
    path = DATA / name
    if path.is_file():
        return load_capture(path)
    sweep = DATA / "sweep_h200_s16.tar.gz"
    if name.startswith("sweep_small/") and sweep.is_file() and tmp_path_factory is not None:
        root = tmp_path_factory.getbasetemp() / "sweep"
        if not (root / name).is_file():
            with tarfile.open(sweep) as tar:
                tar.extract(name, root, filter="data")
        return load_capture(root / name)
    pytest.skip(f"{path} is absent")


_differ = differing_bits


def test_the_order_of_one_chunk():
    seq = quad_load_order(40)
    assert list(seq[:16]) == [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27]
    assert list(seq[16:32]) == [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31]
    # the last chunk: 8 elements, thread 0's stretch, split over the two instructions
    assert list(seq[32:]) == [32, 33, 34, 35] + [-1] * 12 + [36, 37, 38, 39] + [-1] * 12


def test_width_from_the_name():
    assert quad_load_width([WO_SMEM.format("128x32x64", "alignc8_")]) == 32
    assert quad_load_width([WO_SMEM.format("128x16x64", "aligna8_alignc2_")]) == 32
    assert quad_load_width([WO_SMEM.format("128x16x32", "aligna2_alignc8_")]) == 0  # 2-element loads
    assert quad_load_width([WO_SMEM.format("128x32x16", "aligna8_alignc8_")]) == 0  # one instruction per tile
    assert quad_load_width(["sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x32x64"]) == 0


QUAD = [
    "h200_holdout/h_conv2d_n1c8k16h32r5s1_chann_7.npz",  # 5×5, 8 channels: 7 outputs differ in (r, s, c)
    "h200_holdout/h_conv2d_n2c16k8h32r3s1_chann_19.npz",  # 3×3, 16 channels: 14 differ
    "sweep_small/s0098_conv2d_n4c8k2h32r5s1p2_conti_f16.npz",
    "sweep_small/s0826_conv2d_n1c16k1h32r5s1p2_chann_f16.npz",
]


@pytest.mark.parametrize("name", QUAD)
def test_every_output_bit_and_the_plain_order_misses(name, tmp_path_factory):
    cap = _cap(name, tmp_path_factory)
    assert quad_load_width(cap.kernels) == 32
    first = conv_variants(cap, [])[0]
    assert first == Variant("rsc", quad_loads=32)
    sch = Schedule(output="fp16")
    assert _differ(run_candidate(cap, Candidate("h100", first, sch)), cap.out) == 0
    assert _differ(run_candidate(cap, Candidate("h100", Variant("rsc"), sch)), cap.out) > 0


def test_the_last_chunk_is_padded():
    """Without the zero padding of the last 32 (its elements summed as one group) the held-out
    5×5 capture (gemmK 200 = 6·32 + 8) still differs: the predicated loads are part of the order."""
    cap = _cap("h200_holdout/h_conv2d_n1c8k16h32r5s1_chann_7.npz")
    s = cap.conv
    x = np.asarray(cap.operands["input"]).view(np.float16).reshape(s.N, s.C, s.H, s.W)
    w = np.asarray(cap.operands["weight"]).view(np.float16).reshape(s.K, s.C, s.R, s.S)
    # rows (p, q), columns (r, s, c) ascending: the plain implicit GEMM, built here by loops
    xp = np.pad(x[0], ((0, 0), (2, 2), (2, 2)))
    A = np.stack([xp[:, p : p + 5, q : q + 5].transpose(1, 2, 0).reshape(-1) for p in range(32) for q in range(32)])
    B = w.transpose(2, 3, 1, 0).reshape(-1, s.K)
    K = A.shape[1]
    full = quad_load_order(K)
    unpadded = np.concatenate([full[: K - K % 32], [i for i in full[K - K % 32 :] if i >= 0]])

    def run(seq):
        idx = np.maximum(seq, 0)
        a, b = A[:, idx].copy(), B[idx].copy()
        a[:, seq < 0] = 0
        out = np.asarray(emu.gemm(a, b, None, unit("h100")), np.float32).astype(np.float16)
        return out.T.reshape(cap.out.shape)

    assert _differ(run(full), cap.out) == 0
    assert _differ(run(unpadded), cap.out) > 0


def test_search_finds_it_first():
    cap = _cap("h200_holdout/h_conv2d_n2c16k8h32r3s1_chann_19.npz")
    r = search(cap)
    assert r.answer == "identical" and r.best.variant.quad_loads == 32
    assert r.best.fields()["quad_loads"] == 32 and "quad" in r.best.describe()
