"""Rounding exact values to fp32 / fp16 (and bf16, the fp8 formats) with RNE, RZ and RD; flushing; truncating fp16.

Two roundings of the same definition:

* :func:`round_fraction`: one exact value (``Fraction`` or ``int``), pure Python integers. It is
  the slow oracle the other tests compare with, so it is written to be read, not to be fast.
* :func:`round_float64`: float64 arrays, vectorised numpy, one rounding straight from the 53-bit
  float64 significand to the target (fp16 does not pass through fp32, so there is no double
  rounding).

Both round to the target's grid with subnormals kept (gradual underflow), then handle overflow by
mode: RNE gives ±inf at and beyond ``max + ulp/2``; RZ gives ±max; RD gives +max for large
positives and −inf for large negatives. A nonzero value that rounds to zero keeps its sign; an
exact zero gets the sign the caller gives.

Also here: :func:`flush_subnormals` (FTZ with the two sign rules of the MI200 matrix unit, as
MMA-Sim, arXiv 2511.10909, and Khattak & Mikaitis, arXiv 2512.07004, model it),
:func:`fp32_to_fp16_truncate`, the table conversion of rocMLIR's 2022 test harness
(github.com/ROCm/rocMLIR), :func:`fp32_to_fp16`, the GPU's ``v_cvt_f16_f32`` (RNE): numpy's cast,
bit for bit, at the same speed for every input (numpy's cast slows 8-30x on overflowing and
subnormal results), :func:`cast_rne` / :func:`round_rne` (float64 values rounded into any
format of :mod:`emu.formats`, as a C cast rounds) and :func:`fp16_rne_differs` (which elements an
fp16-rounded validation and a kernel output disagree on).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from .decode import fp16_value
from .formats import (
    FP16,
    FP64,
    FloatFormat,
    as_bits,
    get_format,
    pattern_array,
    resolve_format,
    scalar_if_0d,
    split_fields,
)
from .jit import jit, run_tasks
from .kernels._scalar import round_to_fp16_rne
from .units import Rounding

__all__ = [
    "Rounding",
    "round_fraction",
    "round_float64",
    "flush_subnormals",
    "fp32_to_fp16_truncate",
    "fp32_to_fp16",
    "cast_rne",
    "round_rne",
    "fp16_rne_differs",
]


def _mode(mode: Any) -> Rounding:
    """Resolve a :class:`Rounding` member, its int value, or a name ("rne", "rz", "rd")."""
    if isinstance(mode, str):
        try:
            return Rounding[mode.upper()]
        except KeyError:
            raise ValueError(f"unknown rounding mode {mode!r}") from None
    return Rounding(int(mode))


def _overflow_bits(negative: bool, fmt: FloatFormat, mode: Rounding, saturate: bool = False) -> int:
    """Result of a value whose rounded magnitude exceeds the largest finite one: ±inf or ±max by
    mode, NaN where the format has no infinity, ±max always with ``saturate``."""
    to_inf = not saturate and (mode == Rounding.RNE or (mode == Rounding.RD and negative))
    sign = fmt.sign_mask if negative else 0
    if not to_inf:
        return sign | fmt.max_bits
    if not fmt.has_infinity:
        return fmt.qnan_bits if fmt.encoding == "fnuz" else sign | fmt.qnan_bits
    return sign | fmt.inf_bits


def round_fraction(value: Fraction | int, fmt: Any, mode: Any, zero_sign: int = 0, saturate: bool = False) -> int:
    """Round one exact value to ``fmt``; return the bit pattern as a Python int.

    Parameters
    ----------
    value
        A finite exact value: ``Fraction``, ``int`` (or anything ``Fraction(value)`` takes
        exactly, e.g. a finite Python float).
    fmt
        Target format (:data:`emu.formats.FP32`, ``FP16``, ``BF16``, or a name / ``Format``).
    mode
        :class:`Rounding`: ``RNE`` to nearest, ties to even; ``RZ`` toward zero; ``RD`` toward
        −∞. Its int value or name ("rne", "rz", "rd") also works.
    zero_sign
        Sign bit (0 or 1) given to an exact zero. A nonzero value that rounds to zero keeps its
        own sign (formats without −0, the "fnuz" fp8 ones, give +0).
    saturate
        Overflow gives ±max in every mode (PTX ``cvt … .satfinite``). Without it, overflow gives
        ±inf or ±max by mode (module text); formats without infinities (e4m3, the fnuz formats)
        give NaN where ±inf would be, as ``ml_dtypes`` does.

    A value overflows when its magnitude, rounded on the grid of the largest binade continued
    upward, exceeds the largest finite value (448 for e4m3: 464 rounds to 448, above 464 is NaN).
    """
    fmt = get_format(fmt)
    mode = _mode(mode)
    value = Fraction(value)
    if value == 0:
        return fmt.sign_mask if zero_sign and fmt.has_negative_zero else 0
    negative = value < 0
    a = abs(value)

    # 1. e = floor(log2 a): a first guess from the bit lengths, then corrected by comparison.
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if a < Fraction(2) ** e:
        e -= 1
    assert Fraction(2) ** e <= a < Fraction(2) ** (e + 1)

    # 2. Grid of the result: spacing 2**q, the binade's or, below emin, the subnormal one.
    q = max(e, fmt.emin) - fmt.fraction_bits
    scaled = a / Fraction(2) ** q
    n = scaled.numerator // scaled.denominator  # truncated magnitude in units of 2**q
    rest = scaled - n  # in [0, 1)

    # 3. Round the magnitude.
    if mode == Rounding.RNE:
        if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2 == 1):
            n += 1
    elif mode == Rounding.RD:
        if negative and rest != 0:
            n += 1  # toward −∞ is away from zero for negatives
    # RZ: the truncated n is the result.

    # 4. A carry into the next binade keeps the value exact: renormalise.
    if n == 1 << fmt.precision:
        n >>= 1
        q += 1
    # 5. Encode n * 2**q; n < 2**fraction_bits only on the subnormal grid (or for zero).
    sign_bits = fmt.sign_mask if negative and (n or fmt.has_negative_zero) else 0
    if n < (1 << fmt.fraction_bits):
        return sign_bits | n
    biased = q + fmt.fraction_bits + fmt.bias
    if biased > fmt.exponent_mask or (biased << fmt.fraction_bits | (n & fmt.fraction_mask)) > fmt.max_bits:
        return _overflow_bits(negative, fmt, mode, saturate)
    return sign_bits | (biased << fmt.fraction_bits) | (n & fmt.fraction_mask)


def round_float64(x: Any, fmt: Any, mode: Any, saturate: bool = False) -> Any:
    """Round float64 values (taken as exact) to ``fmt`` in one step; return bit patterns.

    Parameters
    ----------
    x
        float64 array of any shape (other float dtypes are converted to float64, which is exact
        for float16 / bfloat16 / float32).
    fmt
        Target format (``FP32``, ``FP16``, ``BF16``, a name or a ``Format``).
    mode
        :class:`Rounding`: ``RNE``, ``RZ`` or ``RD``.
    saturate
        Overflow and ±inf give ±max (PTX ``cvt … .satfinite``); see :func:`round_fraction`.

    Returns
    -------
    ``uint32`` / ``uint16`` / ``uint8`` patterns, the same as :func:`round_fraction` gives for
    each finite ``x`` (with ``zero_sign`` the sign of a zero ``x``). ±inf stay ±inf in every mode
    (NaN in formats without infinities, ±max with ``saturate``); NaN becomes the canonical quiet
    NaN with the sign of ``x`` (the payload is not kept; "fnuz" formats have one NaN, 0x80).
    """
    fmt = get_format(fmt)
    mode = _mode(mode)
    x = np.asarray(x, dtype=np.float64)
    b = x.view(np.uint64)
    t = fmt.fraction_bits

    # 1. Decode float64: |x| = m * 2**lsb exactly, m < 2**53.
    negative = (b >> np.uint64(63)) != 0
    biased64 = ((b >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    m = b & np.uint64((1 << 52) - 1)
    is_normal64 = biased64 != 0
    m = np.where(is_normal64, m | np.uint64(1 << 52), m)
    lsb = np.where(is_normal64, biased64 - 1075, -1074)
    # floor(log2|x|); float64 subnormals lie far below every target's emin, any small value works.
    e = np.where(is_normal64, biased64 - 1023, -1075)

    # 2. Target grid 2**q; shift >= 1 since float64 carries more digits than any target.
    q = np.maximum(e, fmt.emin) - t
    shift = np.minimum(q - lsb, 60).astype(np.uint64)  # m < 2**53: a shift of 60 leaves n = 0
    n = m >> shift
    rest = m & ((np.uint64(1) << shift) - np.uint64(1))
    half = np.uint64(1) << (shift - np.uint64(1))

    # 3. Round the magnitude.
    if mode == Rounding.RNE:
        up = (rest > half) | ((rest == half) & ((n & np.uint64(1)) != 0))
    elif mode == Rounding.RD:
        up = negative & (rest != 0)
    else:
        up = np.zeros(n.shape, bool)
    n = n + up.astype(np.uint64)

    # 4. Carry into the next binade.
    carry = n == np.uint64(1 << fmt.precision)
    n = np.where(carry, n >> np.uint64(1), n)
    q = q + carry

    # 5. Encode; overflow and specials last.
    is_normal = n >= np.uint64(1 << t)
    biased = np.where(is_normal, q + t + fmt.bias, 0)
    magnitude = (np.clip(biased, 0, fmt.exponent_mask + 1).astype(np.uint64) << np.uint64(t)) | (
        n & np.uint64(fmt.fraction_mask)
    )
    overflow = magnitude > np.uint64(fmt.max_bits)
    if not fmt.has_negative_zero:  # fnuz: a result of zero is +0
        negative = negative & (n != 0)
    sign_bits = np.where(negative, np.uint64(fmt.sign_mask), np.uint64(0))
    bits = sign_bits | np.where(overflow, 0, magnitude)
    over = {neg: np.uint64(_overflow_bits(neg, fmt, mode, saturate)) for neg in (False, True)}
    bits = np.where(overflow, np.where(negative, over[True], over[False]), bits)
    special = biased64 == 0x7FF
    is_nan = special & ((b & np.uint64((1 << 52) - 1)) != 0)
    infinite = {neg: np.uint64(_overflow_bits(neg, fmt, Rounding.RNE, saturate)) for neg in (False, True)}
    bits = np.where(special, np.where(negative, infinite[True], infinite[False]), bits)
    nan_bits = np.uint64(fmt.qnan_bits)
    if fmt.encoding != "fnuz":
        nan_bits = sign_bits | nan_bits
    bits = np.where(is_nan, nan_bits, bits)
    return scalar_if_0d(bits.astype(fmt.uint_dtype))


def flush_subnormals(bits: Any, fmt: Any, keep_sign: bool) -> Any:
    """Flush subnormal patterns to zero (FTZ / DAZ); other patterns are returned unchanged.

    ``keep_sign=True``: a subnormal becomes the zero of its own sign (MI200 products and partial
    sums); zeros are left as they are.
    ``keep_sign=False``: every value with ``|x| < 2**emin``, subnormals and −0 alike, becomes +0
    (MI200 fp16 inputs and an fp32 subnormal accumulator on entry). Both rules as MMA-Sim
    (arXiv 2511.10909) and Khattak & Mikaitis (arXiv 2512.07004) model the MI200 unit.

    Returns patterns of the format's unsigned dtype, same shape.
    """
    fmt = get_format(fmt)
    a = pattern_array(bits, fmt)
    _, biased, _ = split_fields(a, fmt)
    tiny = biased == 0
    if not fmt.has_negative_zero:  # fnuz: 0x80 is the NaN, and there is no −0 to keep
        tiny = tiny & (a != np.uint64(fmt.sign_mask))
        keep_sign = False
    zero = (a & np.uint64(fmt.sign_mask)) if keep_sign else np.uint64(0)
    return scalar_if_0d(np.where(tiny, zero, a).astype(fmt.uint_dtype))


def _fox_tables() -> tuple[np.ndarray, np.ndarray]:
    """The 512-entry base and shift tables of van der Zijp's float→half conversion.

    Built as the rocMLIR harness builds them (``generateTables`` in
    ``mlir/lib/ExecutionEngine/conv-validation-wrappers.cpp``, 2022, ref.
    http://www.fox-toolkit.org/ftp/fasthalffloatconversion.pdf), indexed by the float32
    sign and biased exponent, ``(bits >> 23) & 0x1ff``.
    """
    base = np.zeros(512, np.uint16)
    shift = np.zeros(512, np.uint8)
    for i in range(256):
        e = i - 127
        if e < -24:  # very small numbers map to zero
            b, s = 0x0000, 24
        elif e < -14:  # small numbers map to subnormals
            b, s = 0x0400 >> (-e - 14), -e - 1
        elif e <= 15:  # normal numbers just lose precision
            b, s = (e + 15) << 10, 13
        elif e < 128:  # large numbers map to infinity
            b, s = 0x7C00, 24
        else:  # infinity and NaNs stay infinity and NaNs
            b, s = 0x7C00, 13
        base[i], base[i | 0x100] = b, b | 0x8000
        shift[i] = shift[i | 0x100] = s
    return base, shift


_F2H_BASE, _F2H_SHIFT = _fox_tables()


def fp32_to_fp16_truncate(x: Any) -> Any:
    """float32 → fp16 the way the rocMLIR 2022 test harness did it (``float_to_fp16``).

    ``h = base[(b >> 23) & 0x1ff] + ((b & 0x7fffff) >> shift[(b >> 23) & 0x1ff])`` on the
    float32 bits ``b``, with the tables of :func:`_fox_tables`. What that gives:

    * finite |x| < 65536: truncation toward zero onto the fp16 grid, subnormals included
      (|x| in [65504, 65536) gives ±65504);
    * |x| < 2**-24, float32 subnormals included: ±0 with the sign of x;
    * |x| >= 65536 (float32 exponent 16..127): ±inf, *not* ±max as truncation would give;
    * ±inf: ±inf;
    * NaN: ``sign | 0x7C00 | (fraction >> 13)``, i.e. the top 10 payload bits are kept, so a
      quiet NaN stays a NaN (0x7FC00000 → 0x7E00) but a NaN whose payload lies only in the
      low 13 bits becomes ±inf (0x7F800001 → 0x7C00).

    Parameters
    ----------
    x
        float32 array (or its ``uint32`` bit patterns), any shape.

    Returns
    -------
    ``uint16`` fp16 patterns of the same shape.
    """
    b = as_bits(x)
    if b.dtype != np.uint32:
        raise TypeError("fp32_to_fp16_truncate takes float32 values or uint32 patterns")
    index = (b >> np.uint32(23)) & np.uint32(0x1FF)
    fraction = b & np.uint32(0x7FFFFF)
    h = _F2H_BASE[index] + (fraction >> _F2H_SHIFT[index].astype(np.uint32)).astype(np.uint16)
    return scalar_if_0d(h.astype(FP16.uint_dtype))


_F2H_BLOCK = 1 << 16


def _fp32_to_fp16_bits(b, out):
    """out[i] = the fp16 pattern of the float32 pattern b[i], rounded to nearest even; NaN keeps
    the top 10 payload bits (0x7C01 if they are all 0): numpy's ``npy_floatbits_to_halfbits``.
    Parallel over elements."""
    run_tasks(lambda t0, t1: _fp32_to_fp16_bits_tasks(b, out, t0, t1), -(-b.size // _F2H_BLOCK))


@jit
def _fp32_to_fp16_bits_tasks(b, out, t0, t1):
    """Tasks ``t0`` … ``t1`` − 1 of :func:`_fp32_to_fp16_bits`."""
    n = b.size
    for t in range(t0, min(t1, (n + _F2H_BLOCK - 1) // _F2H_BLOCK)):
        for i in range(t * _F2H_BLOCK, min(n, (t + 1) * _F2H_BLOCK)):
            f = np.uint32(b[i])
            sign = (f >> np.uint32(16)) & np.uint32(0x8000)
            f_exp = f & np.uint32(0x7F800000)
            f_sig = f & np.uint32(0x007FFFFF)
            if f_exp >= np.uint32(0x47800000):  # |x| >= 2^16, inf, NaN
                h = np.uint32(0x7C00)
                if f_exp == np.uint32(0x7F800000) and f_sig != 0:
                    h = np.uint32(0x7C00) + (f_sig >> np.uint32(13))
                    if h == np.uint32(0x7C00):
                        h = np.uint32(0x7C01)
            elif f_exp <= np.uint32(0x38000000):  # fp16 subnormal or zero
                if f_exp < np.uint32(0x33000000):  # below 2^-25: rounds to zero
                    h = np.uint32(0)
                else:
                    sig = (np.uint32(0x00800000) + f_sig) >> (np.uint32(113) - (f_exp >> np.uint32(23)))
                    # round half up, except a tie whose kept bit is even (the bits the shift
                    # dropped count: f & 0x7FF)
                    if (sig & np.uint32(0x3FFF)) != np.uint32(0x1000) or (f & np.uint32(0x7FF)) != 0:
                        sig += np.uint32(0x1000)
                    h = sig >> np.uint32(13)  # a carry into the exponent gives 2^-14: right
            else:
                if (f_sig & np.uint32(0x3FFF)) != np.uint32(0x1000):
                    f_sig += np.uint32(0x1000)
                # a carry out of the significand steps the exponent (up to inf): right
                h = ((f_exp - np.uint32(0x38000000)) >> np.uint32(13)) + (f_sig >> np.uint32(13))
            out[i] = np.uint16(sign + h)


def fp32_to_fp16(x: Any) -> np.ndarray:
    """float32 → float16, round to nearest even (``v_cvt_f16_f32``; overflow to ±inf).

    Bit for bit ``x.astype(np.float16)`` (NaN payloads included), in numba, parallel over
    elements and as fast for overflowing and subnormal results as for the rest.

    Parameters
    ----------
    x
        float32 array (or its ``uint32`` bit patterns), any shape.

    Returns
    -------
    float16 array of the same shape.
    """
    b = as_bits(np.ascontiguousarray(x))
    if b.dtype != np.uint32:
        raise TypeError(f"fp32_to_fp16 takes float32 values or uint32 patterns, got {np.asarray(x).dtype}")
    flat = b.reshape(-1)
    out = np.empty(flat.size, np.uint16)
    if out.size:
        _fp32_to_fp16_bits(flat, out)
    return out.view(np.float16).reshape(np.shape(b))


def cast_rne(x: Any, fmt: Any) -> np.ndarray:
    """float64 values rounded to nearest even into an array of ``fmt``'s own dtype (overflow to
    ±inf, NaN stays NaN): what a C cast ``(half)x`` / ``(float)x`` gives.

    ``fmt``: anything :func:`emu.formats.resolve_format` takes. fp16 and fp32 use numpy's casts,
    which round once, to nearest even (the tests check them against :func:`round_float64`);
    bf16 and the fp8 formats use :func:`round_float64`, because ml_dtypes' casts from float64 go
    through float32 (a double rounding); binary64 is a copy. fp8 formats without infinities give
    NaN on overflow (``ml_dtypes``' rule; :func:`round_float64` with ``saturate`` gives ±max).
    """
    f = resolve_format(fmt)
    x = np.asarray(x)
    if f.short_name not in ("fp16", "fp32", "fp64"):
        return round_float64(x, f, "rne").view(f.float_dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(f.float_dtype)


def round_rne(x: Any, fmt: Any) -> np.ndarray:
    """float64 values rounded to nearest even onto ``fmt``'s grid, returned as float64 (the values
    of :func:`cast_rne`); for binary64, ``x`` itself."""
    f = resolve_format(fmt)
    if f is FP64:
        return x
    return cast_rne(x, f).astype(np.float64)


_DIFFERS_BLOCK = 1 << 16


def _fp16_rne_differs_pass(v, k, k_is_fp16, mask, block_max, block):
    """``v`` float32 or float64 (read as ``(float)v``); ``k`` float32 values, or fp16 bit patterns
    (uint16) when ``k_is_fp16``: decoded here, so no float32 copy of a large kernel output."""
    run_tasks(
        lambda t0, t1: _fp16_rne_differs_pass_tasks(v, k, k_is_fp16, mask, block_max, block, t0, t1), block_max.size
    )


@jit
def _fp16_rne_differs_pass_tasks(v, k, k_is_fp16, mask, block_max, block, t0, t1):
    """Tasks ``t0`` … ``t1`` − 1 of :func:`_fp16_rne_differs_pass`."""
    n = v.size
    for b in range(t0, min(t1, block_max.size)):
        best = np.float32(0.0)
        for i in range(b * block, min(n, (b + 1) * block)):
            c = round_to_fp16_rne(np.float64(np.float32(v[i])))
            g = fp16_value(k[i], False) if k_is_fp16 else np.float32(k[i])
            mask[i] = not (c == g)
            ac, ag = abs(c), abs(g)
            m = ag if ac < ag else ac
            if m > best:
                best = m
        block_max[b] = best


def fp16_rne_differs(v32: np.ndarray, k32: np.ndarray) -> tuple[np.ndarray, float]:
    """Where the fp16 rounding of ``v32`` differs from ``k32``, and the largest magnitude.

    Parameters
    ----------
    v32, k32
        1-D arrays of the same size: ``v32`` float32 (float64 is read as ``(float)v``, rounded to
        float32 first), ``k32`` float32 or float16 (usually fp16 values; float16 is read bit for
        bit, without a float32 copy).

    Returns
    -------
    mask
        bool array: ``c != k32[i]`` with ``c`` the RNE of ``v32[i]`` to fp16 (overflow to ±inf),
        compared as values: −0 equals +0, NaN differs from everything, NaN included.
    max_mag
        The largest ``max(|c|, |k32[i]|)`` over all elements, as C's
        ``std::max(m, std::max(|c|, |g|))`` takes it from ``m = 0``: a NaN never wins
        (0.0 for an empty array or an all-NaN one).

    Parallel over blocks of 65,536 elements in numba; each block's maximum is exact, so the
    result is the same for any thread count.
    """
    v32 = np.asarray(v32)
    v32 = np.ascontiguousarray(v32, np.float64 if v32.dtype == np.float64 else np.float32)
    k32 = np.asarray(k32)
    k_is_fp16 = k32.dtype == np.float16
    k32 = np.ascontiguousarray(k32).view(np.uint16) if k_is_fp16 else np.ascontiguousarray(k32, np.float32)
    if v32.ndim != 1 or v32.shape != k32.shape:
        raise ValueError(f"v32, k32: need two 1-D arrays of one size, got {v32.shape}, {k32.shape}")
    mask = np.empty(v32.size, np.bool_)
    block_max = np.zeros(-(-v32.size // _DIFFERS_BLOCK) or 1, np.float32)
    _fp16_rne_differs_pass(v32, k32, k_is_fp16, mask, block_max, _DIFFERS_BLOCK)
    return mask, float(block_max.max())
