"""emu.rounding: RNE against numpy casts, RZ / RD against the Fraction oracle, and the harness's
truncating fp16 conversion against an independent Fraction implementation. Bit patterns only.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from emu import formats as F
from emu.rounding import (
    Rounding,
    flush_subnormals,
    fp32_to_fp16_truncate,
    round_float64,
    round_fraction,
)

RNE, RZ, RD = Rounding.RNE, Rounding.RZ, Rounding.RD
ALL16 = np.arange(1 << 16, dtype=np.uint16)


def values_of(bits: np.ndarray, fmt: F.FloatFormat) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return bits.view(fmt.float_dtype).astype(np.float64)


def numpy_rne(x: np.ndarray, fmt: F.FloatFormat) -> np.ndarray:
    """numpy's own float64 → float16 / float32 cast (one correct RNE rounding), as patterns."""
    with np.errstate(over="ignore"):
        return x.astype(fmt.float_dtype).view(fmt.uint_dtype)


def oracle(x: np.ndarray, fmt: F.FloatFormat, mode: Rounding) -> np.ndarray:
    """round_fraction on each finite float64, the zero sign taken from x."""
    out = [round_fraction(Fraction(float(v)), fmt, mode, zero_sign=int(np.signbit(v))) for v in x]
    return np.array(out, dtype=fmt.uint_dtype)


def assert_bits_equal(got: np.ndarray, expected: np.ndarray, x: np.ndarray | None = None) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    bad = got != expected
    if bad.any():
        width = got.dtype.itemsize * 2 + 2
        rows = [
            f"x={x[i]!r}: got {int(got[i]):#0{width}x}, expected {int(expected[i]):#0{width}x}"
            if x is not None
            else f"[{i}] got {int(got[i]):#0{width}x}, expected {int(expected[i]):#0{width}x}"
            for i in np.flatnonzero(bad)[:10]
        ]
        raise AssertionError(f"{bad.sum()} mismatches:\n" + "\n".join(rows))


def with_negatives(x: np.ndarray) -> np.ndarray:
    return np.concatenate([x, -x])


def fp16_midpoints() -> np.ndarray:
    """Every exact tie between consecutive finite fp16 values, 65520 (max + ulp/2) included."""
    values = values_of(ALL16[:0x7C00], F.FP16)
    upper = np.append(values[1:], 65536.0)  # the overflow threshold acts as the next value
    return (values + upper) / 2  # exact in float64


