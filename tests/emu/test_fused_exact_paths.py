"""The MI100 kernel's (fused exact) shortcuts against the exact oracle, bit for bit.

The kernel accepts a lane's plain float64 result when it can prove it right: small sums (the
first test), terms on a common grid (T ≤ 2^29 × the smallest term) or float64 errors too small to
move the fp32 rounding (the settled test); every other lane takes the exact TwoSum path. These
cases sit on the edges of those proofs: large accumulators (where the first test fails), fp32 ties
that float64 rounding decides wrongly, and the study's input ranges over long K.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from exact_reference import reference_dot_add

import emu
import models

MI100 = models.unit("mi100")


def _h16(x) -> int:
    return int(np.array(x, np.float16).view(np.uint16))


def _dot(a_bits, b_bits, c_bits, unit=MI100):
    a = np.asarray(a_bits, np.uint16)
    b = np.asarray(b_bits, np.uint16)
    c = np.asarray(c_bits, np.uint32).view(np.float32)
    return np.asarray(emu.dot_add(a, b, c, unit)).view(np.uint32)


def _oracle(a_bits, b_bits, c_bits, unit=MI100):
    return np.array(
        [
            reference_dot_add(list(map(int, a)), list(map(int, b)), int(c), unit.params)
            for a, b, c in zip(a_bits, b_bits, c_bits)
        ],
        np.uint32,
    )


def _gemm_oracle(a_bits, b_bits, unit):
    """The oracle's (M, N) fp32 patterns of A (M, K) · B (K, N) from c = +0, output by output."""
    M, N = a_bits.shape[0], b_bits.shape[1]
    rows = [
        [reference_dot_add(a_bits[m].tolist(), b_bits[:, n].tolist(), 0, unit.params) for n in range(N)]
        for m in range(M)
    ]
    return np.array(rows, np.uint32)


def _tie_case(sign: float):
    """c = 2^10 (even), products 2^-14 (half an fp32 ulp of c), p1 = 2^-24 (1 + 2^-10)^2 and
    p2 = −2^-24 (1 + 2^-9): p1 + p2 = 2^-44, so c + Σp = 2^10 + 2^-14 + 2^-44 lies just above the
    fp32 tie and rounds up, but float64 rounds the sum onto the tie (its ulp at 2^10 is 2^-42),
    which RNE would round down to the even 2^10. T / (smallest term) ≈ 2^34: the grid test must
    reject it (a span of 2^36 would accept it), and so must the settled test."""
    a = [_h16(sign * 2.0**-7), _h16(sign * 2.0**-12 * (1 + 2.0**-10)), _h16(-sign * 2.0**-12 * (1 + 2.0**-9)), 0]
    b = [_h16(2.0**-7), _h16(2.0**-12 * (1 + 2.0**-10)), _h16(2.0**-12), 0]
    c = int(np.array(sign * 2.0**10, np.float32).view(np.uint32))
    return a, b, c


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_tie_that_float64_rounding_would_break(sign):
    a, b, c = _tie_case(sign)
    want = int(np.array(sign * (2.0**10 + 2.0**-13), np.float32).view(np.uint32))  # rounded up
    assert reference_dot_add(a, b, c, MI100.params) == want
    # as one lane, and as one lane among 300 easy ones (the row takes the fast paths first)
    assert _dot([a], [b], [c]).tolist() == [want]
    rng = np.random.default_rng(1)
    easy_a = rng.uniform(5, 10, (300, 4)).astype(np.float16).view(np.uint16)
    easy_b = rng.uniform(5, 10, (300, 4)).astype(np.float16).view(np.uint16)
    easy_c = np.full(300, c, np.uint32)
    A = np.vstack([easy_a, [a]])
    B = np.vstack([easy_b, [b]])
    C = np.append(easy_c, c).astype(np.uint32)
    got = _dot(A, B, C)
    assert got[-1] == want
    assert np.array_equal(got, _oracle(A, B, C))


