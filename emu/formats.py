"""Bit layouts of binary16 (fp16), bfloat16 (bf16) and binary32 (fp32), and exact decoding.

A format is a :class:`FloatFormat` record; the three instances :data:`FP16`, :data:`BF16` and
:data:`FP32` are the only ones the project needs. Every function here is vectorised numpy and
works on arrays of any shape (and on scalars); nothing rounds. Bit patterns travel as unsigned
integers of the format's width (``uint16`` / ``uint32``); :func:`as_bits` and :func:`from_bits`
convert between those and the float arrays (``np.float16``, ``ml_dtypes.bfloat16``,
``np.float32``).

Decoding follows the glossary of :mod:`emu`: a finite value is
``(-1)**sign * significand * 2**exponent`` with an integer *significand* (hidden bit included
for normals) and the *exponent* of its least significant digit. Hardware aligns operands by the
*field* exponent instead (:func:`field_exponent`), where subnormals and zero count as ``emin``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np

from .units import Format

__all__ = [
    "FloatFormat",
    "FloatClass",
    "FP16",
    "BF16",
    "FP32",
    "get_format",
    "as_bits",
    "from_bits",
    "decode",
    "encode",
    "field_exponent",
    "classify",
    "ulp",
    "to_fraction",
]


@dataclass(frozen=True)
class FloatFormat:
    """An IEEE-754-style binary format with subnormals, infinities and NaNs."""

    #: identifier as ml_dtypes / IEEE name it: "binary16", "bfloat16", "binary32"
    name: str
    #: total width in bits (sign + exponent + fraction)
    bits: int
    #: width of the biased exponent field
    exponent_bits: int
    #: width of the stored fraction field, t = precision - 1
    fraction_bits: int
    #: unsigned integer dtype holding one bit pattern
    uint_dtype: Any
    #: numpy float dtype with this layout
    float_dtype: Any

    # Derived values.
    @property
    def precision(self) -> int:
        """Significand digits including the hidden bit."""
        return self.fraction_bits + 1

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal (also the field exponent of subnormals and zero)."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        return self.bias

    @property
    def sign_mask(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def exponent_mask(self) -> int:
        """The all-ones biased exponent field value (Inf/NaN), unshifted."""
        return (1 << self.exponent_bits) - 1

    @property
    def fraction_mask(self) -> int:
        return (1 << self.fraction_bits) - 1

    @property
    def inf_bits(self) -> int:
        return self.exponent_mask << self.fraction_bits

    @property
    def qnan_bits(self) -> int:
        """The canonical quiet NaN (positive, top fraction bit set)."""
        return self.inf_bits | (1 << (self.fraction_bits - 1))

    @property
    def max_bits(self) -> int:
        """Pattern of the largest finite value."""
        return self.inf_bits - 1

    @property
    def max_finite(self) -> float:
        return float((2 - 2.0**-self.fraction_bits) * 2.0**self.emax)

    @property
    def smallest_normal(self) -> float:
        return 2.0**self.emin

    @property
    def smallest_subnormal(self) -> float:
        return 2.0 ** (self.emin - self.fraction_bits)


FP16 = FloatFormat(
    name="binary16", bits=16, exponent_bits=5, fraction_bits=10,
    uint_dtype=np.dtype(np.uint16), float_dtype=np.dtype(np.float16),
)  # fmt: skip
BF16 = FloatFormat(
    name="bfloat16", bits=16, exponent_bits=8, fraction_bits=7,
    uint_dtype=np.dtype(np.uint16), float_dtype=np.dtype(ml_dtypes.bfloat16),
)  # fmt: skip
FP32 = FloatFormat(
    name="binary32", bits=32, exponent_bits=8, fraction_bits=23,
    uint_dtype=np.dtype(np.uint32), float_dtype=np.dtype(np.float32),
)  # fmt: skip

_BY_NAME = {
    "binary16": FP16, "fp16": FP16, "float16": FP16, "half": FP16,
    "bfloat16": BF16, "bf16": BF16,
    "binary32": FP32, "fp32": FP32, "float32": FP32, "single": FP32,
}  # fmt: skip
_BY_ENUM = {Format.FP16: FP16, Format.FP32: FP32}


class FloatClass(IntEnum):
    """What a bit pattern encodes (:func:`classify`)."""

    ZERO = 0
    SUBNORMAL = 1
    NORMAL = 2
    INF = 3
    NAN = 4


def get_format(fmt: Any) -> FloatFormat:
    """Resolve ``fmt`` to a :class:`FloatFormat`.

    Accepts a :class:`FloatFormat`, an :class:`emu.units.Format` member (or its int value), a
    name (``"fp16"``, ``"binary16"``, ``"bf16"``, ``"fp32"``, ...) or a float dtype
    (``np.float16``, ``ml_dtypes.bfloat16``, ``np.float32``).
    """
    if isinstance(fmt, FloatFormat):
        return fmt
    if isinstance(fmt, str):
        try:
            return _BY_NAME[fmt.lower()]
        except KeyError:
            raise ValueError(f"unknown float format name {fmt!r}") from None
    if isinstance(fmt, (int, np.integer)) and not isinstance(fmt, bool):
        try:
            return _BY_ENUM[Format(int(fmt))]
        except (ValueError, KeyError):
            raise ValueError(f"unknown float format {fmt!r}") from None
    try:
        dtype = np.dtype(fmt)
    except TypeError:
        raise TypeError(f"cannot interpret {fmt!r} as a float format") from None
    for candidate in (FP16, BF16, FP32):
        if dtype == candidate.float_dtype:
            return candidate
    raise TypeError(f"{dtype} is not the dtype of a supported float format")


def as_bits(x: Any) -> np.ndarray:
    """Bit patterns of a float16 / bfloat16 / float32 array, as a ``uint16`` / ``uint32`` view.

    ``uint16`` and ``uint32`` arrays pass through unchanged (they are taken to be patterns
    already). Any other dtype (float64, Python floats, signed ints) raises ``TypeError``: picking
    a format for them would be a silent rounding.
    """
    a = np.asarray(x)
    if a.dtype in (np.uint16, np.uint32):
        return a
    for fmt in (FP16, BF16, FP32):
        if a.dtype == fmt.float_dtype:
            return a.view(fmt.uint_dtype)
    raise TypeError(
        f"as_bits: expected a float16/bfloat16/float32 or uint16/uint32 array, got {a.dtype}"
    )


def from_bits(bits: Any, fmt: Any) -> np.ndarray:
    """View (or convert) bit patterns as an array of the format's float dtype."""
    fmt = get_format(fmt)
    return _bits_array(bits, fmt).astype(fmt.uint_dtype).view(fmt.float_dtype)


