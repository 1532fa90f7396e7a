"""The fp8 formats of emu.formats and emu.rounding against ml_dtypes, bit for bit.

All 256 patterns of each format are enumerated; rounding is checked on float32 values (ml_dtypes
rounds a float32 to fp8 once, to nearest even), on every midpoint between neighbours, beyond the
largest value and below the smallest subnormal, and against the exact Fraction rounding.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from emu import formats as F
from emu import rounding as R

FP8 = list(F.FP8_FORMATS)
IDS = [f.short_name for f in FP8]
ALL8 = np.arange(256, dtype=np.uint8)


def values_of(fmt):
    return ALL8.view(fmt.float_dtype).astype(np.float64)


@pytest.mark.parametrize(
    "fmt, bias, emin, emax, max_finite, max_bits, nan_bits, smallest",
    [
        (F.E4M3, 7, -6, 8, 448.0, 0x7E, 0x7F, 2.0**-9),
        (F.E5M2, 15, -14, 15, 57344.0, 0x7B, 0x7E, 2.0**-16),
        (F.E4M3FNUZ, 8, -7, 7, 240.0, 0x7F, 0x80, 2.0**-10),
        (F.E5M2FNUZ, 16, -15, 15, 57344.0, 0x7F, 0x80, 2.0**-17),
    ],
    ids=IDS,
)
def test_parameters_are_the_published_ones(fmt, bias, emin, emax, max_finite, max_bits, nan_bits, smallest):
    # OCP 8-bit Floating Point Specification (OFP8) rev 1.0, Table 1; AMD's fnuz: bias + 1, NaN 0x80
    assert (fmt.bias, fmt.emin, fmt.emax) == (bias, emin, emax)
    assert (fmt.max_finite, fmt.max_bits, fmt.qnan_bits, fmt.smallest_subnormal) == (
        max_finite,
        max_bits,
        nan_bits,
        smallest,
    )
    info = ml_dtypes.finfo(fmt.float_dtype)
    assert fmt.max_finite == float(info.max) and fmt.smallest_normal == float(info.smallest_normal)
    assert fmt.has_infinity == (fmt is F.E5M2)
    assert fmt.has_negative_zero == (fmt.encoding != "fnuz")
    if not fmt.has_infinity:
        with pytest.raises(ValueError, match="no infinity"):
            _ = fmt.inf_bits


@pytest.mark.parametrize("fmt", FP8, ids=IDS)
def test_decode_classify_encode_every_pattern(fmt):
    vals = values_of(fmt)
    cls = F.classify(ALL8, fmt)
    assert np.array_equal(cls == F.FloatClass.NAN, np.isnan(vals))
    assert np.array_equal(cls == F.FloatClass.INF, np.isinf(vals))
    assert np.array_equal(cls == F.FloatClass.ZERO, vals == 0)
    tiny = (np.abs(vals) < fmt.smallest_normal) & (vals != 0)
    assert np.array_equal(cls == F.FloatClass.SUBNORMAL, tiny)
    finite = np.isfinite(vals)
    sign, significand, exponent = F.decode(ALL8, fmt)
    decoded = np.where(sign == 1, -1.0, 1.0) * significand * np.exp2(exponent.astype(np.float64))
    assert np.array_equal(decoded[finite], vals[finite])
    assert np.array_equal(np.signbit(decoded[finite]), np.signbit(vals[finite]))
    assert np.array_equal(F.encode(sign[finite], significand[finite], exponent[finite], fmt), ALL8[finite])
    for pattern in ALL8[finite]:
        assert float(F.to_fraction(int(pattern), fmt)) == abs(vals[pattern]) * (-1 if vals[pattern] < 0 else 1)
    for pattern in ALL8[~finite]:
        with pytest.raises(ValueError, match="Inf or NaN"):
            F.to_fraction(int(pattern), fmt)


@pytest.mark.parametrize("fmt", FP8, ids=IDS)
def test_encode_refuses_what_the_format_lacks(fmt):
    with pytest.raises(ValueError, match="above the largest finite"):
        F.encode(0, int(fmt.max_finite) + int(F.ulp(fmt.max_finite, fmt)), 0, fmt)
    with pytest.raises(ValueError, match="not representable"):
        F.encode(0, 1, fmt.emin - fmt.fraction_bits - 1, fmt)
    # a zero of a format without −0 is +0
    assert F.encode(1, 0, 0, fmt) == (0x80 if fmt.has_negative_zero else 0)


@pytest.mark.parametrize("fmt", FP8, ids=IDS)
def test_ulp_is_the_distance_to_the_next_value(fmt):
    vals = values_of(fmt)
    positive = np.unique(vals[np.isfinite(vals) & (vals >= 0)])  # -0 and +0 once
    steps = np.diff(positive)
    assert np.array_equal(F.ulp(positive[:-1], fmt), steps)
    assert F.ulp(1.0, fmt) == float(ml_dtypes.finfo(fmt.float_dtype).eps)


def _probe_values(fmt, rng):
    vals = values_of(fmt)
    finite = np.sort(np.unique(vals[np.isfinite(vals)]))
    midpoints = (finite[:-1] + finite[1:]) / 2
    near = np.concatenate([midpoints, np.nextafter(midpoints, np.inf), np.nextafter(midpoints, -np.inf)])
    top = fmt.max_finite + F.ulp(fmt.max_finite, fmt) * np.array([0.25, 0.5, 0.5001, 0.75, 1, 2, 1e6])
    bottom = fmt.smallest_subnormal * np.array([0.25, 0.5, 0.5001, 0.75, 1.5, 2.5])
    randoms = rng.standard_normal(20_000) * np.exp2(rng.integers(fmt.emin - 6, fmt.emax + 3, 20_000))
    x = np.concatenate(
        [finite, near, top, -top, bottom, -bottom, randoms, [np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0]]
    )
    return x.astype(np.float32)


@pytest.mark.parametrize("fmt", FP8, ids=IDS)
def test_round_rne_matches_ml_dtypes(fmt):
    x = _probe_values(fmt, np.random.default_rng(8))
    with np.errstate(invalid="ignore", over="ignore"):
        want = x.astype(fmt.float_dtype).view(np.uint8)
    got = R.round_float64(x.astype(np.float64), fmt, "rne")
    assert got.dtype == np.uint8
    bad = got != want
    assert not bad.any(), (x[bad][:5], got[bad][:5], want[bad][:5])
    assert np.array_equal(R.cast_rne(x.astype(np.float64), fmt).view(np.uint8), want)


@pytest.mark.parametrize("mode", ["rne", "rz", "rd"])
@pytest.mark.parametrize("fmt", FP8, ids=IDS)
def test_round_float64_matches_the_fraction_rounding(fmt, mode):
    x = _probe_values(fmt, np.random.default_rng(9)).astype(np.float64)
    x = x[np.isfinite(x)][::7]
    got = R.round_float64(x, fmt, mode)
    want = [R.round_fraction(Fraction(float(v)), fmt, mode, zero_sign=int(np.signbit(v))) for v in x]
    assert got.tolist() == want


@pytest.mark.parametrize("fmt", FP8, ids=IDS)
def test_overflow_by_mode_and_saturation(fmt):
    big = np.array([fmt.max_finite * 4, -fmt.max_finite * 4, np.inf, -np.inf])
    nan = fmt.qnan_bits
    if fmt.has_infinity:
        plus, minus = fmt.inf_bits, fmt.inf_bits | 0x80
    else:
        plus, minus = (nan, nan | 0x80) if fmt.encoding == "fn" else (nan, nan)
    assert R.round_float64(big, fmt, "rne").tolist() == [plus, minus, plus, minus]
    top = fmt.max_bits
    assert R.round_float64(big[:2], fmt, "rz").tolist() == [top, top | 0x80]
    assert R.round_float64(big[:2], fmt, "rd").tolist() == [top, minus]
    assert R.round_float64(big, fmt, "rne", saturate=True).tolist() == [top, top | 0x80] * 2
    assert R.round_fraction(Fraction(-(10**9)), fmt, "rne", saturate=True) == top | 0x80
    # NaN stays NaN when saturating (PTX cvt .satfinite)
    assert F.classify(R.round_float64(np.nan, fmt, "rne", saturate=True), fmt) == F.FloatClass.NAN


@pytest.mark.parametrize("fmt", FP8, ids=IDS)
def test_negative_results_that_round_to_zero(fmt):
    tiny = -fmt.smallest_subnormal / 4
    expected = 0x80 if fmt.has_negative_zero else 0x00
    assert R.round_float64(np.float64(tiny), fmt, "rne") == expected
    assert R.round_fraction(Fraction(tiny), fmt, "rz") == expected
    assert R.round_fraction(0, fmt, "rne", zero_sign=1) == expected


@pytest.mark.parametrize("fmt", FP8, ids=IDS)
def test_flush_subnormals(fmt):
    vals = values_of(fmt)
    for keep_sign in (False, True):
        flushed = R.flush_subnormals(ALL8, fmt, keep_sign=keep_sign)
        tiny = (np.abs(vals) < fmt.smallest_normal) & ~np.isnan(vals)
        assert np.array_equal(flushed[~tiny], ALL8[~tiny])  # NaN 0x80 of fnuz is kept
        signed = keep_sign and fmt.has_negative_zero
        assert np.array_equal(flushed[tiny], np.where(signed, ALL8[tiny] & 0x80, 0).astype(np.uint8))


@pytest.mark.parametrize("fmt", FP8, ids=IDS)
def test_names_dtypes_and_bit_views(fmt):
    assert F.resolve_format(fmt.short_name) is fmt
    assert F.resolve_format(fmt.name) is fmt
    assert F.resolve_format(fmt.float_dtype) is fmt
    assert F.get_format(fmt.short_name.upper()) is fmt
    x = ALL8.view(fmt.float_dtype)
    assert F.as_bits(x).dtype == np.uint8 and np.array_equal(F.as_bits(x), ALL8)
    assert F.as_bits(ALL8) is not None and F.from_bits(ALL8, fmt).dtype == fmt.float_dtype
    assert F.format_bits(0x38, fmt) == "0x38"
    with pytest.raises(TypeError, match="does not hold"):
        F.decode(np.zeros(2, np.float16), fmt)
    with pytest.raises(ValueError, match="wider than 8 bits"):
        F.decode(np.array([256], np.uint16), fmt)