@pytest.mark.parametrize("lo,hi", [(-10, 10), (5, 10), (-1, 1)])
def test_study_ranges_long_k_match_the_oracle(lo, hi):
    """GEMM layout, K = 256 (64 groups): accumulators grow to hundreds, where the first test
    fails and exact fp32 ties are common; every output equals the oracle's."""
    rng = np.random.default_rng(abs(lo * 100 + hi))
    M, N, K = 2, 136, 256  # more than one 128-lane task
    a = rng.uniform(lo, hi, (M, K)).astype(np.float16)
    b = rng.uniform(lo, hi, (K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    got = emu.dot_add(a[:, None, :], b.T[None], c, MI100).view(np.uint32)
    assert np.array_equal(got, _gemm_oracle(a.view(np.uint16), b.view(np.uint16), MI100))


MI100_BF16 = models.unit("mi100", input="bf16")


def _b16(x) -> int:
    return int(np.array(x, ml_dtypes.bfloat16).view(np.uint16))


def _dot_bf16(a_bits, b_bits, c_bits):
    a = np.asarray(a_bits, np.uint16).view(ml_dtypes.bfloat16)
    b = np.asarray(b_bits, np.uint16).view(ml_dtypes.bfloat16)
    c = np.asarray(c_bits, np.uint32).view(np.float32)
    return np.asarray(emu.dot_add(a, b, c, MI100_BF16)).view(np.uint32)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_bf16_group_of_two_edges(sign):
    """MI100's bf16 group of two (plain float64 path with the grid test, exact path elsewhere) on
    the proof's edges, alone and among 300 easy lanes: c = 2^10 and p0 = 2^-14, half
    an fp32 ulp of c, with p1 = 2^-80 just above the tie (float64 loses p1 and lands on the tie,
    which RNE would round down); an exact cancellation (+0); a sum below fp32's subnormals (a zero
    of its own sign); products 2^254 apart; an inf product."""
    f32 = lambda x: int(np.array(x, np.float32).view(np.uint32))  # noqa: E731
    cases = [
        ([_b16(sign * 2.0**-7), _b16(sign * 2.0**-40)], [_b16(2.0**-7), _b16(2.0**-40)], f32(sign * 2.0**10)),
        ([_b16(sign * 1.5), _b16(-sign * 0.5)], [_b16(3.0), _b16(1.0)], f32(-sign * 4.0)),
        ([_b16(sign * 2.0**-80), _b16(-sign * 2.0**-80)], [_b16(2.0**-80), _b16(2.0**-80 * 1.5)], f32(0.0)),
        ([_b16(sign * 2.0**127), _b16(2.0**-127)], [_b16(2.0**127), _b16(2.0**-127)], f32(1.0)),
        ([_b16(sign * 2.0**120), _b16(1.0)], [_b16(2.0**127), _b16(1.0)], f32(1.0)),
    ]
    want_tie = f32(sign * (2.0**10 + 2.0**-13))  # rounded up, away from the even 2^10
    a, b, c = (np.array([x[i] for x in cases]) for i in range(3))
    want = _oracle(a, b, c, MI100_BF16)
    assert want[0] == want_tie and want[1] == 0  # exact cancellation: +0
    assert want[2] == (0x80000000 if sign > 0 else 0)  # −2^-161 (1 − 2^-…): below subnormals, sign kept
    assert np.array_equal(_dot_bf16(a, b, c), want)
    rng = np.random.default_rng(2)
    easy = rng.uniform(5, 10, (300, 2)).astype(ml_dtypes.bfloat16).view(np.uint16)
    A, B = np.vstack([easy, a]), np.vstack([easy[::-1], b])
    C = np.append(np.full(300, f32(3.0)), c).astype(np.uint32)
    got = _dot_bf16(A, B, C)
    assert np.array_equal(got, _oracle(A, B, C, MI100_BF16))


@pytest.mark.parametrize("lo,hi", [(-10, 10), (-1, 1), (2.0**-30, 2.0**30)])
def test_bf16_long_k_match_the_oracle(lo, hi):
    """GEMM layout, K = 96 in bf16 (48 groups of two): growing accumulators,
    and magnitudes 2^60 apart (random signs; the grid test fails, cancellations go exact)."""
    rng = np.random.default_rng(int(hi) % 97)
    M, N, K = 2, 136, 96
    if lo > 0:  # log-uniform magnitudes with random signs
        draw = lambda shape: np.exp2(rng.uniform(np.log2(lo), np.log2(hi), shape)) * rng.choice([-1, 1], shape)  # noqa: E731
    else:
        draw = lambda shape: rng.uniform(lo, hi, shape)  # noqa: E731
    a = draw((M, K)).astype(ml_dtypes.bfloat16)
    b = draw((K, N)).astype(ml_dtypes.bfloat16)
    c = np.zeros((M, N), np.float32)
    got = emu.dot_add(a[:, None, :], b.T[None], c, MI100_BF16).view(np.uint32)
    assert np.array_equal(got, _gemm_oracle(a.view(np.uint16), b.view(np.uint16), MI100_BF16))
