"""emu.operands: what the units take of each format, and the tf32 rounding of library kernels."""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import models
from emu.operands import TF32_ROUNDINGS, operand, round_to_tf32, tf32_operands


def _rne_tf32(x: float, ties: str = "even") -> float:
    """x (a finite fp32 value) to 11 significant bits, nearest, ties to even or away from zero
    (Fractions)."""
    if x == 0:
        return x
    f = Fraction(x)
    e = abs(f).numerator.bit_length() - abs(f).denominator.bit_length()
    while Fraction(2) ** e > abs(f):
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(f):
        e += 1
    q = Fraction(2) ** (max(e, -126) - 10)
    n = f / q
    r = round(n)  # Python rounds ties to even
    if ties == "away" and abs(n - int(n)) == Fraction(1, 2):
        r = int(n) + (1 if n > 0 else -1)
    return float(r * q)


def test_round_to_tf32_is_nearest_even_on_ties_and_keeps_specials():
    rng = np.random.default_rng(5)
    patterns = rng.integers(0, 0x7F800000, 3000, dtype=np.uint64).astype(np.uint32)
    ties = (rng.integers(0x00800000, 0x7F000000, 500, dtype=np.uint64).astype(np.uint32) & ~np.uint32(0x1FFF)) | 0x1000
    x = np.concatenate([patterns, ties, ties | 0x80000000]).view(np.float32)
    got = round_to_tf32(x)
    want = np.array([_rne_tf32(float(v)) for v in x], np.float64).astype(np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    special = np.array([np.inf, -np.inf, np.nan, np.finfo(np.float32).max], np.float32)
    out = round_to_tf32(special)
    assert np.isposinf(out[0]) and np.isneginf(out[1]) and np.isnan(out[2]) and np.isposinf(out[3])
    assert round_to_tf32(x.view(np.uint32)).dtype == np.uint32
    with pytest.raises(TypeError, match="float32 values or uint32"):
        round_to_tf32(np.ones(2))


def test_round_to_tf32_ties_away_rounds_every_tie_up_in_magnitude():
    """PTX ``cvt.rna.tf32.f32`` (sm_80 code): nearest, a tie away from zero, against the Fraction
    oracle; on ties with an even kept bit the two roundings part (a tie with an odd one agrees)."""
    rng = np.random.default_rng(7)
    patterns = rng.integers(0, 0x7F800000, 3000, dtype=np.uint64).astype(np.uint32)
    ties = (rng.integers(0x00000000, 0x7F000000, 500, dtype=np.uint64).astype(np.uint32) & ~np.uint32(0x1FFF)) | 0x1000
    x = np.concatenate([patterns, ties, ties | 0x80000000]).view(np.float32)  # subnormal ties among them
    got = round_to_tf32(x, ties="away")
    want = np.array([_rne_tf32(float(v), "away") for v in x], np.float64).astype(np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    even_kept = ties[(ties & 0x2000) == 0].view(np.float32)
    assert np.all(np.abs(round_to_tf32(even_kept, ties="away")) > np.abs(round_to_tf32(even_kept)))
    odd_kept = ties[(ties & 0x2000) != 0].view(np.float32)
    assert np.array_equal(round_to_tf32(odd_kept, ties="away"), round_to_tf32(odd_kept))
    top = np.array([np.finfo(np.float32).max, -np.finfo(np.float32).max, np.inf, np.nan], np.float32)
    out = round_to_tf32(top, ties="away")
    assert np.isposinf(out[0]) and np.isneginf(out[1]) and np.isposinf(out[2]) and np.isnan(out[3])
    assert round_to_tf32(np.float32(-0.0), ties="away").view(np.uint32) == 0x80000000
    with pytest.raises(ValueError, match="ties: 'odd' is not one of even, away"):
        round_to_tf32(x, ties="odd")


def test_tf32_operands_names_each_rounding():
    x = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-11 + 2.0**-20], np.float32)
    assert TF32_ROUNDINGS == ("rne", "rna", "")
    assert tf32_operands(x, "rne").tolist() == [1.0, 1 + 2.0**-9, 1 + 2.0**-10]
    assert tf32_operands(x, "rna").tolist() == [1 + 2.0**-10, 1 + 2.0**-9, 1 + 2.0**-10]
    assert np.array_equal(tf32_operands(x, ""), x)  # the raw bits: the unit drops the low ones
    with pytest.raises(ValueError, match="tf32_rounding: 'rz' is not one of 'rne', 'rna', ''"):
        tf32_operands(x, "rz")


