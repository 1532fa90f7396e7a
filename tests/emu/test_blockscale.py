"""Block-scaled units (MX, NVFP4; issue 39.2) against the exact reference, bit for bit.

``emu.dot_add`` with ``scale_a`` / ``scale_b`` on every block-scaled instruction of
``models.unit`` (kind::mxf8f6f4 for every operand pair, kind::mxf4, kind::mxf4nvf4 with each
scale and block), on the input families of tests/scaled_inputs.py, against
tests/exact_reference_scaled.py (Fractions, no emu code); then the interface: the GEMM form,
broadcasting, dtypes, and the errors.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import emu
import models
from emu.units import Family, InputFormat, Rounding, ScaleFormat, UnitParams, check_params
from tests.exact_reference_scaled import fp32_bits, reference_scaled_dot
from tests.scaled_inputs import FAMILIES, family_rows

FP8F6F4 = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
CONFIGS = [("mxf8f6f4", fa, fb, "ue8m0", 32) for fa in FP8F6F4 for fb in FP8F6F4] + [
    ("mxf4", "e2m1", "e2m1", "ue8m0", 32),
    ("mxf4nvf4", "e2m1", "e2m1", "ue8m0", 32),
    ("mxf4nvf4", "e2m1", "e2m1", "ue8m0", 16),
    ("mxf4nvf4", "e2m1", "e2m1", "ue4m3", 16),
]
ROWS, K = 8, 128
VALUES = {
    "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "e3m2": ml_dtypes.float6_e3m2fn,
    "e2m3": ml_dtypes.float6_e2m3fn,
    "e2m1": ml_dtypes.float4_e2m1fn,
}


def _bits(x: np.ndarray) -> np.ndarray:
    """fp32 patterns, every NaN as one pattern (NaNs compare as a class)."""
    x = np.asarray(x, np.float32)
    return np.where(np.isnan(x), np.uint32(0x7FC00000), x.view(np.uint32))


@pytest.mark.parametrize("kind, fa, fb, scale, block", CONFIGS, ids=lambda v: str(v))
def test_reference(kind, fa, fb, scale, block):
    u = models.unit("b200", input=(fa, fb), scale=scale, block=block, kind=kind)
    assert u.params == models.unit("rtx-blackwell", input=(fa, fb), scale=scale, block=block, kind=kind).params
    seed = hash((kind, fa, fb, scale, block)) % 2**32
    for n, family in enumerate(FAMILIES):
        a, b, sa, sb, c = family_rows(family, fa, fb, scale, block, ROWS, K, seed + n)
        got = _bits(emu.dot_add(a, b, c, u, scale_a=sa, scale_b=sb))
        want = [reference_scaled_dot(a[p], b[p], sa[p], sb[p], fp32_bits(c[p]), u.params) for p in range(ROWS)]
        want = _bits(np.array(want, np.uint32).view(np.float32))
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, f"{family}: rows {bad[:4]} got {got[bad[:4]]} want {want[bad[:4]]}"


def _unit_rows(kind="mxf8f6f4", fa="e4m3", fb="e2m1", scale="ue8m0", block=32, P=6, k=64, family="uniform"):
    u = models.unit("b200", input=(fa, fb), scale=scale, block=block, kind=kind)
    return u, family_rows(family, fa, fb, scale, block, P, k, 7)


def test_values_and_patterns_agree():
    u, (a, b, sa, sb, c) = _unit_rows()
    by_bits = emu.dot_add(a, b, c, u, scale_a=sa, scale_b=sb)
    by_values = emu.dot_add(
        a.view(VALUES["e4m3"]),
        b.view(VALUES["e2m1"]),
        c,
        u,
        scale_a=sa.view(ml_dtypes.float8_e8m0fnu),
        scale_b=sb.view(ml_dtypes.float8_e8m0fnu),
    )
    assert np.array_equal(_bits(by_bits), _bits(by_values))


def test_ue4m3_sign_bit_ignored():
    u, (a, b, sa, sb, c) = _unit_rows("mxf4nvf4", "e2m1", "e2m1", "ue4m3", 16)
    plain = emu.dot_add(a, b, c, u, scale_a=sa, scale_b=sb)
    signed = emu.dot_add(a, b, c, u, scale_a=(sa | 0x80).view(ml_dtypes.float8_e4m3fn), scale_b=sb)
    assert np.array_equal(_bits(plain), _bits(signed))


def test_gemm_and_broadcast_match_rows():
    u, (a, b, sa, sb, c) = _unit_rows(P=5)
    M, N = 3, 5
    A, SA = a[:M], sa[:M]
    B, SB = b[:N].T, sb[:N].T  # (K, N) and (K // 32, N)
    C = np.arange(M * N, dtype=np.float32).reshape(M, N) - 7.5
    g = emu.gemm(A, B, C, u, scale_a=SA, scale_b=SB)
    rows = emu.dot_add(A[:, None, :], B.T[None], C, u, scale_a=SA[:, None, :], scale_b=SB.T[None])
    assert g.shape == (M, N) and np.array_equal(_bits(g), _bits(rows))
    for m in range(M):
        for n in range(N):
            one = emu.dot_add(A[m], B[:, n], C[m, n], u, scale_a=SA[m], scale_b=SB[:, n])
            assert _bits(one) == _bits(g[m, n])
    assert np.array_equal(
        _bits(emu.gemm(A, B, None, u, scale_a=SA, scale_b=SB)),
        _bits(emu.gemm(A, B, np.float32(0), u, scale_a=SA, scale_b=SB)),
    )


def test_scale_of_each_block_applies_to_its_values():
    u = models.unit("b200", input="e4m3", scale="ue8m0", block=32)
    a = np.full(64, 0x38, np.uint8)  # 1.0
    b = np.zeros(64, np.uint8)
    b[40] = 0x38  # only k = 40 (block 1) is non-zero
    sa = np.array([127 + 5, 127 - 3], np.uint8)
    sb = np.array([127 + 9, 127 + 1], np.uint8)
    assert emu.dot_add(a, b, np.float32(0), u, scale_a=sa, scale_b=sb) == np.float32(2.0**-2)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda u, a, b, sa, sb: emu.dot_add(a, b, np.float32(0), u), "scale_a: the unit is block-scaled"),
        (
            lambda u, a, b, sa, sb: emu.dot_add(a, b, np.float32(0), u, scale_a=sa[:, :1], scale_b=sb),
            "scale_a: 1 scales",
        ),
        (
            lambda u, a, b, sa, sb: emu.dot_add(a[:, :48], b[:, :48], np.float32(0), u, scale_a=sa, scale_b=sb),
            "not a multiple",
        ),
        (
            lambda u, a, b, sa, sb: emu.dot_add(a.astype(np.float32), b, np.float32(0), u, scale_a=sa, scale_b=sb),
            "a: the unit multiplies e4m3",
        ),
        (
            lambda u, a, b, sa, sb: emu.dot_add(a, b | 0xF0, np.float32(0), u, scale_a=sa, scale_b=sb),
            "b: e2m1 bit patterns are 4 bits",
        ),
        (
            lambda u, a, b, sa, sb: emu.dot_add(a, b, np.float32(0), u, scale_a=sa.astype(np.float32), scale_b=sb),
            "scale_a: expected ue8m0",
        ),
        (
            lambda u, a, b, sa, sb: emu.gemm(a, b.T, None, u, emu.GemmOrder(split_k=2), scale_a=sa, scale_b=sb.T),
            "order:",
        ),
        (
            lambda u, a, b, sa, sb: emu.dot_add(a, b, np.float32(0), models.unit("b200", input="e4m3"), scale_a=sa),
            "not block-scaled",
        ),
    ],
)
def test_errors(call, message):
    u, (a, b, sa, sb, c) = _unit_rows()
    with pytest.raises((TypeError, ValueError), match=message):
        call(u, a, b, sa, sb)


def test_models_unit_choices():
    assert models.unit("b200", input="e2m1", scale="ue8m0", block=32).family == Family.GROUPED_SCALED  # kind::mxf4
    assert models.unit("b200", input="e2m1", scale="ue8m0", block=32, kind="mxf8f6f4").family == Family.SCALED_FUSED
    nv = models.unit("rtx5090", input="e2m1", scale="ue4m3", block=16)
    assert (nv.name, nv.scale_format, nv.block_size, nv.subgroup_size) == ("rtx-blackwell", ScaleFormat.UE4M3, 16, 16)
    mixed = models.unit("b200", input=("e5m2", "e2m3"), scale="ue8m0", block=32)
    assert (mixed.input_format, mixed.b_input_format) == (InputFormat.E5M2, InputFormat.E2M3)
    assert all(mixed.source(f) for f in UnitParams._fields)
    for kwargs, message in [
        (dict(input="e4m3", scale="ue4m3", block=16), "kind::mxf8f6f4 has no ue4m3"),
        (dict(input="e2m1", scale="ue4m3", block=32), "kind::mxf4nvf4 has no ue4m3 scale per 32"),
        (dict(input="e4m3", scale="ue8m0", block=32, kind="mxf4"), "multiplies e2m1 × e2m1"),
        (dict(input="fp16", scale="ue8m0", block=32), "not fp16"),
        (dict(input="e4m3", scale="e8m0", block=32), "scale: 'e8m0'"),
        (dict(input="e4m3", scale="ue8m0", block=64), "block: 64"),
        (dict(input="e4m3", scale="ue8m0"), "needs both"),
        (dict(input="e4m3", scale="ue8m0", block=32, output="fp16"), "fp32 only"),
    ]:
        with pytest.raises(ValueError, match=message):
            models.unit("b200", **kwargs)
    with pytest.raises(ValueError, match="no block-scaled instructions"):
        models.unit("h100", input="e4m3", scale="ue8m0", block=32)
    with pytest.raises(ValueError, match="block-scaled instructions only"):
        models.unit("rtx-blackwell")


def test_check_params_block_fields():
    u = models.unit("b200", input="e2m1", scale="ue4m3", block=16)
    for change, message in [
        (dict(scale_format=0), "needs a scale format"),
        (dict(subgroup_size=5), "subgroup_size"),
        (dict(flush_inputs=True), "flush_inputs"),
        (dict(fraction_bits=48), "inexact"),
        (dict(input_format=InputFormat.E4M3), "e2m1"),
        (dict(zero_exponent=-500), "zero_exponent"),
    ]:
        with pytest.raises(ValueError, match=message):
            dataclasses.replace(u, **change)
    with pytest.raises(ValueError, match="unit.block_size: only block-scaled"):
        check_params(models.unit("b200", input="e4m3").params._replace(block_size=32))
    rd = dataclasses.replace(u, alignment_rounding=Rounding.RD)  # a variant to explore runs
    a, b, sa, sb, c = family_rows("cancel", "e2m1", "e2m1", "ue4m3", 16, 4, 64, 3)
    got = _bits(emu.dot_add(a, b, c, rd, scale_a=sa, scale_b=sb))
    want = [reference_scaled_dot(a[p], b[p], sa[p], sb[p], fp32_bits(c[p]), rd.params) for p in range(4)]
    assert np.array_equal(got, _bits(np.array(want, np.uint32).view(np.float32)))


@pytest.mark.parametrize("kind", ["mxf8f6f4", "mxf4"])
def test_zero_exponent_decides(kind):
    """c = 0, a zero product, the other products below 2^zero_exponent: the zero's exponent sets
    the grid, and a product below it is cut away (MMA-Sim e[s == 0] = e_zero; gst_fdpa's
    apply_e_zero). With a zero exponent far below, the product survives and RZ shows it."""
    u = models.unit("b200", input="e4m3" if kind == "mxf8f6f4" else "e2m1", scale="ue8m0", block=32, kind=kind)
    a = np.zeros(64, np.uint8)
    b = np.zeros(64, np.uint8)
    if kind == "mxf8f6f4":  # 1·1 and −2^-9·2^-9 under 2^-142: 2^-142 and −2^-160 (grid 2^-158)
        a[:2], b[:2] = (0x38, 0x81), (0x38, 0x01)
        sa = sb = np.array([127 - 71, 127], np.uint8)
    else:  # 1·1 under 2^-142 in block 0, −0.5·0.5 under 2^-175 in block 1 (grid 2^-174)
        a[0], b[0], a[32], b[32] = 0x2, 0x2, 0x9, 0x1
        sa, sb = np.array([127 - 71, 127 - 88], np.uint8), np.array([127 - 71, 127 - 87], np.uint8)
    far = dataclasses.replace(u, zero_exponent=-300)
    got = [emu.dot_add(a, b, np.float32(0), x, scale_a=sa, scale_b=sb) for x in (u, far)]
    assert got[0] == np.float32(2.0**-142)
    assert got[1] == np.float32(2.0**-142 - 2.0**-149)
    for x, g in zip((u, far), got):
        assert _bits(g) == reference_scaled_dot(a, b, sa, sb, 0, x.params)


@pytest.mark.parametrize("kind, fa, fb, scale, block", [CONFIGS[1], CONFIGS[-1], CONFIGS[-4]], ids=str)
@pytest.mark.parametrize("family", FAMILIES)
def test_gemm_layout_equals_rows(kind, fa, fb, scale, block, family):
    """The GEMM layout (one A row per output row) gives the bits of the rows layout (one A vector
    per output), checked against the reference: every family, both families of units."""
    u = models.unit("b200", input=(fa, fb), scale=scale, block=block, kind=kind)
    a, b, sa, sb, c = family_rows(family, fa, fb, scale, block, 12, K, 11)
    M, N = 4, 3
    A, SA, B, SB = a[:M], sa[:M], b[M : M + N].T, sb[M : M + N].T
    C = c[: M * N].reshape(M, N)
    g = _bits(emu.gemm(A, B, C, u, scale_a=SA, scale_b=SB))
    want = [
        [reference_scaled_dot(A[m], B[:, n], SA[m], SB[:, n], fp32_bits(C[m, n]), u.params) for n in range(N)]
        for m in range(M)
    ]
    assert np.array_equal(g, _bits(np.array(want, np.uint32).view(np.float32)))


@pytest.mark.parametrize("kind, fa, fb, scale, block", [CONFIGS[0], CONFIGS[-1]], ids=str)
def test_gemm_tiles_and_threads_do_not_change_the_bits(kind, fa, fb, scale, block):
    """The GEMM layout runs tiles of rows × lanes in parallel (emu.kernels.scaled): rows and
    columns that end mid-tile, at one thread and at two, give the bits of the rows layout, one
    output per row (whose tasks are single outputs' lanes), for every output."""
    import numba

    u = models.unit("b200", input=(fa, fb), scale=scale, block=block, kind=kind)
    M, N, k = 37, 300, 96
    a, b, sa, sb, c = family_rows("uniform", fa, fb, scale, block, max(M, N), k, 5)
    A, SA, B, SB = a[:M], sa[:M], b[:N].T, sb[:N].T
    C = np.resize(c, M * N).reshape(M, N)
    rows = _bits(
        emu.dot_add(
            np.repeat(A, N, 0),
            np.tile(B.T, (M, 1)),
            C.reshape(-1),
            u,
            scale_a=np.repeat(SA, N, 0),
            scale_b=np.tile(SB.T, (M, 1)),
        )
    ).reshape(M, N)
    before = numba.get_num_threads()
    try:
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            assert np.array_equal(_bits(emu.gemm(A, B, C, u, scale_a=SA, scale_b=SB)), rows), threads
    finally:
        numba.set_num_threads(before)
