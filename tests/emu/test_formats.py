"""emu.formats against numpy float16 / ml_dtypes bfloat16 / numpy float32, bit for bit.

fp16 and bf16 are enumerated completely (all 65,536 patterns); fp32 on a random sample plus
every special and boundary pattern.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from emu import formats as F
from emu.units import Format

ALL16 = np.arange(1 << 16, dtype=np.uint16)

FP32_BOUNDARIES = np.array(
    [
        0x00000000, 0x80000000,  # ±0
        0x00000001, 0x80000001,  # ±smallest subnormal
        0x007FFFFF, 0x807FFFFF,  # ±largest subnormal
        0x00800000, 0x80800000,  # ±smallest normal
        0x00800001, 0x3F800000, 0x3F800001, 0x3FFFFFFF, 0x40000000, 0xBF800000,
        0x7F7FFFFF, 0xFF7FFFFF,  # ±max
        0x7F800000, 0xFF800000,  # ±inf
        0x7F800001, 0x7FC00000, 0x7FFFFFFF, 0xFF800001, 0xFFC00000, 0xFFFFFFFF,  # NaNs
    ],
    dtype=np.uint32,
)  # fmt: skip


def fp32_sample(n: int = 200_000, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.integers(0, 1 << 32, n, dtype=np.uint32), FP32_BOUNDARIES])


def patterns(fmt: F.FloatFormat) -> np.ndarray:
    return fp32_sample() if fmt is F.FP32 else ALL16


def values_of(bits: np.ndarray, fmt: F.FloatFormat) -> np.ndarray:
    """float64 values of patterns (exact); signalling NaNs warn when cast, harmlessly."""
    with np.errstate(invalid="ignore"):
        return bits.view(fmt.float_dtype).astype(np.float64)


FORMATS = [F.FP16, F.BF16, F.FP32]
IDS = ["fp16", "bf16", "fp32"]


def hexes(bits: np.ndarray, width: int) -> list[str]:
    return [f"{int(b):#0{width // 4 + 2}x}" for b in np.atleast_1d(bits)[:10]]


# --- format records


def test_format_parameters():
    assert (F.FP16.bias, F.FP16.emin, F.FP16.emax, F.FP16.precision) == (15, -14, 15, 11)
    assert (F.BF16.bias, F.BF16.emin, F.BF16.emax, F.BF16.precision) == (127, -126, 127, 8)
    assert (F.FP32.bias, F.FP32.emin, F.FP32.emax, F.FP32.precision) == (127, -126, 127, 24)
    assert F.FP16.max_finite == 65504.0
    assert F.FP32.max_finite == float(np.finfo(np.float32).max)
    assert F.BF16.max_finite == float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    assert F.FP16.smallest_subnormal == float.fromhex("0x1p-24")
    assert (F.FP16.inf_bits, F.FP16.qnan_bits, F.FP16.max_bits) == (0x7C00, 0x7E00, 0x7BFF)
    assert (F.FP32.inf_bits, F.FP32.qnan_bits) == (0x7F800000, 0x7FC00000)


@pytest.mark.parametrize(
    "spec, expected",
    [
        (F.FP16, F.FP16), ("fp16", F.FP16), ("binary16", F.FP16), (np.float16, F.FP16),
        (Format.FP16, F.FP16), (Format.FP32, F.FP32), (int(Format.FP32), F.FP32),
        ("bf16", F.BF16), (ml_dtypes.bfloat16, F.BF16), ("FP32", F.FP32), (np.float32, F.FP32),
    ],
)  # fmt: skip
def test_get_format(spec, expected):
    assert F.get_format(spec) is expected


def test_get_format_rejects():
    with pytest.raises(ValueError):
        F.get_format("fp8")
    with pytest.raises(TypeError):
        F.get_format(np.float64)


def test_as_bits_and_from_bits():
    h = np.array([1.0, -2.0], np.float16)
    assert as_u(F.as_bits(h)) == [0x3C00, 0xC000]
    assert F.as_bits(np.array([1.0], ml_dtypes.bfloat16)).dtype == np.uint16
    assert as_u(F.as_bits(np.array([1.0], np.float32))) == [0x3F800000]
    u = np.array([7], np.uint32)
    assert F.as_bits(u) is u
    with pytest.raises(TypeError):
        F.as_bits(np.array([1.0]))
    assert F.from_bits(np.array([0x3C00], np.uint16), F.FP16)[0] == 1.0
    assert F.from_bits(0x3F80, F.BF16).dtype == ml_dtypes.bfloat16
    assert F.from_bits([0x3F800000], "fp32")[0] == np.float32(1.0)


def as_u(a) -> list[int]:
    return [int(v) for v in np.atleast_1d(a)]


# --- decode / field_exponent / classify, exhaustive


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_decode_matches_numpy_values(fmt):
    bits = patterns(fmt)
    values = values_of(bits, fmt)
    sign, sig, exp = F.decode(bits, fmt)
    assert sign.dtype == np.int8 and sig.dtype == np.int64 and exp.dtype == np.int32
    finite = np.isfinite(values)
    rebuilt = np.where(sign == 1, -1.0, 1.0) * np.ldexp(sig.astype(np.float64), exp)
    bad = finite & (rebuilt != values)
    assert not bad.any(), hexes(bits[bad], fmt.bits)
    # The sign bit, also for zeros and NaNs.
    np.testing.assert_array_equal(sign == 1, np.signbit(values))
    # Normals carry the hidden bit, subnormals and zeros do not and sit on the emin grid.
    tiny = finite & (np.abs(values) < fmt.smallest_normal)
    normal = finite & ~tiny
    assert np.all((sig[normal] >> fmt.fraction_bits) == 1)
    assert np.all(sig[tiny] < (1 << fmt.fraction_bits))
    assert np.all(exp[tiny] == fmt.emin - fmt.fraction_bits)
    assert np.all(sig[values == 0] == 0)
    # frexp gives the leading digit's exponent: exponent = frexp_e - 1 - fraction_bits.
    _, fe = np.frexp(values[normal])
    np.testing.assert_array_equal(exp[normal], fe - 1 - fmt.fraction_bits)
    # Inf and NaN decode as if normal with the all-ones exponent.
    special = ~finite
    assert np.all(exp[special] == fmt.emax + 1 - fmt.fraction_bits)
    assert np.all((sig[special] >> fmt.fraction_bits) == 1)


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_field_exponent(fmt):
    bits = patterns(fmt)
    values = values_of(bits, fmt)
    got = F.field_exponent(bits, fmt)
    assert got.dtype == np.int32
    with np.errstate(invalid="ignore"):
        _, fe = np.frexp(values)
    expected = np.where(np.abs(values) < fmt.smallest_normal, fmt.emin, fe - 1)
    expected = np.where(np.isfinite(values), expected, fmt.emax + 1)
    np.testing.assert_array_equal(got, expected)
    assert F.field_exponent(np.uint16(0), F.FP16) == -14
    assert F.field_exponent(np.uint32(0x80000001), F.FP32) == -126


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_classify(fmt):
    bits = patterns(fmt)
    values = values_of(bits, fmt)
    got = F.classify(bits, fmt)
    expected = np.select(
        [np.isnan(values), np.isinf(values), values == 0, np.abs(values) < fmt.smallest_normal],
        [F.FloatClass.NAN, F.FloatClass.INF, F.FloatClass.ZERO, F.FloatClass.SUBNORMAL],
        default=F.FloatClass.NORMAL,
    )
    np.testing.assert_array_equal(got, expected)
    if fmt is not F.FP32:
        counts = np.bincount(got, minlength=5)
        subnormals = 2 * ((1 << fmt.fraction_bits) - 1)
        nans = 2 * ((1 << fmt.fraction_bits) - 1)
        assert list(counts) == [2, subnormals, (1 << 16) - 4 - subnormals - nans, 2, nans]


def test_decode_accepts_float_arrays_and_scalars():
    sign, sig, exp = F.decode(np.array([-1.5], np.float16), F.FP16)
    assert (int(sign[0]), int(sig[0]), int(exp[0])) == (1, 0x600, -10)
    sign, sig, exp = F.decode(0x0001, F.FP16)  # a Python int pattern, scalar results
    assert np.ndim(sig) == 0 and (int(sign), int(sig), int(exp)) == (0, 1, -24)
    with pytest.raises(TypeError):
        F.decode(np.array([1.0], np.float32), F.FP16)
    with pytest.raises(ValueError):
        F.decode(np.array([0x10000]), F.FP16)


# --- encode


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_encode_inverts_decode(fmt):
    bits = patterns(fmt)
    finite = np.isfinite(values_of(bits, fmt))
    sign, sig, exp = F.decode(bits[finite], fmt)
    got = F.encode(sign, sig, exp, fmt)
    assert got.dtype == fmt.uint_dtype
    np.testing.assert_array_equal(got, bits[finite])
    # Any other scaling of the same value encodes to the same pattern.
    np.testing.assert_array_equal(F.encode(sign, sig << 5, exp - 5, fmt), bits[finite])
    even = (sig % 4 == 0) & (sig > 0)
    got = F.encode(sign[even], sig[even] >> 2, exp[even] + 2, fmt)
    np.testing.assert_array_equal(got, bits[finite][even])


def test_encode_examples():
    assert F.encode(0, 6, -2, F.FP16) == 0x3E00  # 1.5
    assert F.encode(1, 0, 0, F.FP16) == 0x8000  # −0
    assert F.encode(0, 0, 1000, F.FP32) == 0  # zero at any exponent
    assert F.encode(0, 1, -24, F.FP16) == 0x0001
    assert F.encode(0, 1, -149, F.FP32) == 0x00000001
    assert F.encode(0, 2047, 5, F.FP16) == 0x7BFF  # 65504
    assert F.encode(0, 3, -130, F.BF16) == 0x0018  # 24·2^-133, a bf16 subnormal
    assert F.encode(1, 1 << 62, -62, F.FP32) == 0xBF800000  # wide significands are fine
    np.testing.assert_array_equal(F.encode([0, 1], [1, 1], [0, 1], "fp16"), [0x3C00, 0xC000])


@pytest.mark.parametrize(
    "sign, sig, exp, fmt",
    [
        (0, 2049, 0, F.FP16),  # 12 significant bits
        (0, 1, 16, F.FP16),  # 65536 overflows
        (0, 4095, 4, F.FP16),  # 65520
        (0, 1, -25, F.FP16),  # below the subnormal grid
        (0, 3, -26, F.FP16),  # 0.75·2^-24
        (0, (1 << 24) + 1, 0, F.FP32),
        (0, 1, -150, F.FP32),
        (0, 1, 128, F.FP32),
        (0, 257, 0, F.BF16),
        (0, -1, 0, F.FP16),  # negative significand
        (2, 1, 0, F.FP16),  # bad sign
    ],
)
def test_encode_rejects_inexact(sign, sig, exp, fmt):
    with pytest.raises(ValueError):
        F.encode(sign, sig, exp, fmt)


# --- ulp


@pytest.mark.parametrize("fmt", [F.FP16, F.FP32], ids=["fp16", "fp32"])
def test_ulp_matches_np_spacing(fmt):
    bits = patterns(fmt)
    x = bits.view(fmt.float_dtype)
    values = values_of(bits, fmt)
    usable = np.isfinite(values) & (np.abs(values) != fmt.max_finite)
    got = F.ulp(x[usable], fmt)
    assert got.dtype == np.float64
    # np.spacing(float16) of a negative power of two gives the gap toward zero, so compare
    # with the spacing of |x|, which is the binade's (the spacing of x and −x is the same).
    expected = np.spacing(np.abs(x[usable])).astype(np.float64)
    np.testing.assert_array_equal(got, expected)
    # Both signs, and the values np.spacing calls inf.
    np.testing.assert_array_equal(F.ulp(-values[usable], fmt), got)
    assert F.ulp(fmt.max_finite, fmt) == 2.0 ** (fmt.emax - fmt.fraction_bits)
    assert np.isnan(F.ulp(np.inf, fmt)) and np.isnan(F.ulp(np.nan, fmt))


def test_ulp_examples():
    assert F.ulp(0.0, F.FP16) == 2.0**-24
    assert F.ulp(2.0**-14, F.FP16) == 2.0**-24
    assert F.ulp(2.0**-13, F.FP16) == 2.0**-23
    assert F.ulp(1.0, F.FP16) == 2.0**-10
    assert F.ulp(np.nextafter(1.0, 0.0), F.FP16) == 2.0**-11  # binade below 1
    assert F.ulp(-3.0, F.FP32) == 2.0**-22
    assert F.ulp(1e6, F.FP16) == 2.0**9  # beyond the range: the binade's spacing
    assert F.ulp(1.0, F.BF16) == 2.0**-7


def test_to_fraction():
    assert F.to_fraction(0x3C01, F.FP16) == 1 + Fraction(1, 1024)
    assert F.to_fraction(0x8001, F.FP16) == -Fraction(1, 1 << 24)
    assert F.to_fraction(0x7F7FFFFF, F.FP32) == Fraction(F.FP32.max_finite)
    for b in np.random.default_rng(3).integers(0, 0x7C00, 500):
        assert F.to_fraction(int(b), F.FP16) == Fraction(float(np.uint16(b).view(np.float16)))
    with pytest.raises(ValueError):
        F.to_fraction(0x7C00, F.FP16)


# ------------------------------------------------------------------------------------------------
# Names, binary64, spacing, the fp16 tables


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("fp16", F.FP16), ("half", F.FP16), ("F16", F.FP16), (np.float16, F.FP16),
        ("bfloat16", F.BF16), (ml_dtypes.bfloat16, F.BF16), ("float", F.FP32), ("single", F.FP32),
        ("double", F.FP64), ("binary64", F.FP64), (np.float64, F.FP64), (F.FP64, F.FP64),
        (Format.FP32, F.FP32),
    ],
)  # fmt: skip
def test_resolve_format(spec, expected):
    assert F.resolve_format(spec) is expected


def test_resolve_format_rejects_and_names_the_valid_names():
    with pytest.raises(ValueError, match="valid names: .*binary16.*fp64"):
        F.resolve_format("fp8")
    with pytest.raises(TypeError, match="fp16, bf16, fp32, fp64"):
        F.resolve_format(np.int32)
    with pytest.raises(ValueError):
        F.get_format("fp64")  # the bit-level functions do not take binary64
    assert all(F.resolve_format(name) is fmt for name, fmt in F.FORMAT_NAMES.items())


def test_short_names_and_dtypes():
    for fmt, short in ((F.FP16, "fp16"), (F.BF16, "bf16"), (F.FP32, "fp32"), (F.FP64, "fp64")):
        assert fmt.short_name == short
        assert fmt.float_dtype.itemsize * 8 == fmt.bits == fmt.uint_dtype.itemsize * 8
    assert (F.FP64.emin, F.FP64.fraction_bits, F.FP64.smallest_subnormal) == (-1022, 52, 5e-324)


def test_spacing_rules_and_binary64():
    x = np.array([0.0, 2**-24, 2**-14, 2**-13, 0.25, 1.0, 1.5, 65504.0, 70000.0, -1.0])
    ulp = F.spacing(x, "fp16") * 2**24
    assert list(ulp) == [1, 1, 1, 2, 2**12, 2**14, 2**14, 2**29, 2**30, 2**14]
    below = F.spacing(x, F.FP16, "binade_below") * 2**24
    assert list(below) == [1, 1, 1, 1, 2**11, 2**13, 2**14, 2**29, 2**30, 2**13]
    assert F.spacing(1.0, "fp64") == 2**-52 and F.spacing(0.0, np.float64) == 2**-1074
    assert F.spacing(5e-324, "fp64") == 5e-324
    assert np.isnan(F.spacing([np.inf, -np.inf, np.nan], "fp32")).all()
    with pytest.raises(ValueError, match="binade_below"):
        F.spacing(1.0, "fp16", "nearest")


def test_ulp_is_spacing_with_the_ulp_rule():
    rng = np.random.default_rng(3)
    x = np.concatenate([np.ldexp(1.0, np.arange(-160, 140)), rng.standard_normal(3000)
                        * np.exp2(rng.integers(-150, 130, 3000)), [0.0, -0.0, 5e-324]])  # fmt: skip
    for fmt in (F.FP16, F.BF16, F.FP32):
        np.testing.assert_array_equal(F.ulp(x, fmt), F.spacing(x, fmt))
        assert isinstance(F.ulp(1.0, fmt), np.float64)


def test_fp16_tables():
    values = ALL16.view(np.float16).astype(np.float32)
    np.testing.assert_array_equal(F.FP16_TO_FP32.view(np.uint32), values.view(np.uint32))
    tiny = (ALL16 & 0x7C00) == 0
    flushed = F.FP16_TO_FP32_FTZ.view(np.uint32)
    assert (flushed[tiny] == 0).all()  # subnormals and -0 read as +0
    np.testing.assert_array_equal(flushed[~tiny], values.view(np.uint32)[~tiny])
    assert not F.FP16_TO_FP32.flags.writeable and not F.FP16_TO_FP32_FTZ.flags.writeable


def test_format_bits():
    assert F.format_bits(0x3C00, F.FP16) == "0x3c00"
    assert F.format_bits(1, "fp32") == "0x00000001"
    assert F.format_bits(0x3FF0000000000000, "fp64") == "0x3ff0000000000000"