def test_operand_refuses_other_formats_by_name_and_reads_patterns():
    u = models.unit("h100", input="bf16")
    a = np.array([1.5, -2.0], ml_dtypes.bfloat16)
    assert np.array_equal(operand(a, "a", u.params), operand(a.view(np.uint16), "a", u.params))
    with pytest.raises(TypeError, match="multiplies bf16: expected bfloat16 values or uint16"):
        operand(np.array([1.5], np.float16), "a", u.params)
    t = models.unit("h100", input="tf32").params
    x = np.array([1 + 2.0**-11 + 2.0**-20], np.float32)  # bits below tf32's 10 fraction bits
    assert operand(x, "a", t)[0] == 1.0  # the unit drops them (RZ)
    assert round_to_tf32(x)[0] == np.float32(1 + 2.0**-10)  # a library kernel rounds them first


def test_mixed_operands_are_each_read_in_their_own_format():
    """A mixed unit takes A in its format and B in B's: the same values as fp16 patterns, and a
    dtype of the other operand's format is refused; a wide format pairs with itself only."""
    from emu.operands import input_pair, pair_name
    from emu.units import InputFormat, UnitParams, operand_formats

    params = models.unit("h100", input=("e4m3", "e5m2")).params
    x = np.array([0.5, -448.0, 2.0**-9], ml_dtypes.float8_e4m3fn)
    y = np.array([0.5, -57344.0, 2.0**-16], ml_dtypes.float8_e5m2)
    assert np.array_equal(operand(x, "A", params).view(np.float16), x.astype(np.float16))
    assert np.array_equal(operand(y, "B", params, side="b").view(np.float16), y.astype(np.float16))
    with pytest.raises(TypeError, match="B: the unit multiplies e5m2: expected float8_e5m2"):
        operand(x, "B", params, side="b")
    assert input_pair("E4M3xE5M2") == (InputFormat.E4M3, InputFormat.E5M2) == input_pair(("e4m3", "bf8"))
    assert input_pair("bf16") == (InputFormat.BF16, InputFormat.BF16)
    assert pair_name("e4m3", "e5m2") == "e4m3xe5m2" and pair_name("e4m3", "e4m3") == "e4m3"
    with pytest.raises(ValueError, match="fp16 and the fp8 formats only"):
        operand_formats(UnitParams(family=4, group_size=1, input_format=InputFormat.BF16, b_input_format=3))


def test_narrow_range_bounds():
    """The float32 kernels take bf16/tf32 values whose finite nonzero magnitudes lie in
    [2^-24, 2^16): each bound, zeros, non-finite values, empty and strided arrays."""
    from emu.dot import narrow_range

    base = np.full((3, 5), 1.5)
    for value, inside in [
        (0.0, True), (-0.0, True), (2.0**-24, True), (-(2.0**16 - 2.0**-8), True), (np.inf, True), (np.nan, True),
        (2.0**-25, False), (-(2.0**-24) * (1 - 2.0**-20), False), (2.0**16, False), (-1e30, False), (5e-324, False),
    ]:  # fmt: skip
        x = base.copy()
        x[2, 4] = value
        assert narrow_range(x) == inside, value
        assert narrow_range(x.T) == inside, value  # not C-contiguous
    assert narrow_range(np.zeros((0, 4)))
