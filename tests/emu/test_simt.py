"""The fp32 SIMT GEMM (emu.simt): every step the IEEE binary32 fused multiply-add, checked against
an exact oracle written here with fractions.Fraction (exact product and sum, one rounding to
fp32 by hand), split-K with CUTLASS's ReduceSplitK order and the alpha/beta epilogue, and the
cases where rounding the float64 sum to fp32 would round twice."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from emu.gemm import GemmOrder, gemm
from emu.schedule import Schedule
from emu.simt import fma32_scalar, fma_gemm, is_fp32_fma, splitk_schedule
from models.units import unit


def _rn32(q: Fraction, zero_negative: bool = False) -> np.float32:
    """The exact value q rounded to fp32, to nearest, ties to even (subnormals, overflow to ±inf)."""
    if q == 0:
        return np.float32(-0.0 if zero_negative else 0.0)
    neg, m = q < 0, abs(q)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1
    e = max(e, -126)
    ulp = Fraction(2) ** (e - 23)
    n = m / ulp
    fl = n.numerator // n.denominator
    rem = n - fl
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2):
        fl += 1
    value = fl * ulp
    if value >= Fraction(2) ** 128:
        return np.float32(-np.inf if neg else np.inf)
    x = float(value)  # exact: ≤ 25 significant bits, ≥ 2^-149
    return np.float32(-x if neg else x)


def _fma_ref(a: np.float32, b: np.float32, c: np.float32) -> np.float32:
    """RN32(a·b + c) for finite a, b, c, from the exact rational sum; an exact zero sum is −0
    only when both a·b and c are −0 (IEEE 754 §6.3)."""
    p = Fraction(float(a)) * Fraction(float(b))
    s = p + Fraction(float(c))
    if s == 0:
        p_neg = (math.copysign(1, a) * math.copysign(1, b)) < 0
        both_neg = p_neg and math.copysign(1, c) < 0 and p == 0 and c == 0
        return _rn32(s, both_neg)
    return _rn32(s)


def _bits(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


def _random_fp32(rng, shape, lo=-140, hi=20) -> np.ndarray:
    """fp32 values over many binades, subnormals and signed zeros among them."""
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(lo, hi, shape)).astype(np.float32)
    flat = x.reshape(-1)
    flat[rng.random(flat.size) < 0.05] = 0.0
    flat[rng.random(flat.size) < 0.05] = -0.0
    return x


def test_fma_scalar_matches_the_exact_oracle_on_random_and_cancelling_triples():
    rng = np.random.default_rng(1)
    a = _random_fp32(rng, 4000, -75, 40)
    b = _random_fp32(rng, 4000, -75, 40)
    c = _random_fp32(rng, 4000, -140, 60)
    # a third of the c's cancel the product nearly exactly (the product rounded to fp32, negated)
    near = rng.random(4000) < 0.33
    c[near] = -(a[near].astype(np.float64) * b[near]).astype(np.float32)
    got = np.array([fma32_scalar(x, y, z) for x, y, z in zip(a, b, c)], np.float32)
    want = np.array([_fma_ref(x, y, z) for x, y, z in zip(a, b, c)], np.float32)
    assert np.array_equal(_bits(got), _bits(want))


def test_fma_scalar_rounds_once_where_the_float64_sum_is_an_fp32_midpoint():
    # a·b = 2^6·(1 − 2^-46) = 2^6 − 2^-40; c = 2^30 + 2^7 (fp32 ulp 2^7, last bit odd). The exact
    # sum lies just below the midpoint 2^30 + 2^7 + 2^6; float64 rounds it onto the midpoint,
    # and rounding that to fp32 (ties to even) would give 2^30 + 2^8.
    a, b = np.float32(2.0**6 * (1 + 2.0**-23)), np.float32(1 - 2.0**-23)
    for sign in (1, -1):
        c = np.float32(sign * (2.0**30 + 2.0**7))
        sa = np.float32(sign * a)
        twice = np.float32(np.float64(sa) * np.float64(b) + np.float64(c))
        assert float(twice) == sign * (2.0**30 + 2.0**8)  # the double rounding this avoids
        assert float(fma32_scalar(sa, b, c)) == sign * (2.0**30 + 2.0**7)
        assert _bits(fma32_scalar(sa, b, c)) == _bits(_fma_ref(sa, b, c))
    # above the midpoint: a·b = 2^6·(1 + 2^-23)^2 = 2^6 + 2^-16 + 2^-40 with c = 2^30: exact sum above
    # the midpoint 2^30 + 2^6 → up; and the tie itself (b = 1) → even
    a2 = np.float32(2.0**6 * (1 + 2.0**-23))
    assert float(fma32_scalar(a2, np.float32(1 + 2.0**-23), np.float32(2.0**30))) == 2.0**30 + 2.0**7
    assert float(fma32_scalar(np.float32(2.0**6), np.float32(1), np.float32(2.0**30))) == 2.0**30


def test_fma_scalar_overflow_threshold_and_specials():
    big = np.float32(np.finfo(np.float32).max)
    # FLT_MAX + (2^103 − 2^-21·…): just below the overflow midpoint 2^128 − 2^103 stays FLT_MAX
    a, b = np.float32(2.0**103), np.float32(1 - 2.0**-24)
    assert _bits(fma32_scalar(a, b, big)) == _bits(big)
    assert _bits(fma32_scalar(-a, b, -big)) == _bits(-big)
    assert np.isposinf(fma32_scalar(np.float32(2.0**103), np.float32(1), big))  # the tie: to inf
    assert np.isnan(fma32_scalar(np.float32(np.inf), np.float32(0), np.float32(1)))
    assert np.isposinf(fma32_scalar(np.float32(np.inf), np.float32(2), np.float32(1)))
    assert np.isnan(fma32_scalar(np.float32(np.inf), np.float32(1), np.float32(-np.inf)))
    # signed zeros: (−0)·(+1) + (−0) = −0; (−0)·1 + (+0) = +0; 1·1 + (−1) = +0
    one = np.float32(1)
    assert _bits(fma32_scalar(np.float32(-0.0), one, np.float32(-0.0))) == 0x80000000
    assert _bits(fma32_scalar(np.float32(-0.0), one, np.float32(0.0))) == 0
    assert _bits(fma32_scalar(one, one, np.float32(-1))) == 0


def _chain_ref(A, B, m, n, ks, start=None) -> np.float32:
    c = np.float32(0) if start is None else start
    for k in ks:
        c = _fma_ref(A[m, k], B[k, n], c)
    return c


def _add32(x, y) -> np.float32:
    return _fma_ref(np.float32(1), x, y)


@pytest.mark.parametrize("seed", [0, 1])
def test_one_chain_is_k_ascending_fmas_from_c(seed):
    rng = np.random.default_rng(seed)
    M, N, K = 5, 7, 33
    A, B = _random_fp32(rng, (M, K), -60, 30), _random_fp32(rng, (K, N), -60, 30)
    C = _random_fp32(rng, (M, N), -60, 40)
    got = fma_gemm(A, B, C)
    want = np.array([[_chain_ref(A, B, m, n, range(K), C[m, n]) for n in range(N)] for m in range(M)], np.float32)
    assert np.array_equal(_bits(got), _bits(want))
    # the same on bit patterns and a given k order
    perm = tuple(int(i) for i in rng.permutation(K))
    got = fma_gemm(A.view(np.uint32), B.view(np.uint32), None, GemmOrder(k_order=perm))
    want = np.array([[_chain_ref(A, B, m, n, perm) for n in range(N)] for m in range(M)], np.float32)
    assert np.array_equal(_bits(got), _bits(want))


def test_split_k_partials_reduced_onto_zero_in_split_order_then_alpha_beta():
    """CUTLASS's split-K sgemm + ReduceSplitK: splits of 8-wide k tiles at given tile bounds, each
    chain from +0; acc = +0 + p0 + p1 + …; out = RN32(alpha·acc + RN32(beta·C))."""
    rng = np.random.default_rng(3)
    M, N, K = 4, 6, 45  # 6 k tiles of 8, the last one 5 wide
    A, B = _random_fp32(rng, (M, K), -30, 10), _random_fp32(rng, (K, N), -30, 10)
    C = _random_fp32(rng, (M, N), -30, 10)
    bounds = (0, 2, 3, 6)  # tiles → k ranges [0, 16), [16, 24), [24, 45)
    ranges = [range(0, 16), range(16, 24), range(24, 45)]
    alpha, beta = np.float32(1.5), np.float32(-0.75)
    sched = Schedule(
        k_tile=8, splits=3, split_bounds=bounds, reduction="workspace", c_entry="epilogue", alpha=1.5, beta=-0.75
    )
    assert splitk_schedule(3, split_bounds=bounds, alpha=1.5, beta=-0.75) == sched
    got = fma_gemm(A, B, C, sched)
    want = np.empty((M, N), np.float32)
    for m in range(M):
        for n in range(N):
            acc = np.float32(0)
            for r in ranges:
                acc = _add32(acc, _chain_ref(A, B, m, n, r))
            beta_c = _rn32(Fraction(float(beta)) * Fraction(float(C[m, n])))
            want[m, n] = _fma_ref(alpha, acc, beta_c)
    assert np.array_equal(_bits(got), _bits(want))
    # the splits matter: one chain over all of K gives other bits on these operands
    one = fma_gemm(A, B, C, Schedule(c_entry="epilogue", alpha=1.5, beta=-0.75))
    assert not np.array_equal(_bits(one), _bits(got))


def test_integer_operands_give_the_exact_product():
    rng = np.random.default_rng(4)
    A = rng.integers(-64, 64, (9, 300)).astype(np.float32)
    B = rng.integers(-64, 64, (300, 11)).astype(np.float32)
    exact = A.astype(np.float64) @ B.astype(np.float64)  # |sums| < 2^21: every partial sum exact
    got = fma_gemm(A, B, None, Schedule(k_tile=8, splits=4, reduction="workspace"))
    assert np.array_equal(got.astype(np.float64), exact)


def test_agrees_with_the_fma_unit_where_products_fit_fp32():
    """On tf32 values (11-bit significands, products exact in fp32) the fp32-operand chain and
    the FMA unit's kernel (emu.kernels.fma, another code path) give the same bits."""
    rng = np.random.default_rng(5)
    A = (_random_fp32(rng, (6, 70), -40, 20).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    B = (_random_fp32(rng, (70, 9), -40, 20).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    u = unit("fma32", input="tf32")
    assert is_fp32_fma(u) and not is_fp32_fma(unit("h100", input="tf32"))
    for order in (None, GemmOrder(split_k=3)):
        assert np.array_equal(_bits(fma_gemm(A, B, None, order)), _bits(gemm(A, B, None, u, order)))


def test_rejects_other_operands():
    with pytest.raises(TypeError, match="float32"):
        fma_gemm(np.ones((2, 2)), np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match="instruction_k"):
        fma_gemm(np.ones((2, 4), np.float32), np.ones((4, 2), np.float32), None, Schedule(instruction_k=4))


def test_the_epilogue_without_fma_rounds_alpha_acc_first():
    """``epilogue_fma=False``: RN32(RN32(alpha·acc) + RN32(beta·C)), computed here with exact
    fractions, one rounding at a time; the default (CUTLASS's LinearCombination) rounds
    alpha·acc + RN32(beta·C) once. With alpha = RN32(0.3) the two differ on some outputs."""
    rng = np.random.default_rng(21)
    A = rng.uniform(-1, 1, (12, 40)).astype(np.float32)
    B = rng.uniform(-1, 1, (40, 10)).astype(np.float32)
    C = rng.uniform(-1, 1, (12, 10)).astype(np.float32)
    alpha, beta = float(np.float32(0.3)), float(np.float32(0.7))
    acc = fma_gemm(A, B, None, Schedule())
    sep = fma_gemm(A, B, C, Schedule(c_entry="epilogue", alpha=alpha, beta=beta, epilogue_fma=False))
    fused = fma_gemm(A, B, C, Schedule(c_entry="epilogue", alpha=alpha, beta=beta))

    def rn32(x: Fraction) -> Fraction:
        return Fraction(float(_rn32(x)))

    n_differ = 0
    for i in range(12):
        for j in range(10):
            a, bc = Fraction(float(acc[i, j])), rn32(Fraction(beta) * Fraction(float(C[i, j])))
            want_sep = rn32(rn32(Fraction(alpha) * a) + bc)
            assert Fraction(float(sep[i, j])) == want_sep, (i, j)
            n_differ += sep[i, j].view(np.uint32) != fused[i, j].view(np.uint32)
    assert n_differ > 0