def fp32_pairs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random consecutive finite fp32 pairs (a, b), a dense share of them subnormal."""
    rng = np.random.default_rng(seed)
    lo = np.concatenate([
        rng.integers(0, 0x7F7FFFFF, n, dtype=np.uint32),
        rng.integers(0, 0x00800000, n // 4, dtype=np.uint32),
        np.array([0, 0x007FFFFF, 0x00800000, 0x3F7FFFFF, 0x3F800000, 0x7F7FFFFE], np.uint32),
    ])  # fmt: skip
    a = values_of(lo, F.FP32)
    b = values_of(lo + np.uint32(1), F.FP32)
    return a, b


def probes_around(m: np.ndarray) -> np.ndarray:
    """m and one float64 ulp either side (three probes per gap)."""
    return np.concatenate([m, np.nextafter(m, -np.inf), np.nextafter(m, np.inf)])


def log_uniform(n: int, lo: int, hi: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.ldexp(rng.uniform(1.0, 2.0, n), rng.integers(lo, hi, n))
    return np.where(rng.integers(0, 2, n) == 1, -x, x)


# --- RNE against numpy


@pytest.mark.parametrize("mode", [RNE, RZ, RD])
@pytest.mark.parametrize("fmt", [F.FP16, F.BF16], ids=["fp16", "bf16"])
def test_round_representable_is_identity(fmt, mode):
    x = values_of(ALL16, fmt)
    finite = np.isfinite(x)
    assert_bits_equal(round_float64(x[finite], fmt, mode), ALL16[finite])


def test_round_rne_fp16_exact_ties():
    m = with_negatives(fp16_midpoints())
    got = round_float64(m, F.FP16, RNE)
    assert_bits_equal(got, numpy_rne(m, F.FP16), m)
    # A tie goes to the even neighbour: the result's last fraction bit is 0 (or it is inf).
    assert np.all((got & 1) == 0)


def test_round_rne_fp16_around_ties_and_random():
    x = np.concatenate([
        probes_around(with_negatives(fp16_midpoints())),
        log_uniform(200_000, -30, 18, seed=2),
        np.ldexp(np.random.default_rng(3).uniform(-1, 1, 20_000), -14),  # subnormal range
    ])  # fmt: skip
    assert_bits_equal(round_float64(x, F.FP16, RNE), numpy_rne(x, F.FP16), x)


def test_round_rne_fp32_exact_ties():
    a, b = fp32_pairs(100_000, seed=4)
    m = with_negatives((a + b) / 2)
    x = np.concatenate([m, probes_around(m), log_uniform(200_000, -155, 130, seed=5)])
    assert_bits_equal(round_float64(x, F.FP32, RNE), numpy_rne(x, F.FP32), x)


def test_round_rne_bf16_against_ml_dtypes():
    # ml_dtypes casts float64 → bfloat16 through float32 (a double rounding), so compare from
    # float32 inputs, where its cast is a single RNE; bf16 ties are float32 numbers.
    bf = values_of(ALL16[:0x7F80], F.BF16)
    ties = (bf + np.append(bf[1:], 2.0**128)) / 2
    rng = np.random.default_rng(6)
    x32 = np.concatenate([
        with_negatives(ties).astype(np.float32),
        rng.integers(0, 1 << 32, 200_000, dtype=np.uint32).view(np.float32),
    ])  # fmt: skip
    x32 = x32[~np.isnan(x32)]
    with np.errstate(over="ignore"):
        expected = x32.astype(ml_dtypes.bfloat16).view(np.uint16)
    assert_bits_equal(round_float64(x32.astype(np.float64), F.BF16, RNE), expected)


@pytest.mark.parametrize(
    "x, fp16_bits",
    [
        (65504.0, 0x7BFF),
        (65519.99, 0x7BFF),  # below max + ulp/2
        (np.nextafter(65520.0, 0), 0x7BFF),
        (65520.0, 0x7C00),  # the tie above max goes to the even "2^16", i.e. overflows
        (65536.0, 0x7C00),
        (1e300, 0x7C00),
        (2.0**-24, 0x0001),
        (2.0**-25, 0x0000),  # subnormal tie to even (zero)
        (np.nextafter(2.0**-25, 1), 0x0001),
        (3 * 2.0**-25, 0x0002),  # tie between 1 and 2 subnormal ulps → even 2
        (5 * 2.0**-25, 0x0002),
        (2.0**-14 - 2.0**-25, 0x0400),  # rounds up into the normal range
        (5e-324, 0x0000),  # float64 subnormal
        (0.0, 0x0000),
        (1.0 + 2.0**-11, 0x3C00),
        (1.0 + 3 * 2.0**-11, 0x3C02),
        (1.0 + 2.0**-11 + 2.0**-40, 0x3C01),  # no double rounding via fp32
    ],
)
def test_round_rne_fp16_boundaries(x, fp16_bits):
    got = round_float64(np.array([x, -x]), F.FP16, RNE)
    assert [int(v) for v in got] == [fp16_bits, fp16_bits | 0x8000]
    assert round_fraction(Fraction(x), F.FP16, RNE) == fp16_bits


def test_round_rne_fp32_overflow_boundary():
    top = float(np.finfo(np.float32).max)
    half_ulp = 2.0**103
    x = np.array([top, top + half_ulp, np.nextafter(top + half_ulp, 0), 2.0**128, -top - half_ulp])
    assert [int(v) for v in round_float64(x, F.FP32, RNE)] == [
        0x7F7FFFFF, 0x7F800000, 0x7F7FFFFF, 0x7F800000, 0xFF800000,
    ]  # fmt: skip


def test_round_specials():
    x = np.array([np.inf, -np.inf, np.nan, -np.nan])
    for fmt in (F.FP16, F.FP32, F.BF16):
        for mode in (RNE, RZ, RD):
            got = round_float64(x, fmt, mode)
            neg = fmt.sign_mask
            assert [int(v) for v in got] == [
                fmt.inf_bits, fmt.inf_bits | neg, fmt.qnan_bits, fmt.qnan_bits | neg,
            ]  # fmt: skip


# --- RZ / RD, overflow by mode, signed zero


OVERFLOW_CASES = [
    # x, mode, fp16 result, fp32 result
    (1e6, RNE, 0x7C00, None), (1e6, RZ, 0x7BFF, None), (1e6, RD, 0x7BFF, None),
    (-1e6, RNE, 0xFC00, None), (-1e6, RZ, 0xFBFF, None), (-1e6, RD, 0xFC00, None),
    (65535.0, RZ, 0x7BFF, None), (-65504.5, RD, 0xFC00, None), (-65504.5, RZ, 0xFBFF, None),
    (65504.5, RD, 0x7BFF, None), (-65504.0, RD, 0xFBFF, None),
    (1e39, RNE, None, 0x7F800000), (1e39, RZ, None, 0x7F7FFFFF), (1e39, RD, None, 0x7F7FFFFF),
    (-1e39, RZ, None, 0xFF7FFFFF), (-1e39, RD, None, 0xFF800000),
]  # fmt: skip


@pytest.mark.parametrize("x, mode, fp16_bits, fp32_bits", OVERFLOW_CASES)
def test_round_overflow_by_mode(x, mode, fp16_bits, fp32_bits):
    for fmt, bits in ((F.FP16, fp16_bits), (F.FP32, fp32_bits)):
        if bits is None:
            continue
        assert int(round_float64(np.float64(x), fmt, mode)) == bits
        assert round_fraction(Fraction(x), fmt, mode) == bits


def test_round_signed_zero():
    tiny = Fraction(1, 2**30)
    assert round_fraction(0, F.FP16, RNE) == 0x0000
    assert round_fraction(0, F.FP16, RD, zero_sign=1) == 0x8000
    assert round_fraction(Fraction(0), F.FP32, RZ, zero_sign=1) == 0x80000000
    # A nonzero value that rounds to zero keeps its sign; RD pushes negatives away from zero.
    assert [round_fraction(-tiny, F.FP16, m) for m in (RNE, RZ, RD)] == [0x8000, 0x8000, 0x8001]
    assert [round_fraction(tiny, F.FP16, m) for m in (RNE, RZ, RD)] == [0x0000, 0x0000, 0x0000]
    x = np.array([0.0, -0.0, 2.0**-30, -(2.0**-30)])
    assert [int(v) for v in round_float64(x, F.FP16, RD)] == [0x0000, 0x8000, 0x0000, 0x8001]
    assert [int(v) for v in round_float64(x, F.FP16, RZ)] == [0x0000, 0x8000, 0x0000, 0x8000]
    got = round_float64(x, F.FP32, RNE)
    assert [int(v) for v in got] == [0, 0x80000000, 0x30800000, 0xB0800000]


def test_round_beyond_float64_precision():
    # Exact values float64 cannot hold: only the Fraction path sees the sticky bits.
    one = Fraction(1)
    tie = one + Fraction(1, 2**11)
    assert round_fraction(tie, F.FP16, RNE) == 0x3C00
    assert round_fraction(tie + Fraction(1, 2**200), F.FP16, RNE) == 0x3C01
    assert round_fraction(-(tie + Fraction(1, 2**200)), F.FP16, RD) == 0xBC01
    assert round_fraction(-(tie + Fraction(1, 2**200)), F.FP16, RZ) == 0xBC00
    assert round_fraction(Fraction(1, 3), F.FP32, RNE) == int(np.float32(1 / 3).view(np.uint32))
    assert round_fraction(10**40, F.FP32, RZ) == 0x7F7FFFFF
    assert round_fraction(-(10**40), F.FP16, RD) == 0xFC00
    assert round_fraction(1, "fp16", "rne") == 0x3C00


def _mixed_sample(fmt: F.FloatFormat, n: int, seed: int) -> np.ndarray:
    """Ties, their neighbours, random values over the whole range, subnormals, boundaries."""
    rng = np.random.default_rng(seed)
    if fmt is F.FP16:
        ties = with_negatives(fp16_midpoints())
        lo, hi, emin = -30, 18, -14
    else:
        a, b = fp32_pairs(n, seed)
        ties = with_negatives((a + b) / 2)
        lo, hi, emin = -155, 130, -126
    ties = rng.choice(ties, n)
    return np.concatenate([
        ties, np.nextafter(ties, 0), np.nextafter(ties, np.inf),
        log_uniform(n, lo, hi, seed),
        np.ldexp(rng.uniform(-1, 1, n // 2), emin),
        np.array([0.0, -0.0, fmt.max_finite, -fmt.max_finite, 1e300, -1e300, 5e-324, -5e-324]),
    ])  # fmt: skip


@pytest.mark.parametrize("mode", [RNE, RZ, RD])
@pytest.mark.parametrize("fmt", [F.FP16, F.FP32], ids=["fp16", "fp32"])
def test_round_float64_matches_fraction_oracle(fmt, mode):
    x = _mixed_sample(fmt, 1500, seed=10 + int(mode))
    assert_bits_equal(round_float64(x, fmt, mode), oracle(x, fmt, mode), x)


@pytest.mark.parametrize("fmt", [F.FP16, F.FP32], ids=["fp16", "fp32"])
def test_round_fraction_rne_matches_numpy(fmt):
    x = _mixed_sample(fmt, 1500, seed=20)
    assert_bits_equal(oracle(x, fmt, RNE), numpy_rne(x, fmt), x)


@pytest.mark.parametrize("mode", [RZ, RD])
def test_round_directed_brackets_the_value(mode):
    # RZ: |r| <= |x| < |next r away from zero|; RD: r <= x < next r up.
    x = _mixed_sample(F.FP16, 1000, seed=30)
    x = x[np.abs(x) < 65504]
    r16 = round_float64(x, F.FP16, mode).view(np.float16)
    r = r16.astype(np.float64)
    if mode == RZ:
        away = np.abs(np.nextafter(np.abs(r16), np.float16(np.inf)).astype(np.float64))
        assert np.all((np.abs(r) <= np.abs(x)) & (np.abs(x) < away))
    else:
        up = np.nextafter(r16, np.float16(np.inf)).astype(np.float64)
        assert np.all((r <= x) & (x < up))


def test_round_modes_accept_ints_and_names():
    x = np.array([1.0 + 2.0**-11 + 2.0**-30])
    assert int(round_float64(x, "fp16", "rne")[0]) == 0x3C01
    assert int(round_float64(x, F.FP16, 1)[0]) == 0x3C00
    with pytest.raises(ValueError):
        round_float64(x, F.FP16, "ru")


# --- hypothesis properties

FORMATS = [F.FP16, F.FP32, F.BF16]


@settings(max_examples=300, deadline=None)
@given(
    x=st.floats(allow_nan=False, allow_infinity=False),
    fmt=st.sampled_from(FORMATS),
    mode=st.sampled_from(list(Rounding)),
)
@example(x=65520.0, fmt=F.FP16, mode=RNE)
@example(x=-(2.0**-25), fmt=F.FP16, mode=RD)
@example(x=2.0**-150, fmt=F.FP32, mode=RNE)
def test_property_float64_path_equals_fraction_path(x, fmt, mode):
    got = int(round_float64(np.float64(x), fmt, mode))
    assert got == round_fraction(Fraction(x), fmt, mode, zero_sign=int(np.signbit(x)))


@settings(max_examples=300, deadline=None)
@given(x=st.floats(allow_nan=False), fmt=st.sampled_from(FORMATS), mode=st.sampled_from([RNE, RZ]))
def test_property_sign_symmetry(x, fmt, mode):
    # RNE and RZ commute with negation: f(-x) = -f(x), zeros and infinities included.
    pos, neg = round_float64(np.array([x, -x]), fmt, mode)
    assert int(neg) == int(pos) ^ fmt.sign_mask


@settings(max_examples=300, deadline=None)
@given(x=st.floats(width=32, allow_nan=False), mode=st.sampled_from(list(Rounding)))
def test_property_fp32_values_are_fixed_points(x, mode):
    expected = int(np.float32(x).view(np.uint32))
    assert int(round_float64(np.float64(np.float32(x)), F.FP32, mode)) == expected


@settings(max_examples=200, deadline=None)
@given(
    v=st.fractions(min_value=Fraction(-70000), max_value=Fraction(70000), max_denominator=2**40),
    mode=st.sampled_from(list(Rounding)),
)
def test_property_fraction_is_within_one_ulp(v, mode):
    bits = round_fraction(v, F.FP16, mode)
    if bits & 0x7FFF >= 0x7C00:  # overflowed to inf
        assert (mode == RNE and abs(v) >= 65520) or (mode == RD and v < -65504)
        return
    r = F.to_fraction(bits, F.FP16)
    spacing = Fraction(float(F.ulp(float(r), F.FP16)))
    if mode == RNE:
        assert abs(r - v) <= spacing / 2 or abs(v) > 65504
    elif mode == RZ:
        assert abs(r) <= abs(v)
        assert abs(v) < abs(r) + spacing or abs(r) == 65504  # RZ saturates at max
    else:
        assert r <= v


# --- flush


def test_flush_subnormals_fp16_all_patterns():
    cls = F.classify(ALL16, F.FP16)
    tiny = (cls == F.FloatClass.SUBNORMAL) | (cls == F.FloatClass.ZERO)
    signed = flush_subnormals(ALL16, F.FP16, keep_sign=True)
    unsigned = flush_subnormals(ALL16, F.FP16, keep_sign=False)
    assert signed.dtype == np.uint16 and unsigned.dtype == np.uint16
    assert_bits_equal(signed[~tiny], ALL16[~tiny])
    assert_bits_equal(unsigned[~tiny], ALL16[~tiny])
    assert_bits_equal(signed[tiny], ALL16[tiny] & 0x8000)
    assert np.all(unsigned[tiny] == 0)  # −0 and negative subnormals become +0
    assert int(flush_subnormals(np.uint16(0x8000), F.FP16, keep_sign=True)) == 0x8000


def test_flush_subnormals_fp32():
    rng = np.random.default_rng(7)
    bits = np.concatenate([
        rng.integers(0, 1 << 32, 50_000, dtype=np.uint32),
        rng.integers(0, 0x00800000, 5_000, dtype=np.uint32) | np.uint32(0x80000000),
        np.array([0x00000001, 0x807FFFFF, 0x00800000, 0x80800000, 0x80000000], np.uint32),
    ])  # fmt: skip
    values = values_of(bits, F.FP32)
    tiny = np.abs(values) < 2.0**-126
    got = flush_subnormals(bits, F.FP32, keep_sign=True)
    assert_bits_equal(got, np.where(tiny, bits & np.uint32(0x80000000), bits).astype(np.uint32))
    got = flush_subnormals(bits.view(np.float32), "fp32", keep_sign=False)
    assert_bits_equal(got, np.where(tiny, 0, bits).astype(np.uint32))


# --- the harness's truncating float → fp16


def truncate_reference(b: int) -> int:
    """fp16 pattern the harness gives for float32 pattern ``b``, from the exact value.

    Toward zero onto the fp16 grid (subnormal spacing 2^-24 below 2^-14), ±inf from 65536 up,
    ±inf for ±inf; NaN keeps its sign and top 10 payload bits (so a NaN with a payload only in
    the low 13 bits comes out as inf).
    """
    sign = (b >> 31) << 15
    biased, fraction = (b >> 23) & 0xFF, b & 0x7FFFFF
    if biased == 0xFF:
        return sign | 0x7C00 | (fraction >> 13)
    if biased == 0:
        a = Fraction(fraction, 2**149)
    else:
        a = Fraction((1 << 23) | fraction) * Fraction(2) ** (biased - 150)
    if a >= 65536:
        return sign | 0x7C00
    if a < Fraction(1, 2**14):
        return sign | int(a * 2**24)  # int() truncates toward zero
    e = 15
    while Fraction(2) ** e > a:
        e -= 1
    n = int(a / Fraction(2) ** (e - 10))  # 1024 <= n < 2048
    return sign | ((e + 15) << 10) | (n - 1024)


def test_truncate_every_fp16_value_round_trips():
    finite = ALL16[np.isfinite(values_of(ALL16, F.FP16))]
    x32 = finite.view(np.float16).astype(np.float32)
    assert_bits_equal(fp32_to_fp16_truncate(x32), finite)


def test_truncate_between_values_goes_toward_zero():
    pos = ALL16[:0x7C00]
    lo = values_of(pos, F.FP16).astype(np.float32)
    hi = np.append(lo[1:], np.float32(65536.0))
    inner = np.stack([
        np.nextafter(lo, np.float32(np.inf)),
        lo + (hi - lo) * np.float32(0.5),
        lo + (hi - lo) * np.float32(0.75),
        np.nextafter(hi, np.float32(0)),
    ])  # fmt: skip
    assert np.all((inner > lo) & (inner < hi))
    expected = np.broadcast_to(pos, inner.shape)
    assert_bits_equal(fp32_to_fp16_truncate(inner).ravel(), expected.ravel())
    assert_bits_equal(fp32_to_fp16_truncate(-inner).ravel(), (expected | np.uint16(0x8000)).ravel())


@pytest.mark.parametrize(
    "x, fp16_bits",
    [
        (2.0**-24, 0x0001),
        (np.nextafter(np.float32(2.0**-24), np.float32(0)), 0x0000),  # below 2^-24 → 0
        (2.0**-25, 0x0000),
        (1e-45, 0x0000),  # float32 subnormal
        (-(2.0**-30), 0x8000),  # tiny negatives keep their sign
        (-1e-45, 0x8000),
        (65504.0, 0x7BFF),
        (65535.996, 0x7BFF),  # truncation below 2^16 stays finite
        (65536.0, 0x7C00),  # from 2^16 up: inf, not max
        (-1e30, 0xFC00),
        (float(np.finfo(np.float32).max), 0x7C00),
        (np.inf, 0x7C00),
        (-np.inf, 0xFC00),
        (1.9999999, 0x3FFF),
        (-0.99999994, 0xBBFF),
    ],
)
def test_truncate_examples(x, fp16_bits):
    assert int(fp32_to_fp16_truncate(np.float32(x))) == fp16_bits


def test_truncate_nan_per_table():
    b = np.array([0x7FC00000, 0xFFC00000, 0x7F802000, 0x7F800001, 0xFF801FFF, 0x7FFFFFFF], np.uint32)
    got = fp32_to_fp16_truncate(b)
    assert [int(v) for v in got] == [0x7E00, 0xFE00, 0x7C01, 0x7C00, 0xFC00, 0x7FFF]
    assert np.isnan(fp32_to_fp16_truncate(np.array([np.nan], np.float32)).view(np.float16)).all()


def test_truncate_matches_fraction_reference():
    rng = np.random.default_rng(8)
    n = 8_000
    focused = (rng.integers(95, 145, n, dtype=np.uint32) << np.uint32(23)) | rng.integers(
        0, 1 << 23, n, dtype=np.uint32
    )  # exponents around the fp16 range
    b = np.concatenate([
        rng.integers(0, 1 << 32, n, dtype=np.uint32),
        focused,
        focused | np.uint32(0x80000000),
        np.array([0, 0x80000000, 1, 0x007FFFFF, 0x00800000, 0x33800000, 0x337FFFFF, 0x38800000,
                  0x387FFFFF, 0x477FE000, 0x477FFFFF, 0x47800000, 0x7F7FFFFF, 0x7F800000,
                  0xFF800000, 0x7F800001, 0x7FC00000, 0xFFFFFFFF], np.uint32),
    ])  # fmt: skip
    expected = np.array([truncate_reference(int(v)) for v in b], np.uint16)
    assert_bits_equal(fp32_to_fp16_truncate(b), expected)
    # float32 input and its uint32 patterns give the same answer
    assert_bits_equal(fp32_to_fp16_truncate(b.view(np.float32)), expected)


def test_truncate_rejects_other_dtypes():
    with pytest.raises(TypeError):
        fp32_to_fp16_truncate(np.array([1.0]))
    with pytest.raises(TypeError):
        fp32_to_fp16_truncate(np.array([1.0], np.float16))


# ------------------------------------------------------------------ fp32 → fp16, RNE (numpy's cast)


def _numpy_f16_bits(x32: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return x32.astype(np.float16).view(np.uint16)


def test_fp32_to_fp16_around_every_fp16_value():
    """Each finite fp16 value, the midpoints to its neighbours, and the float32 values one and
    two ulps either side of both (ties and near-ties, subnormal, overflow and zero boundaries)."""
    from emu.rounding import fp32_to_fp16

    v = ALL16.view(np.float16).astype(np.float64)
    v = v[np.isfinite(v)]
    v = np.unique(np.concatenate([v, -v, [65504.0 + 16.0, 65520.0, 2.0**-25, 2.0**-24, 2.0**-26]]))
    mids = (v[:-1] + v[1:]) / 2  # exact in float64, and in float32 (fp16 + 1 bit)
    centre = np.concatenate([v, mids]).astype(np.float32)
    bits = centre.view(np.uint32).astype(np.int64)
    patterns = []
    for step in (-2, -1, 0, 1, 2):  # float32 neighbours, in sign-magnitude order
        patterns.append(np.where(centre < 0, bits - step, bits + step))
    x = np.concatenate(patterns).astype(np.uint32).view(np.float32)
    got = fp32_to_fp16(x)
    assert got.dtype == np.float16 and got.shape == x.shape
    assert_bits_equal(got.view(np.uint16), _numpy_f16_bits(x))


def test_fp32_to_fp16_random_patterns_and_specials():
    from emu.rounding import fp32_to_fp16

    rng = np.random.default_rng(16)
    bits = rng.integers(0, 1 << 32, 2_000_000, dtype=np.uint64).astype(np.uint32)
    specials = np.array(
        [
            0,
            0x80000000,
            0x7F800000,
            0xFF800000,
            0x7FC00000,
            0x7F800001,
            0xFF800001,
            0x7F802000,
            0x7FFFFFFF,
            0x00000001,
            0x807FFFFF,
            0x477FEFFF,
            0x477FF000,
            0x33000000,
            0x33000001,
            0xB3000000,
            0x38800000,
            0x387FFFFF,
        ],
        np.uint32,
    )
    x = np.concatenate([bits, specials]).view(np.float32)
    assert_bits_equal(fp32_to_fp16(x).view(np.uint16), _numpy_f16_bits(x))
    # uint32 patterns in, any shape, non-contiguous input
    grid = x[:60].reshape(6, 10)[:, ::2]
    assert_bits_equal(fp32_to_fp16(grid).view(np.uint16), _numpy_f16_bits(grid))
    assert_bits_equal(fp32_to_fp16(x[:9].view(np.uint32)).view(np.uint16), _numpy_f16_bits(x[:9]))
    with pytest.raises(TypeError, match="float32"):
        fp32_to_fp16(np.zeros(3, np.float64))


# ------------------------------------------------------------------------------------------------
# cast_rne / round_rne, fp16_rne_differs


def _float64_cases() -> np.ndarray:
    rng = np.random.default_rng(21)
    x = rng.standard_normal(50_000) * np.exp2(rng.integers(-160, 140, 50_000))
    h = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    mid = (h[:-1] + h[1:]) / 2  # every fp16 tie
    return np.concatenate([x, mid, -mid, [0.0, -0.0, np.inf, -np.inf, np.nan, 65520.0, 1e300]])


@pytest.mark.parametrize("fmt", [F.FP16, F.BF16, F.FP32])
def test_cast_rne_and_round_rne_are_round_float64(fmt):
    from emu.rounding import cast_rne, round_rne

    x = _float64_cases()
    native = cast_rne(x, fmt.short_name)
    assert native.dtype == fmt.float_dtype and native.shape == x.shape
    want = round_float64(x, fmt, RNE)
    finite_or_inf = ~np.isnan(x)
    np.testing.assert_array_equal(native.view(fmt.uint_dtype)[finite_or_inf], want[finite_or_inf])
    assert np.isnan(native[~finite_or_inf].astype(np.float64)).all()
    as64 = round_rne(x, fmt)
    assert as64.dtype == np.float64
    np.testing.assert_array_equal(as64, native.astype(np.float64))


def test_round_rne_binary64_is_the_identity():
    from emu.rounding import cast_rne, round_rne

    x = _float64_cases()
    assert round_rne(x, "fp64") is x
    np.testing.assert_array_equal(cast_rne(x, np.float64), x)


def _differs_reference(v32: np.ndarray, k32: np.ndarray) -> tuple[np.ndarray, float]:
    with np.errstate(over="ignore", invalid="ignore"):
        c = v32.astype(np.float16).astype(np.float32)
    mask = ~(c == k32)
    ac, ag = np.abs(c), np.abs(k32)
    m = np.where(ac < ag, ag, ac)  # std::max(|c|, |g|)
    m = m[~np.isnan(m)]
    return mask, float(max(0.0, m.max())) if m.size else 0.0


def test_fp16_rne_differs_contract():
    from emu.rounding import fp16_rne_differs

    rng = np.random.default_rng(8)
    n = 300_000  # several blocks
    v32 = (rng.standard_normal(n) * np.exp2(rng.integers(-28, 18, n))).astype(np.float32)
    with np.errstate(over="ignore"):
        k32 = v32.astype(np.float16).astype(np.float32)
    flip = rng.random(n) < 0.1
    k32[flip] = np.nextafter(k32[flip], np.float32(np.inf))
    specials = np.array(
        [np.nan, np.inf, -np.inf, 0.0, -0.0, 65520.0, 65519.0, 2**-25, 3 * 2**-26, -(2**-25), 1 + 2**-11], np.float32
    )
    for arr in (v32, k32):
        at = rng.random(n) < 0.02
        arr[at] = specials[rng.integers(0, specials.size, int(at.sum()))]
    v32[:4] = [0.0, -0.0, np.nan, 65520.0]
    k32[:4] = [-0.0, 0.0, np.nan, np.inf]
    mask, max_mag = fp16_rne_differs(v32, k32)
    want_mask, want_max = _differs_reference(v32, k32)
    np.testing.assert_array_equal(mask, want_mask)
    assert list(mask[:4]) == [False, False, True, False]  # -0 == +0, NaN != NaN, overflow to inf
    assert max_mag == want_max == np.inf


def test_fp16_rne_differs_reads_float64_and_fp16_as_their_float32_values():
    """A float64 validation is read as (float)v and an fp16 kernel bit for bit (every pattern,
    NaN payloads included): the same mask and maximum as on float32 copies made by numpy."""
    from emu.rounding import fp16_rne_differs

    rng = np.random.default_rng(10)
    k16 = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    n = k16.size
    with np.errstate(over="ignore", invalid="ignore"):
        k32 = k16.astype(np.float32)
        # float64 values at float32 ties and overflow, beside the kernel's values and noise
        v64 = k32.astype(np.float64) * (1 + rng.standard_normal(n) * 2.0**-11)
        v64[::5] = k32[::5].astype(np.float64) + np.ldexp(1.0, np.frexp(k32[::5])[1] - 25)  # fp32 ties
        v64[1::7] = rng.choice(
            [1e300, -1e300, 3.5e38, -3.5e38, 65520.0, 65519.99, 2.0**-150, -(2.0**-149) * 1.5], n // 7 + 1
        )[: v64[1::7].size]
        v64[2::11] = np.nan
        v32 = v64.astype(np.float32)
    want = fp16_rne_differs(v32, k32)
    for v, k in ((v64, k16), (v64, k32), (v32, k16)):
        got = fp16_rne_differs(v, k)
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1] == want[1]
    assert want[0].any() and not want[0].all()


def test_fp16_rne_differs_max_ignores_nan_and_empty_inputs():
    from emu.rounding import fp16_rne_differs

    v32, k32 = np.array([np.nan, 2.0], np.float32), np.array([3.0, np.nan], np.float32)
    mask, max_mag = fp16_rne_differs(v32, k32)
    assert list(mask) == [True, True] and max_mag == 2.0
    mask, max_mag = fp16_rne_differs(np.zeros(0, np.float32), np.zeros(0, np.float32))
    assert mask.size == 0 and max_mag == 0.0
    with pytest.raises(ValueError, match="1-D"):
        fp16_rne_differs(np.zeros(3, np.float32), np.zeros(4, np.float32))


def test_fp16_rne_differs_is_the_same_for_any_thread_count():
    import numba

    from emu.rounding import fp16_rne_differs

    rng = np.random.default_rng(9)
    v32 = rng.standard_normal(500_000).astype(np.float32) * 100
    k32 = v32.astype(np.float16).astype(np.float32) * np.float32(1.0001)
    want = fp16_rne_differs(v32, k32)
    saved = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        got = fp16_rne_differs(v32, k32)
    finally:
        numba.set_num_threads(saved)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1]