def _bits_array(bits: Any, fmt: FloatFormat) -> np.ndarray:
    """Patterns as ``uint64`` (room for shifts); float arrays are viewed, ranges are checked."""
    a = np.asarray(bits)
    if a.dtype.kind == "f" or a.dtype == BF16.float_dtype:
        if a.dtype != fmt.float_dtype:
            raise TypeError(f"a {a.dtype} array does not hold {fmt.name} patterns")
        a = a.view(fmt.uint_dtype)
    if a.dtype.kind not in "ui":
        raise TypeError(f"bit patterns must be an unsigned integer array, got {a.dtype}")
    if a.dtype.kind == "i" and np.any(a < 0):
        raise ValueError("negative bit pattern")
    a = a.astype(np.uint64)
    if np.any(a >> np.uint64(fmt.bits)):
        raise ValueError(f"bit pattern wider than {fmt.bits} bits for {fmt.name}")
    return a


def _fields(a: np.ndarray, fmt: FloatFormat) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sign, biased_exponent, fraction) of ``uint64`` patterns, as int64 arrays."""
    sign = (a >> np.uint64(fmt.bits - 1)).astype(np.int64)
    biased = ((a >> np.uint64(fmt.fraction_bits)) & np.uint64(fmt.exponent_mask)).astype(np.int64)
    fraction = (a & np.uint64(fmt.fraction_mask)).astype(np.int64)
    return sign, biased, fraction


def _out(x: np.ndarray) -> Any:
    """Return a numpy scalar for 0-d results, the array otherwise."""
    return x[()] if x.ndim == 0 else x


def decode(bits: Any, fmt: Any) -> tuple[Any, Any, Any]:
    """Split patterns into exact integer parts.

    Parameters
    ----------
    bits
        Bit patterns (unsigned ints, or an array of the format's float dtype), any shape.
    fmt
        The format (see :func:`get_format`).

    Returns
    -------
    sign : int8 (0 or 1)
    significand : int64, hidden bit included for normals; ``0`` for zeros
    exponent : int32, the exponent of the significand's least significant bit

    For finite patterns ``value == (-1)**sign * significand * 2.0**exponent`` exactly.
    Subnormals and zeros have no hidden bit and ``exponent == emin - fraction_bits`` (−24 for
    fp16, −149 for fp32, −133 for bf16). Inf and NaN are decoded *as if normal* with the
    all-ones biased exponent (``significand = 2**fraction_bits | fraction``,
    ``exponent = emax + 1 - fraction_bits``), a value above every finite one; use
    :func:`classify` to tell them apart.
    """
    fmt = get_format(fmt)
    a = _bits_array(bits, fmt)
    sign, biased, fraction = _fields(a, fmt)
    is_subnormal_or_zero = biased == 0
    significand = np.where(is_subnormal_or_zero, fraction, fraction | (1 << fmt.fraction_bits))
    field = np.where(is_subnormal_or_zero, fmt.emin, biased - fmt.bias)
    exponent = field - fmt.fraction_bits
    return (
        _out(sign.astype(np.int8)),
        _out(significand.astype(np.int64)),
        _out(exponent.astype(np.int32)),
    )


def field_exponent(bits: Any, fmt: Any) -> Any:
    """The exponent as the hardware aligns it: ``biased_exponent - bias`` (int32).

    Subnormals and zeros give ``emin`` (−14 for fp16, −126 for fp32 and bf16), Inf and NaN give
    ``emax + 1``. For normals this is ``floor(log2(|value|))``.
    """
    fmt = get_format(fmt)
    _, biased, _ = _fields(_bits_array(bits, fmt), fmt)
    return _out(np.where(biased == 0, fmt.emin, biased - fmt.bias).astype(np.int32))


def classify(bits: Any, fmt: Any) -> Any:
    """Class of each pattern as ``int8`` values of :class:`FloatClass`."""
    fmt = get_format(fmt)
    _, biased, fraction = _fields(_bits_array(bits, fmt), fmt)
    special = biased == fmt.exponent_mask
    cls = np.select(
        [biased == 0, special],
        [
            np.where(fraction == 0, FloatClass.ZERO, FloatClass.SUBNORMAL),
            np.where(fraction == 0, FloatClass.INF, FloatClass.NAN),
        ],
        default=FloatClass.NORMAL,
    )
    return _out(cls.astype(np.int8))


def _bit_length(x: np.ndarray) -> np.ndarray:
    """Number of binary digits of each ``uint64`` (0 for 0), as int64; exact at any width."""
    x = x.copy()
    n = np.zeros(x.shape, np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        big = x >= (np.uint64(1) << np.uint64(s))
        n += np.where(big, s, 0)
        x = np.where(big, x >> np.uint64(s), x)
    return n + (x > 0)


def encode(sign: Any, significand: Any, exponent: Any, fmt: Any) -> Any:
    """Pattern of ``(-1)**sign * significand * 2**exponent``, which must be representable exactly.

    Parameters
    ----------
    sign
        0 or 1 (the sign of a zero result as well).
    significand
        Non-negative integers below 2**63; any scaling is accepted (``(0, 6, -2)`` encodes 1.5).
    exponent
        Integers, the exponent of the significand's least significant bit.
    fmt
        The format.

    The three arguments broadcast. Raises ``ValueError`` if any value is not exactly
    representable (too many significant digits, below the subnormal grid, above the largest
    finite value) or a significand is negative. Only finite values can be encoded.
    """
    fmt = get_format(fmt)
    sign_a, sig_a, exp_a = np.broadcast_arrays(
        np.asarray(sign), np.asarray(significand), np.asarray(exponent)
    )
    if np.any((sign_a != 0) & (sign_a != 1)):
        raise ValueError("sign must be 0 or 1")
    if np.any(sig_a < 0):
        raise ValueError("significand must be non-negative (pass the sign separately)")
    sig = sig_a.astype(np.uint64)
    exp = exp_a.astype(np.int64)
    t = fmt.fraction_bits

    # Exponent of the result's least significant digit: the normal grid of the leading digit's
    # binade, or the subnormal grid below emin.
    leading = exp + _bit_length(sig) - 1
    lsb = np.maximum(leading, fmt.emin) - t
    shift = lsb - exp  # > 0: drop digits (must be zeros); < 0: append zeros
    right = np.clip(shift, 0, 63).astype(np.uint64)
    left = np.clip(-shift, 0, 63).astype(np.uint64)
    dropped = sig & ((np.uint64(1) << right) - np.uint64(1))
    inexact = (sig != 0) & ((shift > 63) | (dropped != 0))
    if np.any(inexact):
        raise ValueError(
            f"value not representable in {fmt.name}: too many significant digits, "
            "or below the subnormal grid"
        )
    n = (sig >> right) << left  # at most `precision` digits now
    biased = np.where(n >= np.uint64(1 << t), lsb + t + fmt.bias, 0)
    if np.any((sig != 0) & (biased >= fmt.exponent_mask)):
        raise ValueError(f"value above the largest finite {fmt.name}")
    bits = (
        (sign_a.astype(np.uint64) << np.uint64(fmt.bits - 1))
        | (np.where(sig != 0, biased, 0).astype(np.uint64) << np.uint64(t))
        | (n & np.uint64(fmt.fraction_mask))
    )
    return _out(bits.astype(fmt.uint_dtype))


def ulp(x: Any, fmt: Any) -> Any:
    """Spacing of ``fmt`` at the value ``x`` (float64).

    ``2**(max(floor(log2|x|), emin) - fraction_bits)``: the spacing of the binade holding
    ``|x|``, and the subnormal spacing ``2**(emin - fraction_bits)`` below the normal range and at
    zero. ``x`` is a value (any real dtype, converted to float64 exactly when it is a float16,
    bfloat16 or float32), not a bit pattern; at an exact power of two this is the spacing above.
    Finite values beyond the format's range get their binade's spacing as well (the largest
    finite value gets ``2**(emax - fraction_bits)``, where ``np.spacing`` says inf). Inf and NaN
    give NaN.
    """
    fmt = get_format(fmt)
    with np.errstate(invalid="ignore"):  # NaN / Inf inputs: handled below
        v = np.abs(np.asarray(x).astype(np.float64))
        _, e = np.frexp(v)  # v = m * 2**e with 0.5 <= m < 1, so floor(log2 v) = e - 1
    e = np.where(v == 0, fmt.emin, np.maximum(e.astype(np.int64) - 1, fmt.emin))
    out = np.ldexp(1.0, e - fmt.fraction_bits)
    return _out(np.where(np.isfinite(v), out, np.nan))


def to_fraction(bits: int, fmt: Any) -> Fraction:
    """Exact value of one finite pattern (a Python int) as a ``Fraction``; raises on Inf/NaN.

    The sign of zero is lost (``Fraction`` has no −0); read it from the pattern's top bit.
    """
    fmt = get_format(fmt)
    bits = int(bits)
    if not 0 <= bits < (1 << fmt.bits):
        raise ValueError(f"pattern {bits:#x} out of range for {fmt.name}")
    sign = bits >> (fmt.bits - 1)
    biased = (bits >> fmt.fraction_bits) & fmt.exponent_mask
    fraction = bits & fmt.fraction_mask
    if biased == fmt.exponent_mask:
        raise ValueError(f"pattern {bits:#x} is Inf or NaN in {fmt.name}")
    if biased == 0:
        significand, exponent = fraction, fmt.emin - fmt.fraction_bits
    else:
        significand = fraction | (1 << fmt.fraction_bits)
        exponent = biased - fmt.bias - fmt.fraction_bits
    value = Fraction(significand) * (Fraction(2) ** exponent)
    return -value if sign else value
